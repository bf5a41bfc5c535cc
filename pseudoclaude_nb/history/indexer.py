"""Tailing session logs into the history index: rows, their words, and the log offset they came from.

``Indexer.consume`` brings one log up to date from the offset committed in ``logs``; the
rows and the new offset commit in one transaction, so a crash loses only what is read
again next time. A log whose first bytes changed (an import, a hand repair) is read from
its start. The rows of a session that is gone, or whose log was rewritten, are deleted;
their tokens are deleted from the contentless ``words`` table too when the text can still
be read (a trashed session's log is in the trash), and otherwise counted in ``meta`` as
orphans: they can never be returned (a row id is never reused and a hit needs its ``docs``
row), and the next rebuild or purge rebuilds the index without them.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Literal, cast, overload

from .. import safeio
from ..session.entries import MessageEntry, SpillEntry, parse_line
from ..workspace import LOG_NAME
from .rows import (
    SEARCH_TOOL,
    RowReader,
    decode_chunk,
    message_data,
    message_parts,
    read_spill,
    spill_chunks,
    spill_path,
)
from .schema import KIND, PAIR, gram_text, indexed, quote

HEAD_BYTES = 4096  # a rewritten log (import, edit) is recognised by its first bytes
BLOCK_BYTES = 4 << 20  # a log is read in blocks of whole lines

Progress = Callable[[int], None]  # bytes of log consumed since the last call


@contextmanager
def transaction(con: sqlite3.Connection) -> Iterator[None]:
    """One explicit transaction (the connection has ``isolation_level=None``), all or nothing.

    The rows and the log offset they came from commit together: a crash between the two is
    re-read from the log next time, never indexed twice. After SQLITE_FULL, IOERR or NOMEM
    SQLite may already have rolled the whole transaction back itself, so ROLLBACK is sent
    only while one is open, and a failing ROLLBACK never hides the error that caused it.
    A failed COMMIT is rolled back the same way.
    """
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
        con.execute("COMMIT")
    except BaseException:
        if con.in_transaction:
            try:
                con.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the first error is the one to report
        raise


def uuid_hash(uuid: str) -> int:
    return int.from_bytes(hashlib.blake2b(uuid.encode(), digest_size=8).digest(), "big", signed=True)


class Indexer:
    """Per-connection caches of what the index holds (cleared when the connection is).

    The caches say what is *committed*: a batch adds to them as it goes, so a transaction
    that fails clears them all (``transaction``) and they are read again from the file;
    otherwise a message of the rolled-back batch would count as indexed and be skipped.
    """

    def __init__(self) -> None:
        # Session id -> (inode, size, mtime) of its log when it was last consumed to its end.
        self.seen: dict[str, tuple[int, int, int]] = {}
        self._uuids: dict[int, set[int]] = {}
        self._skips: dict[int, set[str]] = {}
        self._sids: dict[str, int] = {}
        # Words known to be in ``terms`` (UTF-8), so a batch inserts only the new ones: its
        # words were ~a tenth of a catch-up's time, nearly all of them known. Valid while no
        # other connection committed (``data_version``): another kernel may drop words.
        self.terms: set[bytes] = set()
        self._version: int | None = None

    def clear(self) -> None:
        self.terms.clear()
        self.seen.clear()
        self._uuids.clear()
        self._skips.clear()
        self._sids.clear()

    @contextmanager
    def transaction(self, con: sqlite3.Connection) -> Iterator[None]:
        """``transaction``, forgetting every cache if it does not commit."""
        try:
            with transaction(con):
                yield
        except BaseException:
            self.clear()
            raise

    # --- sessions ---------------------------------------------------------------------------

    @overload
    def sid(self, con: sqlite3.Connection, session_id: str, create: Literal[True] = True) -> int: ...
    @overload
    def sid(self, con: sqlite3.Connection, session_id: str, create: bool) -> int | None: ...
    def sid(self, con: sqlite3.Connection, session_id: str, create: bool = True) -> int | None:
        sid = self._sids.get(session_id)
        if sid is None:
            row = con.execute("SELECT sid FROM logs WHERE session_id = ?", (session_id,)).fetchone()
            if row is None:
                if not create:
                    return None
                cur = con.execute(
                    "INSERT INTO logs(session_id, offset, head) VALUES (?, 0, '')", (session_id,)
                )
                sid = cast(int, cur.lastrowid)  # the row the INSERT just made
            else:
                sid = row[0]
            self._sids[session_id] = sid
        return sid

    def drop(
        self, con: sqlite3.Connection, session_id: str, folder: Path | None, *, keep_log: bool = False
    ) -> int:
        """Delete a session's rows (inside a transaction); ``folder``: where its log still is, if anywhere."""
        sid = self.sid(con, session_id, create=False)
        if sid is None:
            return 0
        rows = con.execute(
            "SELECT id, sid, kind, part, off, len, line, src, slen FROM docs WHERE sid = ? ORDER BY id",
            (sid,),
        ).fetchall()
        orphans = 0
        words: set[bytes] = set()
        readable = folder is not None and self._log_is_the_indexed_one(con, sid, folder)
        if rows:
            with RowReader({sid: folder} if readable and folder is not None else {}) as reader:
                for row in rows:
                    text = reader.text(row) if readable else None
                    if text is None:
                        orphans += 1
                        continue
                    low, found = indexed(text)
                    con.execute("INSERT INTO words(words, rowid, t) VALUES ('delete', ?, ?)", (row[0], low))
                    words |= found
        con.execute("DELETE FROM docs WHERE sid = ?", (sid,))
        con.execute("DELETE FROM skip WHERE sid = ?", (sid,))
        if keep_log:
            con.execute("UPDATE logs SET offset = 0, head = '', stamp = NULL WHERE sid = ?", (sid,))
        else:
            con.execute("DELETE FROM logs WHERE sid = ?", (sid,))
            self._sids.pop(session_id, None)
        self._uuids.pop(sid, None)
        self._skips.pop(sid, None)
        self.seen.pop(session_id, None)
        if orphans:
            add_orphans(con, orphans)
        # Words no other row holds leave the vocabulary (what a trash or purge forgets).
        self.terms.clear()
        for word in (w.decode() for w in words):
            if con.execute("SELECT rowid FROM words WHERE words MATCH ? LIMIT 1", (quote(word),)).fetchone():
                continue
            term = con.execute("SELECT id FROM terms WHERE term = ?", (word,)).fetchone()
            if term is not None:
                con.execute(
                    "INSERT INTO terms_g(terms_g, rowid, g) VALUES ('delete', ?, ?)",
                    (term[0], gram_text(word)),
                )
                con.execute("DELETE FROM terms WHERE id = ?", (term[0],))
        return len(rows)

    def _log_is_the_indexed_one(self, con: sqlite3.Connection, sid: int, folder: Path) -> bool:
        row = con.execute("SELECT offset, head FROM logs WHERE sid = ?", (sid,)).fetchone()
        if row is None:
            return False
        offset, head = row
        try:
            with os.fdopen(safeio.open_file(folder / LOG_NAME), "rb") as f:
                return bool(
                    os.fstat(f.fileno()).st_size >= offset and (offset == 0 or head_of(f, offset) == head)
                )
        except OSError:
            return False

    # --- consuming a log ----------------------------------------------------------------------

    def consume(
        self,
        con: sqlite3.Connection,
        session_dir: Path | str,
        st: os.stat_result | None = None,
        *,
        vocabulary: bool = True,
        progress: Progress | None = None,
    ) -> int:
        """Index what ``session_dir``'s log gained; the rows added. ``vocabulary=False``: the
        caller fills ``terms`` afterwards (a rebuild does it once, from the finished index)."""
        session_id = os.path.basename(session_dir)
        if st is None:
            try:
                st = os.stat(os.path.join(session_dir, LOG_NAME))
            except FileNotFoundError:
                return 0
        # A log unchanged since it was consumed to its end needs no look (a search of all
        # sessions would otherwise open and hash every log each time).
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        if self.seen.get(session_id) == stamp:
            return 0
        row = con.execute(
            "SELECT offset, head, stamp FROM logs WHERE session_id = ?", (session_id,)
        ).fetchone()
        offset, head = (row[0], row[1]) if row else (0, "")
        if row is not None and row[2] == stamp_text(stamp):
            # Consumed to its end, and the same file since (a new process's first search
            # opens no log for this).
            self.seen[session_id] = stamp
            return 0
        session_dir = Path(session_dir)
        try:
            f = _open_log(session_dir / LOG_NAME)
        except OSError:
            return 0  # gone, or refused (a link, a FIFO): an unsafe session is not indexed
        rows = 0
        with f:
            size = os.fstat(f.fileno()).st_size
            restart = offset > 0 and (size < offset or head_of(f, offset) != head)
            if restart:
                offset = 0
            if size == offset:
                if not restart:
                    self.seen[session_id] = stamp
                    con.execute(
                        "UPDATE logs SET stamp = ? WHERE session_id = ?", (stamp_text(stamp), session_id)
                    )
                return 0
            with self.transaction(con):
                self._check_version(con)  # in the transaction: no other writer commits now
                sid = self.sid(con, session_id)
                if restart:
                    self.drop(con, session_id, None, keep_log=True)
                    sid = self.sid(con, session_id)
                batch = Batch(
                    sid, session_dir, vocabulary, _next_id(con), self.uuids(con, sid), self.skips(con, sid)
                )
                end = offset
                for line_offset, data in log_lines(f, offset, size):
                    batch.line(line_offset, data)
                    end = line_offset + len(data) + 1
                    if len(batch.docs) >= 2000 or batch.bytes >= BLOCK_BYTES:
                        write(con, batch.take(), self.terms)
                        if progress is not None:
                            progress(batch.bytes)
                        batch.bytes = 0
                write(con, batch.take(), self.terms)
                if progress is not None:
                    progress(batch.bytes + (size - end))
                if end == offset and not restart:
                    return 0
                new_head = head if offset >= HEAD_BYTES and not restart else head_of(f, end)
                done = end == st.st_size
                con.execute(
                    "UPDATE logs SET offset = ?, head = ?, stamp = ? WHERE sid = ?",
                    (end, new_head, stamp_text(stamp) if done else None, sid),
                )
                rows = batch.rows
        if end == st.st_size:
            self.seen[session_id] = stamp
        return rows

    def _check_version(self, con: sqlite3.Connection) -> None:
        """Forget the known words if another connection committed since the last look."""
        version = con.execute("PRAGMA data_version").fetchone()[0]
        if version != self._version:
            self.terms.clear()
            self._version = version

    def uuids(self, con: sqlite3.Connection, sid: int) -> set[int]:
        got = self._uuids.get(sid)
        if got is None:
            got = self._uuids[sid] = {
                r[0]
                for r in con.execute("SELECT DISTINCT uh FROM docs WHERE sid = ? AND uh IS NOT NULL", (sid,))
            }
        return got

    def skips(self, con: sqlite3.Connection, sid: int) -> set[str]:
        got = self._skips.get(sid)
        if got is None:
            got = self._skips[sid] = {
                r[0] for r in con.execute("SELECT call_id FROM skip WHERE sid = ?", (sid,))
            }
        return got


# Entries no search needs (usage, replace, notes, …), known by the writer's first bytes
# without decoding them; any other line is decoded and typed as the loader would.
_SKIP_PREFIXES = tuple(
    b'{"v":1,"type":"' + kind.encode() + b'"' for kind in ("usage", "replace", "compact", "note", "rollover")
)


class Batch:
    """Rows read from one log, gathered for bulk inserts (no database access while reading)."""

    def __init__(
        self, sid: int, folder: Path, vocabulary: bool, next_id: int, uuids: set[int], skips: set[str]
    ) -> None:
        self.sid, self.folder, self.vocabulary = sid, folder, vocabulary
        self.uuids, self.skips = uuids, skips
        self.next_id = next_id
        self.docs: list[tuple[Any, ...]] = []
        self.texts: list[tuple[int, str]] = []
        self.skip_rows: list[tuple[int, str]] = []
        self.words: set[bytes] = set()
        self.rows = 0
        self.bytes = 0

    def _add(
        self,
        kind: int,
        part: int,
        off: int,
        length: int,
        text: str,
        line: int | None = None,
        src: int | None = None,
        slen: int | None = None,
        uh: Any = None,
    ) -> None:
        low, words = indexed(text, vocabulary=self.vocabulary)
        rid = self.next_id
        self.next_id += 1
        self.docs.append((rid, self.sid, kind, part, off, length, line, src, slen, uh))
        self.texts.append((rid, low))
        self.words |= words
        self.rows += 1

    def line(self, offset: int, raw: bytes) -> None:
        self.bytes += len(raw) + 1
        if not raw or raw.startswith(_SKIP_PREFIXES) or raw.isspace():
            return
        entry = parse_line(raw)  # None: a torn or corrupt line; the loader reports it, the index skips it
        if isinstance(entry, MessageEntry):
            self._message(offset, len(raw), entry)
        elif isinstance(entry, SpillEntry):
            self._spill(offset, len(raw), entry)

    def _message(self, offset: int, length: int, entry: MessageEntry) -> None:
        data = message_data(entry)
        uuid, role = data.get("id"), data.get("role")
        if not isinstance(uuid, str) or not isinstance(role, str):
            return
        # A replace snapshot repeats messages already indexed (a spilled result then carries
        # only its preview): keep the first, fullest version of each message.
        uh = uuid_hash(uuid)
        if uh in self.uuids:
            return
        self.uuids.add(uh)
        for p in message_parts(data):
            if p.kind == KIND["tool_call"] and p.tool == SEARCH_TOOL:
                if isinstance(p.call_id, str) and p.call_id not in self.skips:
                    self.skips.add(p.call_id)
                    self.skip_rows.append((self.sid, p.call_id))
                continue  # earlier searches echo their own query and hits: never an answer to a new one
            if p.kind == KIND["tool_result"] and p.call_id in self.skips:
                continue
            self._add(p.kind, p.part, offset, length, p.text, uh=uh)

    def _spill(self, offset: int, length: int, entry: SpillEntry) -> None:
        if entry.call_id is None or entry.tool == SEARCH_TOOL:
            return
        path = spill_path(self.folder, entry.path)
        data = None if path is None else read_spill(path)
        if not data:
            return
        for part, (line, off, size) in enumerate(spill_chunks(data)):
            text = decode_chunk(data[off : off + size])
            self._add(KIND["spill"], part, off, size, text, line=line, src=offset, slen=length)

    def take(self) -> tuple[list[tuple[Any, ...]], list[tuple[int, str]], list[tuple[int, str]], set[bytes]]:
        out = (self.docs, self.texts, self.skip_rows, self.words)
        self.docs, self.texts, self.skip_rows, self.words = [], [], [], set()
        return out


def write(con: sqlite3.Connection, taken: tuple[Any, ...], known: set[bytes] | None = None) -> None:
    """Insert what ``Batch.take`` gave; ``known``: words already in ``terms`` (added to)."""
    docs, texts, skip_rows, words = taken
    if docs:
        con.executemany(
            "INSERT INTO docs(id, sid, kind, part, off, len, line, src, slen, uh) VALUES (?,?,?,?,?,?,?,?,?,?)",
            docs,
        )
        con.executemany("INSERT INTO words(rowid, t) VALUES (?, ?)", texts)
    if skip_rows:
        con.executemany("INSERT OR IGNORE INTO skip(sid, call_id) VALUES (?, ?)", skip_rows)
    if words:
        add_terms(con, words, known)


KNOWN_TERMS = 200_000  # words ``Indexer.terms`` holds at most (~15 MB); then it starts again


def add_terms(con: sqlite3.Connection, words: set[bytes], known: set[bytes] | None = None) -> None:
    """Put new words (UTF-8) in the vocabulary (and their grams in ``terms_g``)."""
    if known is not None:
        words = words - known
        if not words:
            return
        if len(known) + len(words) > KNOWN_TERMS:
            known.clear()
        # Known once this transaction commits; if it does not, ``Indexer.transaction`` clears them.
        known |= words
    before = con.execute("SELECT coalesce(max(id), 0) FROM terms").fetchone()[0]
    con.executemany("INSERT OR IGNORE INTO terms(term) VALUES (?)", ((w.decode(),) for w in words))
    # New rows take ids above the largest one (INTEGER PRIMARY KEY): exactly the words just added.
    added = con.execute("SELECT id, term FROM terms WHERE id > ?", (before,)).fetchall()
    con.executemany("INSERT INTO terms_g(rowid, g) VALUES (?, ?)", ((i, gram_text(t)) for i, t in added))


def fill_terms(con: sqlite3.Connection) -> int:
    """The whole vocabulary from a finished ``words`` index (a rebuild: once, in C, not per row)."""
    con.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.words_vocab USING fts5vocab(main, 'words', 'row')")
    # Pair tokens (``history.schema.PAIR``) are not words: no fragment search looks them up.
    con.execute(
        "INSERT OR IGNORE INTO terms(term) SELECT term FROM temp.words_vocab WHERE instr(term, ?) = 0",
        (PAIR,),
    )
    con.execute("DROP TABLE temp.words_vocab")
    con.create_function("pc_gram_text", 1, gram_text, deterministic=True)
    con.execute("INSERT INTO terms_g(rowid, g) SELECT id, pc_gram_text(term) FROM terms")
    return int(con.execute("SELECT count(*) FROM terms").fetchone()[0])


def add_orphans(con: sqlite3.Connection, n: int) -> None:
    con.execute(
        "INSERT INTO meta(key, value) VALUES ('orphans', ?) ON CONFLICT(key) DO UPDATE SET value = value + ?",
        (n, n),
    )


def orphans(con: sqlite3.Connection) -> int:
    row = con.execute("SELECT value FROM meta WHERE key = 'orphans'").fetchone()
    return row[0] if row else 0


def _next_id(con: sqlite3.Connection) -> int:
    row = con.execute("SELECT seq FROM sqlite_sequence WHERE name = 'docs'").fetchone()
    top = con.execute("SELECT max(id) FROM docs").fetchone()[0]
    return max(row[0] if row else 0, top or 0) + 1


def log_lines(f: BinaryIO, offset: int, size: int) -> Iterator[tuple[int, bytes]]:
    """(offset, line without its newline) of every whole line in [offset, size), read in blocks."""
    pos = offset
    carry = b""
    carry_at = offset
    fd = f.fileno()
    while pos < size:
        block = os.pread(fd, min(BLOCK_BYTES, size - pos), pos)
        if not block:
            break
        pos += len(block)
        data = carry + block if carry else block
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                break
            yield carry_at + start, data[start:nl]
            start = nl + 1
        carry, carry_at = data[start:], carry_at + start
    # A last line without its newline is the writer's, mid-write: left for next time.


def stamp_text(stamp: tuple[int, int, int]) -> str:
    return f"{stamp[0]}:{stamp[1]}:{stamp[2]}"


def _open_log(path: Path) -> BinaryIO:
    return os.fdopen(safeio.open_file(path), "rb")


def head_of(f: BinaryIO, offset: int) -> str:
    return hashlib.sha1(os.pread(f.fileno(), min(offset, HEAD_BYTES), 0)).hexdigest()
