"""The workspace boundary: every path a tool touches goes through ``resolve_in_workspace``.

Paths are resolved with symlinks followed, then compared against the resolved workspace, so
``..``, absolute paths and symlinks (to files or to parent directories) cannot leave it. This
module only decides where a path points; it never opens a file.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import BoundaryError

# The session logs live here; tools may read them (spilled results are there) but not write.
STATE_DIR = ".pseudoclaude"


def resolve_in_workspace(workspace: Path, path: str, *, write: bool = False) -> Path:
    """Return the resolved absolute path of ``path``, or raise ``BoundaryError``.

    Relative paths are taken relative to the workspace; absolute paths must point inside it.
    With ``write=True`` the workspace's ``.pseudoclaude/`` directory is refused too.
    """
    root = Path(workspace).resolve()
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        resolved = candidate.resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        # RuntimeError: a symlink loop (Python < 3.13); ValueError: an embedded NUL byte.
        raise BoundaryError(f"refused: cannot resolve path {path!r} ({exc})") from None
    if not resolved.is_relative_to(root):
        raise BoundaryError(
            f"refused: path {path!r} resolves to {resolved}, outside the workspace {root}; "
            "use a path inside the workspace"
        )
    if write:
        parts = resolved.relative_to(root).parts
        # casefold: on case-insensitive file systems (macOS) ".PseudoClaude" is the same dir.
        if parts and parts[0].casefold() == STATE_DIR:
            raise BoundaryError(
                f"refused: path {path!r} is inside {root / STATE_DIR}, which holds the session "
                f"logs; tools may read it but not write it. Write elsewhere in the workspace {root}"
            )
    return resolved


def display_path(workspace: Path, resolved: Path) -> str:
    """The path as the model should see it: relative to the workspace, with ``/``."""
    root = Path(workspace).resolve()
    try:
        rel = resolved.relative_to(root)
    except ValueError:
        return str(resolved)
    return rel.as_posix() if rel.parts else "."
