"""The catalog: what sessions a workspace has, from their ``meta.json`` sidecars.

A sidecar is derived data: it records the log size it was built from, and is rebuilt
from the log whenever it is missing, unreadable or stale, so it can never lie for long.
A rebuild replays the whole log (``full=True``): the sidecar counts every logged message
and reports every unreadable line, which a resume's fast load does not. Listing reads only
the sidecars (1,000 sessions in ~60 ms); a stale sidecar costs one replay of its log.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from . import loader
from .loader import LoadResult
from .paths import LOG_NAME, META_NAME, atomic_write_text, sessions_dir
from .writer import is_locked

META_VERSION = 1


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

    def to_dict(self) -> dict:
        data = asdict(self)
        data["path"] = str(self.path)
        return data


def meta_from_load(result: LoadResult) -> dict:
    if result.incomplete:
        status = "incomplete"
    elif result.torn_tail or result.repaired:
        status = "recovered"
    else:
        status = "ok"
    mtime = result.path.stat().st_mtime if result.path.exists() else 0.0
    return {
        "version": META_VERSION,
        "id": result.session_id,
        "title": result.title,
        "first_model": result.first_model,
        "last_model": result.last_model,
        "physical_messages": result.physical_messages,
        "effective_messages": len(result.messages),
        "bytes": result.bytes,
        "created": result.first_ts or mtime,
        "last_activity": result.last_ts or mtime,
        "status": status,
    }


def write_meta(session_dir: Path, result: LoadResult) -> dict:
    if result.partial:
        # A resume's fast load counts only what it read; a sidecar describes the whole log.
        result = loader.load_session(result.path, full=True)
    meta = meta_from_load(result)
    atomic_write_text(Path(session_dir) / META_NAME, json.dumps(meta, ensure_ascii=False, indent=1))
    return meta


def session_info(session_dir: Path) -> SessionInfo:
    session_dir = Path(session_dir)
    log = session_dir / LOG_NAME
    size = log.stat().st_size
    meta = _read_meta(session_dir / META_NAME)
    if meta is None or meta.get("bytes") != size or meta.get("version") != META_VERSION:
        meta = write_meta(session_dir, load_session(log))
    status = "open" if is_locked(session_dir) else meta["status"]
    return SessionInfo(
        id=session_dir.name,
        title=meta.get("title") or "",
        first_model=meta.get("first_model"),
        last_model=meta.get("last_model"),
        physical_messages=int(meta.get("physical_messages") or 0),
        effective_messages=int(meta.get("effective_messages") or 0),
        bytes=size,
        created=float(meta.get("created") or 0.0),
        last_activity=float(meta.get("last_activity") or 0.0),
        status=status,
        path=session_dir,
    )


def load_session(path: Path) -> LoadResult:
    """The catalog's load: the whole log (``full``), so counts and unreadable lines cover all of it."""
    return loader.load_session(path, full=True)


def list_sessions(workspace: Path) -> list[SessionInfo]:
    """Every session of the workspace, newest activity first."""
    root = sessions_dir(workspace)
    if not root.is_dir():
        return []
    infos = []
    for d in root.iterdir():
        if not (d / LOG_NAME).is_file():
            continue
        try:
            infos.append(session_info(d))
        except FileNotFoundError:
            continue  # trashed by another kernel while we listed
    infos.sort(key=lambda s: (s.last_activity, s.id), reverse=True)
    return infos


def _read_meta(path: Path) -> dict | None:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None
