"""The catalog: what sessions a workspace has, from their ``meta.json`` sidecars.

A sidecar is derived data: it records the log size and the byte offset it was built from
(``sidecar``), and the replay state at that offset. The writer brings it up to date every
few appends, on each replace and on close; a reader finding it stale reads only the log
bytes after its offset, so neither ``%sessions list`` nor ``resume --last`` replays a
whole log once its sidecar exists. A missing or foreign sidecar costs one streamed replay
of its log (the counts still cover every logged message and every unreadable line).
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import orjson

from .. import safeio
from ..errors import SessionError, SessionNotFoundError
from ..workspace import LOCK_NAME, LOG_NAME, META_NAME, STEP_FIGURES, TIMELINE_INDEX, sessions_dir
from . import sidecar_meta
from .locks import held, is_locked

if TYPE_CHECKING:
    from .loader import LoadResult

META_VERSION = sidecar_meta.META_VERSION
META_LIMIT = sidecar_meta.META_LIMIT


def _sidecar() -> ModuleType:  # typed loosely: a module, its functions Any to the checker
    """The incremental replay, imported when a sidecar must be (re)built: it brings the log's
    entry readers and pydantic's message models, which a listing of current sidecars never
    needs (issue 34: the first ``%sessions list`` of a fresh kernel)."""
    from . import sidecar

    return sidecar


@dataclass
class SessionInfo:
    id: str
    title: str
    first_model: str | None
    last_model: str | None
    physical_messages: int
    effective_messages: int
    bytes: int
    created: float
    last_activity: float
    status: str  # ok | recovered | incomplete, or "open" while a writer holds the lock
    path: Path

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        return data


def meta_from_load(result: LoadResult) -> dict[str, Any]:
    if result.incomplete:
        status = "incomplete"
    elif result.torn_tail or result.repaired:
        status = "recovered"
    else:
        status = "ok"
    mtime = result.path.stat().st_mtime if result.path.exists() else 0.0
    now = time.time()
    return {
        "version": META_VERSION,
        "id": result.session_id,
        "title": result.title,
        "first_model": result.first_model,
        "last_model": result.last_model,
        "physical_messages": result.physical_messages,
        "effective_messages": len(result.messages),
        "bytes": result.bytes,
        "created": sidecar_meta.dated(result.first_ts, mtime, now),
        "last_activity": sidecar_meta.dated(result.last_ts, mtime, now),
        "status": status,
    }


def write_meta(session_dir: Path, result: LoadResult | None = None) -> dict[str, Any]:
    """Write ``session_dir``'s sidecar afresh from its log (``result`` is not needed any more)."""
    meta: dict[str, Any] = _sidecar().refresh(session_dir, {})
    return meta


def _info(session_dir: Path, meta: dict[str, Any], size: int, status: str) -> SessionInfo:
    """A listing row from a current sidecar, every field type-checked (it is read from disk)."""
    return SessionInfo(
        id=session_dir.name,
        title=_str(meta.get("title")),
        first_model=_str(meta.get("first_model")) or None,
        last_model=_str(meta.get("last_model")) or None,
        physical_messages=_count(meta.get("physical_messages")),
        effective_messages=_count(meta.get("effective_messages")),
        bytes=size,
        created=_time(meta.get("created")),
        last_activity=_time(meta.get("last_activity")),
        status=status,
        path=session_dir,
    )


def session_info(session_dir: Path) -> SessionInfo:
    session_dir = Path(session_dir)
    log = session_dir / LOG_NAME
    problem = safeio.tree_problem(session_dir)
    if problem is not None:
        return unsafe_info(session_dir, problem)
    st = log.stat()
    size = st.st_size
    meta = _read_meta(session_dir / META_NAME)
    if not sidecar_meta.is_current(meta, st):
        try:
            meta = _sidecar().refresh(session_dir, meta)  # the bytes after its offset only
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise SessionError(f"cannot read session log {log}: {exc.strerror or exc}") from exc
        size = _count(meta.get("bytes"))
    status = "open" if is_locked(session_dir) else _str(meta.get("status")) or "ok"
    return _info(session_dir, meta, size, status)


def unsafe_info(session_dir: Path, problem: str) -> SessionInfo:
    """What the catalog says of a session folder it will not read: "unsafe", and why (as its title).

    Its last activity is 0, so ``%sessions resume --last`` never picks it.
    """
    return SessionInfo(
        id=session_dir.name,
        title=f"(unsafe, never read or written: {problem})"[:300],
        first_model=None,
        last_model=None,
        physical_messages=0,
        effective_messages=0,
        bytes=0,
        created=0.0,
        last_activity=0.0,
        status="unsafe",
        path=session_dir,
    )


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _count(value: object) -> int:
    """A non-negative count from a sidecar; anything else (a string, 5,000 digits, -1) is 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > 1 << 62:
        return 0
    return value


def _time(value: object) -> float:
    """A time from a sidecar; anything but a number from 1970 to a day from now is 0 ("?")."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    try:
        out = float(value)
    except OverflowError:
        return 0.0
    return out if 0.0 <= out <= time.time() + sidecar_meta.CLOCK_SKEW else 0.0


@dataclass(frozen=True)
class WholeLog:
    """What a full replay says of a session's whole log, as its sidecar keeps it."""

    physical_messages: int
    replaces: int | None  # None: counted by no sidecar yet (one stored before the count was kept)
    problems: list[str]
    effective_messages: int = 0
    last_model: str | None = None


def whole_log(session_dir: Path) -> WholeLog:
    """Counts and problems of the whole log from the sidecar (caught up from its offset), not
    a replay of every line: ``%sessions show`` of a 200 MB log took ~1.2 s for these alone."""
    meta = _sidecar().refresh(Path(session_dir))
    replaces = meta.get("replaces")
    problems = meta.get("problems")
    return WholeLog(
        _count(meta.get("physical_messages")),
        replaces if type(replaces) is int and replaces >= 0 else None,
        [p for p in problems if isinstance(p, str)] if isinstance(problems, list) else [],
        _count(meta.get("effective_messages")),
        meta["last_model"] if isinstance(meta.get("last_model"), str) else None,
    )


def load_session(path: Path) -> LoadResult:
    """The catalog's load: the whole log (``full``), so counts and unreadable lines cover all of it."""
    from . import loader

    return loader.load_session(path, full=True)


def list_sessions(workspace: Path) -> list[SessionInfo]:
    """Every session of the workspace, newest activity first."""
    root = sessions_dir(workspace)
    if not root.is_dir():
        return []
    infos = []
    try:
        # The folder of sessions, opened once with every component checked: each session
        # below is read through it, by names opened without following links (``_clean_info``).
        root_fd: int | None = safeio.open_dir(root)
    except OSError:
        root_fd = None
    try:
        for d in root.iterdir():
            if d.name.startswith(".") or not os.path.lexists(d / LOG_NAME):
                if d.is_symlink():
                    infos.append(unsafe_info(d, f"{d} is a symbolic link"))
                else:
                    _remove_if_abandoned(d)
                continue
            try:
                info = _clean_info(root_fd, d) if root_fd is not None else None
                infos.append(info if info is not None else session_info(d))
            except FileNotFoundError:
                continue  # trashed by another kernel while we listed
    finally:
        if root_fd is not None:
            os.close(root_fd)
    infos.sort(key=lambda s: (s.last_activity, s.id), reverse=True)
    return infos


def session_id_or_latest(workspace: Path, session_id: str | None) -> str:
    """``session_id``, or the latest session's when it is None (``resume --last``); a workspace
    with no session yet says how to start one."""
    if session_id is not None:
        return session_id
    latest = latest_session(workspace)
    if latest is None:
        raise SessionNotFoundError(f"no sessions in {workspace} yet; start one with %agent")
    return latest.id


def latest_session(workspace: Path) -> SessionInfo | None:
    """The session ``list_sessions`` would put first, without a listing's checks for every one.

    ``%sessions resume --last`` wants one session: each folder's sidecar says its last
    activity (one read and one stat); then, newest first, a session gets the full checks of
    a listing row (a folder with a link, or a stale sidecar, may come out older) until the
    best so far is newer than every one left.
    """
    root = sessions_dir(workspace)
    if not root.is_dir():
        return None
    try:
        root_fd = safeio.open_dir(root)
    except OSError:
        return next(iter(list_sessions(workspace)), None)
    try:
        with os.scandir(root_fd) as it:
            names = [e.name for e in it if not e.name.startswith(".")]
        claims = sorted(((_claimed_activity(root_fd, name), name) for name in names), reverse=True)
        best: SessionInfo | None = None
        for claim, name in claims:
            if best is not None and (best.last_activity, best.id) >= (claim, name):
                break
            folder = root / name
            if not os.path.lexists(folder / LOG_NAME) and not folder.is_symlink():
                continue
            try:
                info = _clean_info(root_fd, folder) or session_info(folder)
            except FileNotFoundError:
                continue
            if best is None or (info.last_activity, info.id) > (best.last_activity, best.id):
                best = info
        return best
    finally:
        os.close(root_fd)


def _claimed_activity(root_fd: int, name: str) -> float:
    """The last activity a current sidecar claims; infinity when it cannot say (check it in full)."""
    try:
        dfd = os.open(name, _DIR_FLAGS, dir_fd=root_fd)
    except OSError:
        return float("inf")
    try:
        st = os.stat(LOG_NAME, dir_fd=dfd, follow_symlinks=False)
        meta = _read_meta_at(dfd)
        if not sidecar_meta.is_current(meta, st):
            return float("inf")
        return _time(meta.get("last_activity"))
    except OSError:
        return float("inf")
    finally:
        os.close(dfd)


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC | os.O_NONBLOCK


def _clean_info(root_fd: int, session_dir: Path) -> SessionInfo | None:
    """The info of a session whose folder is plainly safe and whose sidecar is current, read by fd.

    The checks of ``safeio.tree_problem`` (no link, special file or hard-linked file anywhere in
    the folder), done relative to the open folder: a few syscalls, no path walked again. None
    for anything else (a doubt, a stale or missing sidecar): ``session_info`` says exactly what.
    """
    try:
        dfd = os.open(session_dir.name, _DIR_FLAGS, dir_fd=root_fd)
    except OSError:
        return None
    try:
        if not _plain_tree(dfd):
            return None
        st = os.stat(LOG_NAME, dir_fd=dfd, follow_symlinks=False)
        size = st.st_size
        meta = _read_meta_at(dfd)
        if not sidecar_meta.is_current(meta, st):
            return None
        assert meta is not None
        status = "open" if _locked_at(dfd) else _str(meta.get("status")) or "ok"
    except OSError:
        return None
    finally:
        os.close(dfd)
    return _info(session_dir, meta, size, status)


def _plain_tree(dfd: int, depth: int = 0) -> bool:
    """True when everything in the open folder (and its folders) is a regular file with one link."""
    with os.scandir(dfd) as it:
        found = list(it)
    for entry in found:
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            if depth > 8:
                return False
            sub = os.open(entry.name, _DIR_FLAGS, dir_fd=dfd)
            try:
                if not _plain_tree(sub, depth + 1):
                    return False
            finally:
                os.close(sub)
        elif not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            return False
    return True


def _read_meta_at(dfd: int) -> dict[str, Any] | None:
    try:
        fd = os.open(META_NAME, _FILE_FLAGS, dir_fd=dfd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > META_LIMIT:
            return None
        meta = orjson.loads(os.read(fd, st.st_size + 1))
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)
    return meta if isinstance(meta, dict) else None


def _locked_at(dfd: int) -> bool:
    """``locks.is_locked``, through the open folder."""
    for name in (LOCK_NAME, LOG_NAME):
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=dfd)
        except OSError:
            continue
        if held(fd):
            return True
    return False


ABANDONED_SECONDS = 600.0  # a folder without a log this old is what a killed import left


def _remove_if_abandoned(folder: Path) -> None:
    """Delete a session folder a killed import (or a crash right after claiming an id) left behind.

    Only a real folder without a log, older than ``ABANDONED_SECONDS``, holding nothing but
    what an import writes before the log (spills, meta.json, temporaries).
    """
    import shutil
    import stat as stat_mod
    import time

    try:
        st = os.lstat(folder)
        if not stat_mod.S_ISDIR(st.st_mode) or time.time() - st.st_mtime < ABANDONED_SECONDS:
            return
        names = set(os.listdir(folder))
    except OSError:
        return
    allowed = {META_NAME, TIMELINE_INDEX, STEP_FIGURES, "tool-results"}
    if all(n in allowed or safeio.is_temp_name(n) for n in names):
        shutil.rmtree(folder, ignore_errors=True)  # never follows a link out


def _read_meta(path: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads(safeio.read_bytes(path, limit=META_LIMIT))
    except (OSError, ValueError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else None
