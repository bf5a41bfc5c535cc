"""The history index's file: a connection opened with its settings, corruption told apart, the file deleted.

SQLite opens the database and its ``-wal``, ``-shm`` and ``-journal`` files by name, so
none may be a link or a special file (``safeio``'s limits); the file is private like the
logs it indexes. A workspace is untrusted input, so the file is opened the way SQLite
advises for untrusted databases (``trusted_schema=OFF``, ``cell_size_check``, no mmap, no
extension loading) and checked against the exact expected shape (``schema.problem``)
before any statement that could fire a trigger; a file that differs raises ``Untrusted`` and
``set_aside`` renames it out of the way. ``history.HistoryIndex`` decides what to do with a
broken file.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from .. import safeio
from .schema import expected, prepare, problem

SUFFIXES = ("", "-wal", "-shm", "-journal")
ASIDE = "untrusted"  # history.sqlite.untrusted-<time>: a found file that was not the expected shape

# Result codes that say nothing about the file itself (another process holds it, the disk is
# full, …): the file is kept and the caller reports the error. Any other error while the
# file is checked means SQLite cannot read it as an index: it is set aside.
# BUSY, LOCKED, NOMEM, READONLY, INTERRUPT, IOERR, FULL, CANTOPEN, PROTOCOL:
TRANSIENT = frozenset({5, 6, 7, 8, 9, 10, 13, 14, 15})


class Unsupported(Exception):
    """This Python's SQLite cannot hold the index (no FTS5 or no trigram tokenizer)."""


class Untrusted(Exception):
    """The file at the index's path is not an index this package made (the reason is the message)."""


def connect(path: Path, *, bulk: bool = False) -> sqlite3.Connection:
    """A connection to the index at ``path`` (created if missing), its tables prepared.

    ``bulk``: for a rebuild into a new file (fast settings, merges deferred).
    """
    for suffix in SUFFIXES:
        safeio.check_no_links(f"{path}{suffix}")
    # The index holds what the logs hold: private like them (SQLite gives its -wal and
    # -shm files the database's mode).
    os.close(safeio.open_file(path, os.O_RDWR | os.O_CREAT, 0o600))
    con = sqlite3.connect(path, timeout=2.0, check_same_thread=False, isolation_level=None)
    if bulk:  # the bulk loader reads log entries: imported by a rebuild, not by every opening
        from .rebuild import defer_merges, start
    try:
        harden(con)
        check(con)
        if bulk:
            start(con)
        else:
            con.execute("PRAGMA journal_mode=WAL")
            # Derived data: a lost last transaction is re-read from the log next time (the
            # offset is in the same transaction), so an append need not wait for an fsync.
            con.execute("PRAGMA synchronous=NORMAL")
        # Deleted rows are overwritten with zeros, not left in free pages (purge forgets).
        con.execute("PRAGMA secure_delete=ON")
        prepare(con)
        if bulk:
            defer_merges(con)
    except sqlite3.OperationalError as exc:
        con.close()
        if "fts5" in str(exc) or "trigram" in str(exc) or "tokenizer" in str(exc):
            raise Unsupported(
                f"this Python's SQLite {sqlite3.sqlite_version} lacks FTS5 with the trigram "
                "tokenizer (needs SQLite 3.34 or newer)"
            ) from exc
        raise
    except BaseException:
        con.close()
        raise
    return con


def read_offsets(path: Path) -> dict[str, int]:
    """The offset the index committed for each log, read without writing to the file.

    For ``HistoryIndex.lag`` before the index is open: opening it for writing switches it
    to WAL and prepares its tables (writes a loaded disk makes a listing wait for), where
    saying how far it is behind needs one read. The file is checked as ``connect`` checks
    it; anything amiss raises, and the caller says nothing (the next real opening decides).
    """
    for suffix in SUFFIXES:
        safeio.check_no_links(f"{path}{suffix}")
    con = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=0.05, isolation_level=None)
    try:
        harden(con)
        check(con)
        return dict(con.execute("SELECT session_id, offset FROM logs").fetchall())
    finally:
        con.close()


def harden(con: sqlite3.Connection) -> None:
    """Settings for a file that may come from anyone, before anything reads it."""
    # No SQL function or virtual table named in the file's schema runs unless marked
    # innocuous; malformed b-tree cells are caught early; no memory map of a file that
    # could be truncated under it; no extension loading (off by default, said anyway).
    con.execute("PRAGMA trusted_schema=OFF")
    con.execute("PRAGMA cell_size_check=ON")
    con.execute("PRAGMA mmap_size=0")
    if hasattr(con, "enable_load_extension"):
        con.enable_load_extension(False)


def check(con: sqlite3.Connection) -> None:
    """Raise ``Untrusted`` unless the open file is new or exactly an index this package made."""
    expected()  # first, alone: a missing FTS5 says so here (``Unsupported``), not as the file's fault
    try:
        why = problem(con)
    except sqlite3.DatabaseError as exc:
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None and code & 0xFF in TRANSIENT:
            raise  # not the file's fault: reported, the file kept
        why = f"not a readable index: {exc}"
    if why is not None:
        raise Untrusted(why)


def set_aside(path: Path) -> Path:
    """Rename the file at ``path`` and its companions to ``<name>.untrusted-<time>``; the new path.

    Renamed relative to the folder's fd (a link is renamed, never followed). The companions
    go first: a ``-wal`` left beside a new file at ``path`` would be read into it.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S")
    dfd = safeio.open_dir(path.parent)
    try:
        base, n = f"{path.name}.{ASIDE}-{stamp}", 1
        while any(_exists(f"{base}{suffix}", dfd) for suffix in SUFFIXES):
            n += 1
            base = f"{path.name}.{ASIDE}-{stamp}-{n}"
        for suffix in (*SUFFIXES[1:], SUFFIXES[0]):
            try:
                os.rename(f"{path.name}{suffix}", f"{base}{suffix}", src_dir_fd=dfd, dst_dir_fd=dfd)
            except FileNotFoundError:
                pass
    finally:
        os.close(dfd)
    return path.with_name(base)


def delete_aside(path: Path) -> int:
    """Delete every file ``set_aside`` made beside ``path`` (a purge); how many."""
    try:
        dfd = safeio.open_dir(path.parent)
    except OSError:
        return 0
    deleted = 0
    try:
        for name in os.listdir(dfd):
            if name.startswith(f"{path.name}.{ASIDE}-"):
                try:
                    os.unlink(name, dir_fd=dfd)  # a link is removed, never followed
                    deleted += 1
                except (FileNotFoundError, IsADirectoryError, PermissionError):
                    pass
    finally:
        os.close(dfd)
    return deleted


def _exists(name: str, dfd: int) -> bool:
    try:
        os.lstat(name, dir_fd=dfd)
    except FileNotFoundError:
        return False
    return True


def is_busy(exc: sqlite3.Error) -> bool:
    """Another connection holds the lock past the busy timeout: a second kernel's write."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (5, 6)  # SQLITE_BUSY, SQLITE_LOCKED
    return "database is locked" in str(exc) or "database table is locked" in str(exc)


def is_corrupt(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
    return type(exc) is sqlite3.DatabaseError  # Python < 3.11: corruption has no subclass


def unlink(path: str | Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def delete_files(base: Path) -> None:
    """The index at ``base`` and its companion files, whichever exist."""
    for suffix in SUFFIXES:
        unlink(f"{base}{suffix}")
