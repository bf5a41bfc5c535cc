"""Building the history index from every log in one pass (``%sessions reindex``, a lost index).

The rows are the ones ``indexer`` derives when it tails a log; here a reader thread
decodes the logs while the caller's thread inserts, into an index that starts empty.

The two threads overlap only if the inserting one seldom needs the GIL: a row-by-row
``executemany`` takes it back after every row, and then waits for the reader to let it go
(the switch interval, 5 ms), so the two ran one after the other. The reader therefore hands
over a *chunk* of rows (``CHUNK_BYTES`` of log) packed as JSON and one UTF-8 blob of texts,
and each table takes a chunk in one statement (``json_each``), which SQLite runs with the
GIL released. FTS5 writes its pending terms out as a segment at every statement that writes
many rows (the statement's savepoint), so chunks are large and the in-memory hash is made
large enough for one (``HASH_BYTES``); the segments are merged once, in ``finish``.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
from pathlib import Path
from typing import Any

import orjson

from ..workspace import LOG_NAME
from . import indexer as tailing
from .indexer import Progress
from .schema import FTS_TABLES, KIND, LIVE_SETTINGS

CHUNK_BYTES = 8 << 20  # log bytes whose rows go in as one statement per table (at most; 16 MB: +70 MB RSS)
MIN_CHUNK_BYTES = 1 << 20  # a small history is still cut in a dozen chunks, so the threads overlap
HASH_BYTES = 64 << 20  # FTS5's pending-terms hash while building (its default is 1 MB)

# A message row needs 7 columns; a spilled file's chunk also says where its line and file are.
_DOCS_SHORT = (
    "INSERT INTO docs(id, sid, kind, part, off, len, uh) SELECT "
    + ", ".join(f"json_extract(value, '$[{i}]')" for i in range(7))
    + " FROM json_each(?)"
)
_DOCS_FULL = (
    "INSERT INTO docs(id, sid, kind, part, off, len, line, src, slen, uh) SELECT "
    + ", ".join(f"json_extract(value, '$[{i}]')" for i in range(10))
    + " FROM json_each(?)"
)
# The texts are one UTF-8 blob and a JSON array of their lengths: cheaper for SQLite than a
# JSON array of strings (no unescaping), and a blob's substr is by byte.
_WORDS = (
    "INSERT INTO words(rowid, t) SELECT ?1 + key, CAST(substr(?2, start, len) AS TEXT) FROM "
    "(SELECT key, value AS len, sum(value) OVER (ORDER BY key) - value + 1 AS start FROM json_each(?3))"
)


def start(con: sqlite3.Connection) -> None:
    """Settings for a file nobody sees until it is complete: no journal, no syncs, merges later."""
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    con.execute("PRAGMA cache_size=-65536")
    con.execute("PRAGMA temp_store=MEMORY")


def defer_merges(con: sqlite3.Connection) -> None:
    for table in FTS_TABLES:
        con.execute(f"INSERT INTO {table}({table}, rank) VALUES ('automerge', 0)")
        con.execute(f"INSERT INTO {table}({table}, rank) VALUES ('crisismerge', 256)")
        _hash_size(con, table, HASH_BYTES)


def _hash_size(con: sqlite3.Connection, table: str, size: int) -> None:
    try:
        con.execute(f"INSERT INTO {table}({table}, rank) VALUES ('hashsize', {size})")
    except sqlite3.OperationalError:
        pass  # an FTS5 without the option: only slower


def finish(con: sqlite3.Connection) -> None:
    """After ``build``: one segment per full-text table, the vocabulary, ``docs_sid``, live settings.

    ``words`` is merged first: the vocabulary is then read from one segment, not merged on the fly.
    """
    con.execute("INSERT INTO words(words) VALUES ('optimize')")
    with tailing.transaction(con):
        tailing.fill_terms(con)  # one statement: one segment of ``terms_g``
        con.execute("CREATE INDEX IF NOT EXISTS docs_sid ON docs(sid)")
    con.execute("INSERT INTO terms_g(terms_g) VALUES ('optimize')")
    for table in FTS_TABLES:  # what a found file may hold (schema.problem)
        con.execute(f"INSERT INTO {table}({table}, rank) VALUES ('automerge', {LIVE_SETTINGS['automerge']})")
        con.execute(
            f"INSERT INTO {table}({table}, rank) VALUES ('crisismerge', {LIVE_SETTINGS['crisismerge']})"
        )
        # FTS5's default: a live index commits small writes
        _hash_size(con, table, LIVE_SETTINGS["hashsize"])


def json_available(con: sqlite3.Connection) -> bool:
    try:
        con.execute("SELECT count(*) FROM json_each('[1]')").fetchone()
    except sqlite3.OperationalError:
        return False  # an SQLite built without JSON: row by row, as the tailing indexer writes
    return True


class Chunk:
    """Rows of one or more logs, for one statement per table."""

    def __init__(self) -> None:
        self.docs: list[tuple[Any, ...]] = []
        self.texts: list[tuple[int, str]] = []
        self.skip_rows: list[tuple[int, str]] = []
        self.logs: list[tuple[Any, ...]] = []  # rows of ``logs``, inserted after the rows they cover
        self.rows = 0
        self.bytes = 0

    def add(self, taken: tuple[Any, ...], nbytes: int) -> None:
        docs, texts, skip_rows, _words = taken
        self.docs += docs
        self.texts += texts
        self.skip_rows += skip_rows
        self.bytes += nbytes

    def done(self, json: bool) -> tuple[Any, ...]:
        """What the inserting thread is handed: the packed rows, the ``logs`` rows, rows and bytes."""
        return (*self.pack(json), self.logs, self.rows, self.bytes)

    def pack(self, json: bool) -> tuple[Any, ...]:
        """What ``write`` inserts: the rows as JSON text (made here, in the reader thread)."""
        if json and self.texts:
            ids = [rid for rid, _ in self.texts]
            if ids == list(range(ids[0], ids[0] + len(ids))):  # always, in a build: ids are consecutive
                try:
                    spill = KIND["spill"]
                    short = orjson.dumps([(*d[:6], d[9]) for d in self.docs if d[2] != spill])
                    full = [d for d in self.docs if d[2] == spill]
                    texts = [t.encode() for _, t in self.texts]
                    lengths = orjson.dumps([len(t) for t in texts])
                    return (
                        "json",
                        short,
                        orjson.dumps(full) if full else None,
                        ids[0],
                        b"".join(texts),
                        lengths,
                        self.skip_rows,
                    )
                except (TypeError, UnicodeEncodeError):  # a string SQLite would refuse too: one by one
                    pass
        return ("rows", (self.docs, self.texts, self.skip_rows, set()))


def write(con: sqlite3.Connection, packed: tuple[Any, ...]) -> None:
    if packed[0] == "rows":
        tailing.write(con, packed[1])
        return
    _, short, full, first, texts, lengths, skip_rows = packed
    con.execute(_DOCS_SHORT, (short,))
    if full is not None:
        con.execute(_DOCS_FULL, (full,))
    con.execute(_WORDS, (first, texts, lengths))
    if skip_rows:
        con.executemany("INSERT OR IGNORE INTO skip(sid, call_id) VALUES (?, ?)", skip_rows)


def build(con: sqlite3.Connection, sessions: list[tuple[str, Path]], progress: Progress | None = None) -> int:
    """Index every log into an empty index (a rebuild); the rows added.

    A reader thread decodes the logs into chunks of rows while this thread inserts them.
    """
    json = json_available(con)
    total = 0
    for _, folder in sessions:
        try:
            total += os.stat(folder / LOG_NAME).st_size
        except OSError:
            pass
    chunk_bytes = min(CHUNK_BYTES, max(MIN_CHUNK_BYTES, total // 12))
    batches: queue.Queue[Any] = queue.Queue(maxsize=2)
    stop = threading.Event()

    def read() -> None:
        try:
            next_id = 1
            chunk = Chunk()
            for sid, (session_id, folder) in enumerate(sessions, 1):
                try:
                    f = tailing._open_log(folder / LOG_NAME)
                except OSError:
                    continue
                with f:
                    size = os.fstat(f.fileno()).st_size
                    batch = tailing.Batch(sid, folder, False, next_id, set(), set())
                    end = 0
                    for line_offset, data in tailing.log_lines(f, 0, size):
                        if stop.is_set():
                            return
                        batch.line(line_offset, data)
                        end = line_offset + len(data) + 1
                        if chunk.bytes + batch.bytes >= chunk_bytes:
                            chunk.add(batch.take(), batch.bytes)
                            batch.bytes = 0
                            packed, chunk = chunk.done(json), Chunk()  # its rows freed before waiting
                            batches.put(packed)
                    chunk.add(batch.take(), batch.bytes + (size - end))
                    next_id = batch.next_id
                    st = os.fstat(f.fileno())
                    stamp = (
                        tailing.stamp_text((st.st_ino, st.st_size, st.st_mtime_ns))
                        if end == st.st_size
                        else None
                    )
                    chunk.logs.append((sid, session_id, end, tailing.head_of(f, end), stamp))
                    chunk.rows += batch.rows
            batches.put(chunk.done(json))
        except BaseException as exc:  # noqa: BLE001 - handed to the writer, which raises it
            batches.put(("error", exc))
        finally:
            batches.put(None)

    reader = threading.Thread(target=read, name="pseudoclaude-reindex", daemon=True)
    reader.start()
    rows = 0
    try:
        with tailing.transaction(con):
            while (item := batches.get()) is not None:
                if item[0] == "error":
                    raise item[1]
                *packed, logs, n_rows, n_bytes = item
                write(con, tuple(packed))
                con.executemany(
                    "INSERT INTO logs(sid, session_id, offset, head, stamp) VALUES (?, ?, ?, ?, ?)", logs
                )
                rows += n_rows
                if progress is not None:
                    progress(n_bytes)
    finally:
        stop.set()
        while reader.is_alive():  # let a reader blocked on a full queue finish
            try:
                batches.get(timeout=0.1)
            except queue.Empty:
                pass
        reader.join()
    return rows
