"""The session writer's lock: ``writer.lock`` under ``flock``, with the holder's pid in it."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .. import safeio
from ..errors import SessionLockedError
from ..workspace import LOCK_NAME, LOG_NAME


def acquire(session_dir: Path, session_id: str) -> int:
    """The fd of the session's ``writer.lock``, locked, holding this pid; ``SessionLockedError`` if held."""
    fd = safeio.open_file(Path(session_dir) / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = read_pid(fd)
        os.close(fd)
        raise SessionLockedError(session_id, pid) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def release(fd: int) -> None:
    # Unlocking before close; the file stays (removing it would race a new locker).
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def read_pid(fd: int) -> int | None:
    try:
        raw = os.pread(fd, 32, 0).decode().strip()
        return int(raw) if raw else None
    except (OSError, ValueError):
        return None


def is_locked(session_dir: Path) -> bool:
    """True when some process holds the session's writer lock (used by the catalog)."""
    for name in (LOCK_NAME, LOG_NAME):
        try:
            fd = safeio.open_file(Path(session_dir) / name, os.O_RDONLY)
        except OSError:
            continue  # missing, or refused (an unsafe session is listed as such)
        if held(fd):
            return True
    return False


def held(fd: int) -> bool:
    """Whether another open file description holds an exclusive lock on ``fd``'s file; closes ``fd``."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return False
