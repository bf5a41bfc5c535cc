r"""The workspace boundary: every path a tool touches goes through ``resolve_in_workspace``.

Paths are resolved with symlinks followed, then compared against the resolved workspace, so
``..``, absolute paths and symlinks (to files or to parent directories) cannot leave it.

A path naming a file whose name is not UTF-8 may be given as the tools show it, each
undecodable byte as ``\xNN`` (``list_files`` prints ``caf\xe9.txt``): when no file has the
name as written, the name with those bytes is tried (``escaped_name``).

Files are then opened by ``open_resolved``: from an fd of the workspace, one component at a
time with ``O_NOFOLLOW``, so a component swapped for a symlink between the check and the
open is refused instead of followed (no check-then-open race). A regular file with more
than one hard link is refused for reading and writing: its other names may be outside the
workspace (``ln /etc/passwd x`` made with bash), and nothing cheap can tell where they are.
"""

from __future__ import annotations

import errno
import io
import os
import re
import stat
from pathlib import Path
from typing import IO

from .. import safeio
from ..errors import BoundaryError, ToolError

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
    candidate = escaped_name(candidate)
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


# \xNN for a byte 0x80-0xFF: what ``textsafe.escape_surrogates`` writes for ``os``'s U+DC80-U+DCFF.
_BYTE_ESCAPE = re.compile(r"\\x([89a-fA-F][0-9a-fA-F])")


def escaped_name(candidate: Path) -> Path:
    """``candidate``, or, when nothing has that name and it holds ``\\xNN`` escapes, the
    name with the bytes they stand for if that exists (a name as the tools show it)."""
    text = str(candidate)
    if "\\x" not in text or os.path.lexists(text):
        return candidate
    raw = _BYTE_ESCAPE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), text)
    return Path(raw) if raw != text and os.path.lexists(raw) else candidate


def display_path(workspace: Path, resolved: Path) -> str:
    """The path as the model should see it: relative to the workspace, with ``/``."""
    root = Path(workspace).resolve()
    try:
        rel = resolved.relative_to(root)
    except ValueError:
        return str(resolved)
    return rel.as_posix() if rel.parts else "."


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def open_resolved(
    workspace: Path,
    resolved: Path,
    flags: int = os.O_RDONLY,
    mode: int = 0o666,
    *,
    make_parents: bool = False,
) -> int:
    """An fd of the regular file ``resolved`` (from ``resolve_in_workspace``), opened without a race.

    Raises ``BoundaryError`` if a component turned into a link, ``ToolError`` for a file that
    is not regular or is hard-linked, ``OSError`` (FileNotFoundError…) otherwise.
    """
    root = Path(workspace).resolve()
    parts = resolved.relative_to(root).parts
    if not parts:
        raise ToolError(f"{display_path(root, resolved)} is a directory, not a file")
    dfd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    try:
        for name in parts[:-1]:
            if make_parents:
                try:
                    os.mkdir(name, 0o777, dir_fd=dfd)
                except FileExistsError:
                    pass
            try:
                nxt = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=dfd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise _swapped(root, resolved) from None
                raise
            os.close(dfd)
            dfd = nxt
        try:
            fd = os.open(parts[-1], flags | _NOFOLLOW | _NONBLOCK | _CLOEXEC, mode, dir_fd=dfd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _swapped(root, resolved) from None
            if exc.errno == errno.ENXIO:
                raise ToolError(f"{display_path(root, resolved)} is not a regular file") from None
            raise
    finally:
        os.close(dfd)

    def refuse(st: os.stat_result) -> ToolError:
        shown = display_path(root, resolved)
        if stat.S_ISDIR(st.st_mode):
            return ToolError(f"{shown} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            return ToolError(f"{shown} is not a regular file")  # a FIFO or device would block or never end
        return BoundaryError(
            f"refused: {shown} has {st.st_nlink} hard links, and another name for it may be "
            "outside the workspace; copy it (cp) to a file of its own to work on it"
        )

    return safeio.accept_regular(fd, single_link=True, refuse=refuse)


def _swapped(root: Path, resolved: Path) -> BoundaryError:
    return BoundaryError(
        f"refused: {display_path(root, resolved)} changed into a symbolic link while it was opened; "
        "try again with the link's target"
    )


def open_text(workspace: Path, resolved: Path, *, newline: str | None = None) -> IO[str]:
    """``open_resolved`` for reading text (UTF-8, errors replaced)."""
    fd = open_resolved(workspace, resolved)
    return io.open(fd, encoding="utf-8", errors="replace", newline=newline)  # noqa: UP020 - an fd
