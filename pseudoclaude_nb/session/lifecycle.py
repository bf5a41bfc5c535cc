"""Session lifecycle (SPEC §6.4): trash, restore, purge and garbage collection.

A session is user data, so nothing here deletes without being asked twice: ``trash`` and
``gc`` only *move* a session directory to ``.pseudoclaude/trash/<id>/`` (one ``rename``,
atomic) with a ``trashed.json`` saying where it came from; only ``purge`` deletes, and the
magic asks for ``--yes`` after stating what would go. ``gc`` judges a session by its last
activity (from the catalog), never by its creation time.

This module moves and deletes directories; it never reads or writes a log itself (the
catalog does that) and never touches a session another process holds ``writer.lock`` on.

What is derived from the logs across sessions (the history index) follows a session that
leaves or comes back through an ``IndexHook`` the caller passes (``history.LIFECYCLE_HOOK``):
the log layer tells its index and never imports it (issue 33).
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .. import safeio
from ..errors import SessionError, SessionLockedError, SessionNotFoundError
from ..workspace import LOCK_NAME, LOG_NAME, atomic_write_text, ensure_state_dir, sessions_dir, state_dir
from .catalog import SessionInfo, list_sessions, session_info

TRASH_DIR = "trash"
TRASHED_NAME = "trashed.json"
TRASHED_VERSION = 1
# A directory being purged is first renamed to this prefix: a crash mid-delete then
# leaves a hidden leftover that the next purge finishes, never half a listed session.
_PURGING = ".purging-"


class IndexHook(Protocol):
    """An index derived from the logs, told when sessions leave or come back; never raises.

    Without one, the history index notices at its next sync of all sessions: it drops the
    rows of a log that is gone (its files keep the words until a rebuild) and indexes a
    restored one.
    """

    def forget(self, workspace: Path, session_ids: list[str], *, scrub: bool) -> None:
        """Drop the sessions' rows; ``scrub`` also rebuilds the files without their text."""

    def restored(self, workspace: Path, session_dir: Path) -> None:
        """Index a session that is back under ``sessions/``."""


@dataclass
class TrashedSession:
    id: str  # its name in trash/: what restore and purge take
    original_id: str
    trashed_at: float
    reason: str  # "manual" or "gc"
    title: str
    last_activity: float
    bytes: int  # the whole directory, spilled results included
    path: Path


@dataclass
class PurgePlan:
    """What a purge would delete; nothing is deleted until ``purge(plan)``."""

    sessions: list[TrashedSession]

    @property
    def count(self) -> int:
        return len(self.sessions)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.sessions)


@dataclass
class GcReport:
    days: float
    cutoff: float
    moved: list[TrashedSession] = field(default_factory=list)
    skipped: list[tuple[SessionInfo, str]] = field(default_factory=list)  # (session, why)


def trash_dir(workspace: Path) -> Path:
    return state_dir(workspace) / TRASH_DIR


def checked_trash(workspace: Path, *, create: bool = False) -> Path | None:
    """The trash folder, if it is one (``None``: there is no trash yet).

    A clone can ship ``.pseudoclaude/trash`` as a link to any folder of the person's: listed
    through it, every folder there would be a "trashed session", and ``purge --all-trash``
    would delete them all. So ``.pseudoclaude/`` and ``trash/`` are opened from the workspace
    without following a link (``safeio.open_dir``), and a link is refused with
    ``UnsafePathError``, which names the path and says to remove it.
    """
    root = trash_dir(workspace)
    try:
        os.close(safeio.open_dir(root, create=create))
    except FileNotFoundError:
        return None
    return root


def check_name(name: str) -> str:
    """A session id or trash name as typed by a user: one path component, nothing hidden."""
    if not name or "/" in name or "\\" in name or "\0" in name or name.startswith("."):
        raise SessionNotFoundError(f"{name!r} is not a session id; see %sessions list")
    return name


def dir_bytes(path: Path) -> int:
    """Bytes of the regular files under ``path``; symlinks are neither followed nor counted."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


# --- trash ------------------------------------------------------------------------------------


@contextmanager
def _holding_lock(session_dir: Path, session_id: str) -> Iterator[None]:
    """Hold the session's writer lock while it moves, so no kernel can open it mid-move."""
    fds: list[int] = []
    try:
        for name in (LOCK_NAME, LOG_NAME):
            try:
                # No link followed: an unsafe session's lock target is never created or locked.
                fd = safeio.open_file(
                    session_dir / name, os.O_RDONLY | (os.O_CREAT if name == LOCK_NAME else 0)
                )
            except FileNotFoundError:
                raise SessionNotFoundError(
                    f"session {session_id} is gone (moved by another kernel?)"
                ) from None
            fds.append(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SessionLockedError(session_id, _pid_in(fds[0])) from None
        yield
    finally:
        for fd in fds:
            os.close(fd)  # closing releases the lock


def _pid_in(fd: int) -> int | None:
    try:
        raw = os.pread(fd, 32, 0).decode().strip()
        return int(raw) if raw else None
    except (OSError, ValueError):
        return None


def trash_session(
    workspace: Path,
    session_id: str,
    *,
    open_id: str | None = None,
    reason: str = "manual",
    now: float | None = None,
    index: IndexHook | None = None,
) -> TrashedSession:
    """Move ``sessions/<id>/`` to ``trash/``; refused for an open session (here or elsewhere)."""
    check_name(session_id)
    src = sessions_dir(workspace) / session_id
    if not (src / LOG_NAME).is_file():
        raise SessionNotFoundError(
            f"no session {session_id} in {sessions_dir(workspace)}; see %sessions list"
        )
    if session_id == open_id:
        raise SessionError(
            f"session {session_id} is open in this kernel; run %sessions new (or resume another "
            "session) first, then trash it"
        )
    root = checked_trash(workspace, create=True)
    assert root is not None  # made if missing
    with _holding_lock(src, session_id):
        info = session_info(src)  # refreshes meta.json, so the trashed copy lists without a replay
        name = _free_name(root, session_id)
        os.rename(src, root / name)
    trashed = {
        "version": TRASHED_VERSION,
        "original_id": session_id,
        "trashed_at": time.time() if now is None else now,
        "reason": reason,
        "title": info.title,
        "last_activity": info.last_activity,
    }
    # After the move: a crash in between leaves a trashed session without its note, which
    # list_trash reads as "original id = its name", rather than a note in a live session.
    atomic_write_text(root / name / TRASHED_NAME, json.dumps(trashed, ensure_ascii=False, indent=1))
    # A trashed session is not searchable: its rows leave the index now (restore re-indexes).
    if index is not None:
        index.forget(workspace, [session_id], scrub=False)
    return _trashed(root / name)


def _free_name(root: Path, session_id: str) -> str:
    """``<id>``, or ``<id>~2``… when an earlier session of that id is already in the trash."""
    name, n = session_id, 1
    while (root / name).exists():
        n += 1
        name = f"{session_id}~{n}"
    return name


def list_trash(workspace: Path) -> list[TrashedSession]:
    """Trashed sessions, most recently trashed first."""
    root = checked_trash(workspace)
    if root is None or not root.is_dir():
        return []
    found = [
        _trashed(d)
        for d in root.iterdir()
        if d.is_dir() and not d.is_symlink() and not d.name.startswith(".")
    ]
    found.sort(key=lambda t: (t.trashed_at, t.id), reverse=True)
    return found


def _trashed(path: Path) -> TrashedSession:
    note = _read_json(path / TRASHED_NAME)
    meta = _read_json(path / "meta.json")
    return TrashedSession(
        id=path.name,
        original_id=_text(note.get("original_id")) or path.name,
        trashed_at=_number(note.get("trashed_at")) or path.stat().st_mtime,
        reason=_text(note.get("reason")) or "manual",
        title=_text(note.get("title")) or _text(meta.get("title")),
        last_activity=_number(note.get("last_activity")) or _number(meta.get("last_activity")),
        bytes=dir_bytes(path),
        path=path,
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(safeio.read_bytes(path, limit=1 << 20))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _number(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    try:
        return float(value)
    except OverflowError:  # an integer of thousands of digits
        return 0.0


def _find_trashed(workspace: Path, trash_id: str) -> Path:
    check_name(trash_id)
    root = checked_trash(workspace)
    path = trash_dir(workspace) / trash_id
    if root is not None and path.is_dir() and not path.is_symlink():
        return path
    if (sessions_dir(workspace) / trash_id / LOG_NAME).is_file():
        raise SessionNotFoundError(
            f"session {trash_id} is not in the trash; trash it first with %sessions trash {trash_id}"
        )
    raise SessionNotFoundError(f"no trashed session {trash_id}; see %sessions trash for the list")


# --- restore and purge ------------------------------------------------------------------------


def restore_session(workspace: Path, trash_id: str, *, index: IndexHook | None = None) -> Path:
    """Move a trashed session back under its original id; refused if that id is taken."""
    src = _find_trashed(workspace, trash_id)
    original = check_name(_trashed(src).original_id)
    target = ensure_state_dir(workspace) / "sessions" / original
    if target.exists():
        raise SessionError(
            f"cannot restore {trash_id}: a session {original} already exists in "
            f"{sessions_dir(workspace)}; trash that one first (%sessions trash {original}), then restore"
        )
    os.rename(src, target)
    (target / TRASHED_NAME).unlink(missing_ok=True)
    if index is not None:
        index.restored(workspace, target)
    return target


def plan_purge(workspace: Path, trash_id: str | None = None) -> PurgePlan:
    """One trashed session, or (``None``) the whole trash."""
    if trash_id is None:
        return PurgePlan(list_trash(workspace))
    return PurgePlan([_trashed(_find_trashed(workspace, trash_id))])


def purge(plan: PurgePlan, workspace: Path | None = None, *, index: IndexHook | None = None) -> int:
    """Delete the plan's sessions for good; returns the bytes freed.

    Given the history index's hook, their rows leave history.sqlite in the same step, and
    the index files are rebuilt so the deleted text is gone from them too
    (``HistoryIndex.forget(scrub=True)``).
    """
    freed = 0
    for t in plan.sessions:
        # Checked again just before the delete: the plan may have been made before a link was put there.
        try:
            os.close(safeio.open_dir(t.path))
        except FileNotFoundError:
            continue  # already gone (another kernel purged it)
        doomed = t.path.with_name(f"{_PURGING}{t.id}-{secrets.token_hex(3)}")
        os.rename(t.path, doomed)
        shutil.rmtree(doomed)
        freed += t.bytes
    if plan.sessions:
        root = plan.sessions[0].path.parent
        _finish_interrupted_purges(root)
        ws = workspace if workspace is not None else root.parent.parent  # <ws>/.pseudoclaude/trash
        ids = [t.original_id for t in plan.sessions] + [t.id for t in plan.sessions]
        if index is not None:
            index.forget(ws, ids, scrub=True)
    return freed


def _finish_interrupted_purges(root: Path) -> None:
    for leftover in root.glob(f"{_PURGING}*"):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)


# --- garbage collection -----------------------------------------------------------------------


def gc_sessions(
    workspace: Path,
    days: float,
    *,
    open_id: str | None = None,
    now: float | None = None,
    index: IndexHook | None = None,
) -> GcReport:
    """Move sessions idle for more than ``days`` (by last activity) to the trash."""
    now = time.time() if now is None else now
    report = GcReport(days=days, cutoff=now - days * 86_400)
    for info in list_sessions(workspace):
        if info.last_activity >= report.cutoff:
            continue
        if info.id == open_id:
            report.skipped.append((info, "open in this kernel"))
            continue
        try:
            report.moved.append(
                trash_session(workspace, info.id, open_id=open_id, reason="gc", now=now, index=index)
            )
        except SessionLockedError:
            report.skipped.append((info, "open in another process"))
        except SessionNotFoundError:
            continue  # trashed meanwhile by another kernel
    return report
