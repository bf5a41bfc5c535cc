"""Where things live: the workspace, ``.pseudoclaude/``, session directories and ids.

Session ids are local time plus two random bytes (``20261130-142030-a1b2``), claimed
with an exclusive ``mkdir`` so two kernels starting in the same second cannot collide.

It sits at the top of the package, beside ``safeio``, because tools, memory and MCP need
the workspace's layout too and must not import the session log layer to get it.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

from . import safeio
from .errors import ConfigError, SessionError, SessionNotFoundError

STATE_DIR = ".pseudoclaude"
LOG_NAME = "conversation.jsonl"
META_NAME = "meta.json"
TIMELINE_INDEX = "timeline.idx"  # derived, like meta.json (session.timeline.index)
STEP_FIGURES = "steps.idx"  # derived too: per-message figures of a step's request (session.step_figures)
LOCK_NAME = "writer.lock"
SPILL_DIR = "tool-results"
GITIGNORE = (
    "# written by pseudoclaude_nb: session logs are private by default\nsessions/\ntrash/\nhistory.sqlite*\n"
)


def resolve_workspace(
    configured: str | os.PathLike[str] | None = None,
    *,
    cwd: str | os.PathLike[str] | None = None,
    environ: dict[str, str] | None = None,
    notebook_file: str | None = None,
) -> Path:
    """The notebook's directory.

    Order: an explicit setting; the notebook named by VS Code (``__vsc_ipynb_file__``,
    passed as ``notebook_file``) or by Jupyter (``JPY_SESSION_NAME``); else the kernel's
    working directory.
    """
    env = os.environ if environ is None else environ
    base = Path(cwd) if cwd is not None else Path.cwd()
    if configured:
        path = Path(configured).expanduser()
        path = path if path.is_absolute() else base / path
        if not path.is_dir():
            raise ConfigError(
                f"workspace {path} is not a directory; set PseudoClaude.workspace to an existing folder"
            )
        return path.resolve()
    for candidate in (notebook_file, env.get("JPY_SESSION_NAME")):
        if candidate:
            nb = Path(candidate).expanduser()
            nb = nb if nb.is_absolute() else base / nb
            if nb.parent.is_dir():
                return nb.parent.resolve()
    return base.resolve()


def log_path(path_or_dir: str | Path) -> Path:
    """A session's log: the ``conversation.jsonl`` of a session directory, or the file given.

    Here, beside ``LOG_NAME``, so a writer of a session (its spend, at a run's end) finds its log
    without importing the loader (``session.loader`` names it too)."""
    path = Path(path_or_dir)
    return path / LOG_NAME if path.is_dir() else path


def state_dir(workspace: Path) -> Path:
    return Path(workspace) / STATE_DIR


def sessions_dir(workspace: Path) -> Path:
    return state_dir(workspace) / "sessions"


def ensure_state_dir(workspace: Path) -> Path:
    """Create ``.pseudoclaude/`` with its ``.gitignore`` on first use."""
    root = state_dir(workspace)
    safeio.make_dirs(root / "sessions", mode=0o755)  # refuses a symlinked .pseudoclaude/ or sessions/
    ignore = root / ".gitignore"
    if not os.path.lexists(ignore):
        atomic_write_text(ignore, GITIGNORE)
    return root


def new_session_dir(workspace: Path, *, now: float | None = None) -> Path:
    """Claim a fresh session directory; up to 10 tries on a collision."""
    parent = ensure_state_dir(workspace) / "sessions"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    for _ in range(10):
        path = parent / f"{stamp}-{secrets.token_hex(2)}"
        fd = safeio.open_dir(parent)
        try:
            os.mkdir(path.name, 0o700, dir_fd=fd)
        except FileExistsError:
            continue
        finally:
            os.close(fd)
        return path
    raise SessionError(f"could not claim a new session id in {parent} after 10 tries; retry")


def session_dir(workspace: Path, session_id: str) -> Path:
    if not session_id or "/" in session_id or session_id.startswith("."):
        raise SessionNotFoundError(f"{session_id!r} is not a session id; see %sessions list")
    path = sessions_dir(workspace) / session_id
    if not os.path.lexists(path / LOG_NAME):
        raise SessionNotFoundError(
            f"no session {session_id} in {sessions_dir(workspace)}; see %sessions list"
        )
    return path


def atomic_write_text(path: Path, text: str, *, mode: int = 0o600) -> None:
    """Write a temporary file beside ``path``, fsync it, then ``os.replace``; no link is followed."""
    safeio.write_atomic(path, text, mode=mode)
