"""The full-history index: SQLite FTS5 (trigram) over every session log of a workspace.

It owns ``.pseudoclaude/history.sqlite`` and nothing else. The index is derived data: it
*tails* each ``conversation.jsonl`` from the byte offset it has consumed, so what it holds
is exactly what the logs hold (redacted, spilled bodies as files) and it can always be
rebuilt from them. One row per message part — text, each tool call (name + arguments),
the tool result — and the text of spilled files in chunks of lines; the trigram tokenizer
makes CJK and code substrings match. Terms of one or two characters (``压缩``, ``qz``),
which trigrams cannot find, are looked up in a side table: a contentless FTS5 table
(``docs_short``, detail=none) of each row's distinct characters and character pairs, kept
in step with the trigram table by the same triggers (insert, and delete on trash/purge).

Registered as a conversation hook right after the session writer. With ``background``
(what the agent uses) the hook only marks the session: a background thread indexes what
the log gained since the offset committed with the rows (one transaction per catch-up, so
a kill -9 loses nothing but the uncommitted catch-up, which is read again from the log),
and every search catches up first, so a search finds every message already appended.
Without it, each append is indexed inside the hook. It never raises into its callers: a
missing index is recreated, a corrupt one is deleted and rebuilt, a locked one is caught
up later; problems are reported through ``on_notice``.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ..conversation import Hooks
from ..errors import SessionError
from ..messages import Message
from . import safeio
from .entries import MessageEntry, SpillEntry, parse_line
from .history_query import Hit, grams_text, match
from .paths import LOG_NAME, SPILL_DIR, STATE_DIR, ensure_state_dir, sessions_dir

INDEX_NAME = "history.sqlite"
SCHEMA_VERSION = 4
MAX_LIMIT = 50
HEAD_BYTES = 4096  # a rewritten log (import, edit) is recognised by its first bytes
CHUNK_LINES = 200  # spilled files are indexed in chunks, so a hit can name its line
CHUNK_BYTES = 16_000
SPILL_INDEX_BYTES = 8_000_000  # beyond this, a spilled file's tail is not indexed

_SCHEMA = """
CREATE TABLE IF NOT EXISTS logs(
    session_id TEXT PRIMARY KEY,
    offset INTEGER NOT NULL,
    head TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS docs(
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    message_uuid TEXT NOT NULL,
    call_id TEXT,
    tool TEXT,
    role TEXT NOT NULL,
    kind TEXT NOT NULL,
    ts REAL NOT NULL,
    part INTEGER NOT NULL DEFAULT 0,
    line INTEGER,
    ref TEXT,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS docs_session ON docs(session_id);
CREATE INDEX IF NOT EXISTS docs_message ON docs(session_id, message_uuid);
CREATE INDEX IF NOT EXISTS docs_call ON docs(session_id, call_id);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_fts USING fts5(
    text, content='docs', content_rowid='id', tokenize='trigram'
);
CREATE VIRTUAL TABLE IF NOT EXISTS docs_short USING fts5(
    grams, content='', detail=none, tokenize='ascii'
);
CREATE TRIGGER IF NOT EXISTS docs_ai AFTER INSERT ON docs BEGIN
    INSERT INTO docs_fts(rowid, text) VALUES (new.id, new.text);
    INSERT INTO docs_short(rowid, grams) VALUES (new.id, pc_grams(new.text));
END;
CREATE TRIGGER IF NOT EXISTS docs_ad AFTER DELETE ON docs BEGIN
    INSERT INTO docs_fts(docs_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO docs_short(docs_short, rowid, grams) VALUES ('delete', old.id, pc_grams(old.text));
END;
"""


@dataclass(frozen=True)
class IndexStats:
    sessions: int
    rows: int
    seconds: float


BATCH_SECONDS = 0.05  # the background indexer waits this long for more appends to join one transaction


@dataclass(frozen=True)
class Lag:
    entries: int  # log lines not in the index yet (counted up to LAG_COUNT_BYTES)
    bytes: int
    counted: bool  # False: too many bytes behind to count their lines here


LAG_COUNT_BYTES = 16 << 20


class HistoryIndex:
    def __init__(
        self, workspace: Path, *, on_notice: Callable[[str], None] | None = None, background: bool = False
    ) -> None:
        self.workspace = Path(workspace)
        self.path = self.workspace / STATE_DIR / INDEX_NAME
        self.on_notice = on_notice
        self.notices: list[str] = []
        self._con: sqlite3.Connection | None = None
        self._inode: tuple[int, int] | None = None
        # Session id -> (inode, size, mtime) of its log when it was last consumed to its end.
        self._seen: dict[str, tuple[int, int, int]] = {}
        self._lock = threading.RLock()
        self.disabled: str | None = None  # why the index cannot work at all (no FTS5, …)
        self.background = background
        self._pending: set[Path] = set()
        self._pending_lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._flush_lock = threading.Lock()  # one catch-up of the pending sessions at a time
        self._local = threading.local()
        self._deferred: list[str] = []  # notices of the background indexer, said by the next flush

    # --- wiring ------------------------------------------------------------------------

    def hooks(self, session_dir: Path) -> Hooks:
        """Conversation hooks that bring ``session_dir``'s log into the index; never raise."""
        folder = Path(session_dir)

        def on_append(_message: Message) -> None:
            self.schedule(folder) if self.background else self.catch_up(folder)

        def on_replace(_reason: str, _messages: list[Message]) -> None:
            self.schedule(folder) if self.background else self.catch_up(folder)

        return Hooks(on_append=on_append, on_replace=on_replace)

    # --- the background indexer ---------------------------------------------------------------

    def schedule(self, session_dir: Path) -> None:
        """Have the background indexer catch ``session_dir`` up (soon, off the caller's thread)."""
        with self._pending_lock:
            self._pending.add(Path(session_dir))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="pseudoclaude-indexer", daemon=True)
                self._thread.start()
        self._wake.set()

    def flush(self) -> None:
        """Catch up, in this thread, every session the background indexer has still to do.

        Waits for a catch-up the indexer has under way; then says what it met (its notices
        wait for a caller's thread: ``on_notice`` may draw in a notebook).
        """
        with self._flush_lock:
            self._drain()
        deferred, self._deferred = self._deferred, []
        for text in deferred:
            self._notice(text)

    def _drain(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, set()
        for folder in sorted(pending):
            self.catch_up(folder)

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            time.sleep(BATCH_SECONDS)  # a burst of appends becomes one transaction
            self._wake.clear()
            with self._flush_lock:
                self._local.background = True
                try:
                    self._drain()
                finally:
                    self._local.background = False

    def lag(self) -> dict[str, Lag]:
        """Sessions whose log holds entries the index has not consumed yet (empty: all indexed).

        Reads the committed offsets; never raises, never waits long for a catch-up under way
        (then it says nothing).
        """
        if self.disabled or not self.path.exists() or not self._lock.acquire(timeout=0.05):
            return {}
        try:
            rows = dict(self._run(lambda con: con.execute("SELECT session_id, offset FROM logs").fetchall()))
        except Exception:  # noqa: BLE001 - a report, never a failure
            return {}
        finally:
            self._lock.release()
        out: dict[str, Lag] = {}
        root = sessions_dir(self.workspace)
        if not root.is_dir():
            return out
        for d in root.iterdir():
            log = d / LOG_NAME
            try:
                size = os.stat(log).st_size
            except OSError:
                continue
            offset = rows.get(d.name, 0)
            if size <= offset:
                continue
            behind = size - offset
            if behind > LAG_COUNT_BYTES:
                out[d.name] = Lag(0, behind, False)
                continue
            try:
                with os.fdopen(safeio.open_file(log), "rb") as f:
                    f.seek(offset)
                    entries = f.read(behind).count(b"\n")
            except OSError:
                continue
            if entries:
                out[d.name] = Lag(entries, behind, True)
        return out

    def close(self) -> None:
        if self._pending:
            self.flush()  # what the background indexer had still to do is done now
        self._close_connection()

    def _close_connection(self) -> None:
        with self._lock:
            if self._con is not None:
                try:
                    self._con.close()
                except sqlite3.Error:
                    pass
            self._con, self._inode = None, None
            self._seen = {}

    # --- keeping up with the logs -----------------------------------------------------------

    def catch_up(self, session_dir: Path) -> int:
        """Index what ``session_dir``'s log gained since the last call; the number of rows added.

        Never raises: this runs inside conversation hooks, and a broken index must not
        stop a run.
        """
        if self.disabled:
            return 0  # said once, when it was found out
        try:
            return self._run(lambda con: self._consume(con, Path(session_dir)))
        except Exception as exc:  # noqa: BLE001 - derived data: report, never fail the caller
            self._notice(f"history index not updated for {Path(session_dir).name}: {exc}")
            return 0

    def rebuild(self) -> IndexStats:
        """Delete the index and build it again from every session log (``%sessions reindex``)."""
        started = time.monotonic()
        self.flush()
        with self._lock:
            self._close_connection()
            self._delete_files()
            self.disabled = None
            rows = self._run(self._sync_all)
            sessions = self._run(lambda con: con.execute("SELECT count(*) FROM logs").fetchone()[0])
        return IndexStats(sessions, rows, time.monotonic() - started)

    # --- searching -----------------------------------------------------------------------

    def search(self, query: str, *, session_id: str | None = None, limit: int = 5) -> list[Hit]:
        """Matches for ``query`` (a substring, case-insensitive; words are ANDed), newest first.

        ``session_id`` limits the search to one session (caught up first); ``None``
        searches all sessions of the workspace. Raises ``SessionError`` only when the index
        cannot work at all, with what to do.
        """
        query = query.strip()
        limit = max(1, min(int(limit), MAX_LIMIT))
        if not query:
            return []
        self.flush()  # what the background indexer has not reached yet is indexed first
        if session_id is not None:
            if not session_id or "/" in session_id or session_id.startswith("."):
                return []  # not a session id: never a path to read
            folder = sessions_dir(self.workspace) / session_id
            if (folder / LOG_NAME).is_file():
                self._run(lambda con: self._consume(con, folder))
        else:
            self._run(self._sync_all)
        return self._run(lambda con: match(con, query, session_id, limit))

    def count(self, session_id: str | None = None) -> int:
        """Rows in the index, of one session or of all."""
        self.flush()
        where, args = ("WHERE session_id = ?", [session_id]) if session_id is not None else ("", [])
        return self._run(lambda con: con.execute(f"SELECT count(*) FROM docs {where}", args).fetchone()[0])

    # --- the connection, and recovering from a broken file ---------------------------------------

    def _run(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        """Run ``fn`` on a healthy connection; a corrupt file is deleted, rebuilt and ``fn`` retried once."""
        with self._lock:
            if self.disabled:
                raise SessionError(f"history search is unavailable: {self.disabled}")
            for attempt in (1, 2):
                try:
                    return fn(self._open())
                except sqlite3.Error as exc:
                    if attempt == 2 or not _is_corrupt(exc):
                        raise SessionError(
                            f"history index {self.path} failed: {exc}; run %sessions reindex to rebuild it"
                        ) from exc
                    self._notice(
                        f"the history index {self.path.name} was unreadable ({exc}); "
                        "it was deleted and is rebuilt from the session logs"
                    )
                    self._close_connection()
                    self._delete_files()
            raise AssertionError("unreachable")

    def _open(self) -> sqlite3.Connection:
        try:
            return self._connection()
        except OSError as exc:
            raise SessionError(
                f"history index {self.path} cannot be opened: {exc.strerror or exc}; "
                "move it away, then run %sessions reindex"
            ) from exc

    def _connection(self) -> sqlite3.Connection:
        try:
            st = os.stat(self.path)
            inode: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            inode = None
        if self._con is not None and inode == self._inode:
            return self._con
        if self._con is not None:
            # The file was deleted or replaced under us: start over from the logs.
            self._notice(
                f"the history index {self.path.name} was removed; it is rebuilt from the session logs"
            )
            self._close_connection()
        ensure_state_dir(self.workspace)
        # SQLite opens these by name: none may be a link or special file (safeio's limits).
        for suffix in ("", "-wal", "-shm", "-journal"):
            safeio.check_no_links(f"{self.path}{suffix}")
        # The index holds what the logs hold: private like them (SQLite gives its -wal and
        # -shm files the database's mode).
        os.close(safeio.open_file(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        con = sqlite3.connect(self.path, timeout=2.0, check_same_thread=False, isolation_level=None)
        # The short-term side table's tokens (history_query.grams), computed by the triggers.
        con.create_function("pc_grams", 1, grams_text, deterministic=True)
        try:
            self._prepare(con)
        except sqlite3.OperationalError as exc:
            con.close()
            if "fts5" in str(exc) or "trigram" in str(exc):
                self.disabled = (
                    f"this Python's SQLite {sqlite3.sqlite_version} lacks FTS5 with the trigram "
                    "tokenizer (needs SQLite 3.34 or newer)"
                )
                raise SessionError(f"history search is unavailable: {self.disabled}") from exc
            raise
        except BaseException:
            con.close()
            raise
        st = os.stat(self.path)
        self._con, self._inode = con, (st.st_dev, st.st_ino)
        return con

    # --- forgetting ------------------------------------------------------------------------

    def forget(self, session_ids: list[str], *, scrub: bool = False) -> int:
        """Delete every row of ``session_ids`` now (trash, purge); the number of rows deleted.

        With ``scrub`` (purge) the deleted text is also gone from the files: the full-text
        index is merged (``optimize``), the database rebuilt (``VACUUM``) and the WAL
        checkpointed and truncated. ``secure_delete`` zeroes freed pages meanwhile. An index
        that does not exist is not created. Raises ``SessionError`` if the index cannot be
        changed (another process holds it).
        """
        ids = [sid for sid in dict.fromkeys(session_ids) if sid]
        if self.disabled or not ids or not os.path.exists(self.path):
            return 0

        def run(con: sqlite3.Connection) -> int:
            deleted = 0
            with _transaction(con):
                for sid in ids:
                    deleted += con.execute("DELETE FROM docs WHERE session_id = ?", (sid,)).rowcount
                    con.execute("DELETE FROM logs WHERE session_id = ?", (sid,))
            for sid in ids:
                self._seen.pop(sid, None)
            if scrub:
                con.execute("INSERT INTO docs_fts(docs_fts) VALUES ('optimize')")
                con.execute("VACUUM")
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return deleted

        return self._run(run)

    @staticmethod
    def _prepare(con: sqlite3.Connection) -> None:
        con.execute("PRAGMA journal_mode=WAL")
        # Deleted rows are overwritten with zeros, not left in free pages (purge forgets).
        con.execute("PRAGMA secure_delete=ON")
        # Derived data: a lost last transaction is re-read from the log next time (the offset
        # is in the same transaction), so the per-append cost need not include an fsync.
        con.execute("PRAGMA synchronous=NORMAL")
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            for name in ("docs_short", "docs_fts", "docs", "logs"):
                con.execute(f"DROP TABLE IF EXISTS {name}")
        con.executescript(_SCHEMA)
        con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _delete_files(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                os.unlink(f"{self.path}{suffix}")
            except FileNotFoundError:
                pass

    def _notice(self, text: str) -> None:
        """Said through ``on_notice`` during a run; kept in ``notices`` for the next magic otherwise."""
        if getattr(self._local, "background", False):
            self._deferred.append(text)
            return
        if self.on_notice is not None:
            try:
                self.on_notice(text)
                return
            except Exception:  # noqa: BLE001 - a display problem must not break indexing
                pass
        self.notices.append(text)

    # --- tailing one log -------------------------------------------------------------------------

    def _sync_all(self, con: sqlite3.Connection) -> int:
        root = sessions_dir(self.workspace)
        present: dict[str, tuple[Path, os.stat_result]] = {}
        if root.is_dir():
            for p in root.iterdir():
                try:
                    present[p.name] = (p, os.stat(p / LOG_NAME))
                except (FileNotFoundError, NotADirectoryError):
                    continue
        known = {row[0] for row in con.execute("SELECT session_id FROM logs")}
        for gone in known - present.keys():  # trashed or purged: not searchable any more
            with _transaction(con):
                con.execute("DELETE FROM docs WHERE session_id = ?", (gone,))
                con.execute("DELETE FROM logs WHERE session_id = ?", (gone,))
            self._seen.pop(gone, None)
        # In id order (ids start with the time): rowids then follow time, newest last.
        return sum(self._consume(con, present[sid][0], present[sid][1]) for sid in sorted(present))

    def _consume(self, con: sqlite3.Connection, session_dir: Path, st: os.stat_result | None = None) -> int:
        sid = session_dir.name
        if st is None:
            try:
                st = os.stat(session_dir / LOG_NAME)
            except FileNotFoundError:
                return 0
        # A log unchanged since it was consumed to its end needs no look (a search of all
        # sessions would otherwise open and hash every log each time).
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        if self._seen.get(sid) == stamp:
            return 0
        row = con.execute("SELECT offset, head FROM logs WHERE session_id = ?", (sid,)).fetchone()
        offset, head = (row[0], row[1]) if row else (0, "")
        tail = _read_tail(session_dir / LOG_NAME, offset, head)
        if tail is None:
            if offset == st.st_size:
                self._seen[sid] = stamp
            return 0
        restart, data, new_offset, new_head = tail
        rows = 0
        with _transaction(con):
            if restart:
                con.execute("DELETE FROM docs WHERE session_id = ?", (sid,))
            for line in data.split(b"\n"):
                if line.strip():
                    rows += self._index_line(con, session_dir, line)
            con.execute(
                "INSERT INTO logs(session_id, offset, head) VALUES (?, ?, ?) "
                "ON CONFLICT(session_id) DO UPDATE SET offset = excluded.offset, head = excluded.head",
                (sid, new_offset, new_head),
            )
        if new_offset == st.st_size:
            self._seen[sid] = stamp
        return rows

    def _index_line(self, con: sqlite3.Connection, session_dir: Path, line: bytes) -> int:
        entry = parse_line(line)  # None: a torn or corrupt line; the loader reports it, the index skips it
        if isinstance(entry, MessageEntry):
            # A plainly valid entry has every field of its type as it stands; one that needed
            # the lenient reading is indexed as the loader reads it.
            data = entry.raw if entry.parsed is None else entry.parsed.to_dict()
            return self._index_message(con, session_dir.name, data)
        if isinstance(entry, SpillEntry):
            return self._index_spill(con, session_dir, entry)
        return 0

    def _index_message(self, con: sqlite3.Connection, sid: str, entry: dict[str, Any]) -> int:
        uuid, role = entry.get("id"), entry.get("role")
        if not isinstance(uuid, str) or not isinstance(role, str):
            return 0
        # A replace snapshot repeats messages already indexed (a spilled result then carries
        # only its preview): keep the first, fullest version of each message.
        if con.execute(
            "SELECT 1 FROM docs WHERE session_id = ? AND message_uuid = ? LIMIT 1", (sid, uuid)
        ).fetchone():
            return 0
        ts = entry.get("ts") if isinstance(entry.get("ts"), (int, float)) else 0.0
        rows: list[tuple[Any, ...]] = []
        content = entry.get("content")
        if isinstance(content, str) and content.strip():
            rows.append((sid, uuid, None, None, role, "text", ts, 0, content))
        for k, call in enumerate(entry.get("tool_calls") or ()):
            if isinstance(call, dict):
                name, args = call.get("name"), _dumps(call.get("arguments") or {})
                rows.append((sid, uuid, call.get("id"), name, role, "tool_call", ts, k, f"{name} {args}"))
        result = entry.get("tool_result")
        if isinstance(result, dict) and isinstance(result.get("content"), str):
            call_id = result.get("call_id")
            tool = con.execute(
                "SELECT tool FROM docs WHERE session_id = ? AND call_id = ? AND kind = 'tool_call' LIMIT 1",
                (sid, call_id),
            ).fetchone()
            rows.append((sid, uuid, call_id, tool and tool[0], role, "tool_result", ts, 0, result["content"]))
            # A spill is logged before its (preview) result: link its rows to this message.
            con.execute(
                "UPDATE docs SET message_uuid = ? WHERE session_id = ? AND kind = 'spill' "
                "AND call_id = ? AND message_uuid = ''",
                (uuid, sid, call_id),
            )
        con.executemany(
            "INSERT INTO docs(session_id, message_uuid, call_id, tool, role, kind, ts, part, text) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        return len(rows)

    def _index_spill(self, con: sqlite3.Connection, session_dir: Path, entry: SpillEntry) -> int:
        sid, call_id, rel = session_dir.name, entry.call_id, entry.path
        if call_id is None or rel is None:
            return 0
        if con.execute(
            "SELECT 1 FROM docs WHERE session_id = ? AND kind = 'spill' AND call_id = ? LIMIT 1",
            (sid, call_id),
        ).fetchone():
            return 0
        parts = Path(rel).parts
        if len(parts) != 2 or parts[0] != SPILL_DIR or parts[1].startswith("."):
            return 0  # a log naming a file outside its tool-results/: not ours to read
        try:
            with os.fdopen(safeio.open_file(session_dir / rel), "rb") as f:
                text = f.read(SPILL_INDEX_BYTES).decode("utf-8", errors="replace")
        except OSError:
            return 0
        owner = con.execute(
            "SELECT message_uuid FROM docs WHERE session_id = ? AND kind = 'tool_result' AND call_id = ? LIMIT 1",
            (sid, call_id),
        ).fetchone()
        ts = entry.raw.get("ts") if isinstance(entry.raw.get("ts"), (int, float)) else 0.0
        ref = f"{STATE_DIR}/sessions/{sid}/{rel}"
        tool = entry.tool
        rows = [
            (sid, owner[0] if owner else "", call_id, tool, "user", "spill", ts, part, line, ref, chunk)
            for part, (line, chunk) in enumerate(_chunks(text))
        ]
        con.executemany(
            "INSERT INTO docs(session_id, message_uuid, call_id, tool, role, kind, ts, part, line, ref, text) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        return len(rows)


def _dumps(value: Any) -> str:
    """Tool-call arguments as text; nested past orjson's limit they still index (or are skipped)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        import json

        try:
            return json.dumps(value, ensure_ascii=False)
        except (RecursionError, ValueError, TypeError):
            return ""


def forget_sessions(workspace: Path, session_ids: list[str], *, scrub: bool = False) -> int:
    """``HistoryIndex.forget`` through a connection of its own (lifecycle: trash and purge)."""
    index = HistoryIndex(workspace)
    try:
        return index.forget(session_ids, scrub=scrub)
    finally:
        index.close()


def reindex_session(workspace: Path, session_dir: Path) -> int:
    """Index one session's log from its start (restore); never raises, like ``catch_up``."""
    index = HistoryIndex(workspace)
    try:
        return index.catch_up(session_dir)
    finally:
        index.close()


@contextmanager
def _transaction(con: sqlite3.Connection) -> Iterator[None]:
    # The rows and the log offset they came from commit together: a crash between the two
    # is re-read from the log next time, never indexed twice.
    con.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def _is_corrupt(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB
    return type(exc) is sqlite3.DatabaseError  # Python < 3.11: corruption has no subclass


def _read_tail(log: Path, offset: int, head: str) -> tuple[bool, bytes, int, str] | None:
    """The whole lines after ``offset``: (restart, data, new offset, new head), or None if nothing new.

    ``restart`` means the log is not the one the offset belongs to (it shrank, or its first
    bytes changed: an import or a hand repair), so it is read from the start.
    """
    try:
        f = os.fdopen(safeio.open_file(log), "rb")
    except OSError:
        return None  # gone, or refused (a link, a FIFO): an unsafe session is not indexed
    with f:
        size = os.fstat(f.fileno()).st_size
        restart = offset > 0 and (size < offset or _head(f, offset) != head)
        if restart:
            offset = 0
        if size == offset:
            return None
        f.seek(offset)
        data = f.read(size - offset)
        end = data.rfind(b"\n") + 1  # whole lines only: the writer may be mid-line
        if end == 0 and not restart:
            return None
        new_offset = offset + end
        return (
            restart,
            data[:end],
            new_offset,
            head if offset >= HEAD_BYTES and not restart else _head(f, new_offset),
        )


def _head(f: Any, offset: int) -> str:
    return hashlib.sha1(os.pread(f.fileno(), min(offset, HEAD_BYTES), 0)).hexdigest()


def _chunks(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, text) pieces of at most CHUNK_LINES lines or about CHUNK_BYTES."""
    lines = text.splitlines(keepends=True)
    start, buf, size = 1, [], 0
    for number, line in enumerate(lines, 1):
        buf.append(line)
        size += len(line)
        if len(buf) >= CHUNK_LINES or size >= CHUNK_BYTES:
            yield start, "".join(buf)
            start, buf, size = number + 1, [], 0
    if buf:
        yield start, "".join(buf)
