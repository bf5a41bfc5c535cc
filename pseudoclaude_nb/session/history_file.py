"""The history index's file: a connection opened with its settings, corruption told apart, the file deleted.

SQLite opens the database and its ``-wal``, ``-shm`` and ``-journal`` files by name, so
none may be a link or a special file (``safeio``'s limits); the file is private like the
logs it indexes. ``history.HistoryIndex`` decides what to do with a broken file.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from . import safeio
from .history_build import defer_merges, start
from .history_schema import prepare

SUFFIXES = ("", "-wal", "-shm", "-journal")


class Unsupported(Exception):
    """This Python's SQLite cannot hold the index (no FTS5 or no trigram tokenizer)."""


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
    try:
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
