"""The full-history index: every session log of a workspace, searchable by any substring.

It owns ``.pseudoclaude/history.sqlite`` and nothing else. The index is derived data: it
*tails* each ``conversation.jsonl`` from the byte offset it has consumed, so what it finds
is exactly what the logs hold (redacted, spilled bodies as files) and it can always be
rebuilt from them. It holds no text: one row per message part (text, each tool call, the
tool result) and per chunk of a spilled file says where that text is, a contentless FTS5
table holds each row's words, and a vocabulary of the words (with their characters, pairs
and trigrams) finds words by a fragment; matches are read from the logs by offset and
checked (``query``).

The package, one job a module: this ``__init__`` is the index (``HistoryIndex``, the
conversation hook, and ``LIFECYCLE_HOOK``, which the callers of the session lifecycle pass
to it so the index follows a trash, restore or purge); ``schema`` the tables and how text
becomes their tokens; ``rows`` the searchable pieces of a log line or spilled file;
``indexer`` tailing a log into rows; ``rebuild`` building the whole index in one pass;
``backlog`` the background indexer's backlog and the lag report; ``query`` matching and
snippets; ``file`` the database file's connection and recovery from a broken file. It reads the logs through
``session`` (the log layer); the log layer never imports it.

Registered as a conversation hook right after the session writer. With ``background``
(what the agent uses) the hook only marks the session: a background thread indexes what
the log gained since the offset committed with the rows (one transaction per catch-up, so
a kill -9 loses nothing but the uncommitted catch-up, which is read again from the log),
and every search catches up first, so a search finds every message already appended.
Without it, each append is indexed inside the hook. ``rebuild`` (``%sessions reindex``)
builds a new file beside the old one in one pass and renames it into place. It never
raises into its callers: a missing index is recreated, a corrupt one is deleted and
rebuilt, a locked one is caught up later; problems are reported through ``on_notice``.

A workspace is untrusted input and may ship any ``history.sqlite``: a file that is not
exactly the shape this package makes (a trigger, a view, an extra table, another schema, not
a database) is never used; it is renamed to ``history.sqlite.untrusted-<time>`` and the index
is rebuilt from the logs, with one notice (``file``).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from .. import safeio
from ..errors import IndexBusy, SessionError
from ..workspace import LOG_NAME, STATE_DIR, ensure_state_dir, sessions_dir
from .backlog import Backlog, Lag, lag
from .file import (
    SUFFIXES,
    Unsupported,
    Untrusted,
    connect,
    delete_aside,
    delete_files,
    is_busy,
    is_corrupt,
    read_offsets,
    set_aside,
    unlink,
)

if TYPE_CHECKING:
    # The tailing, building and matching modules read log entries (pydantic's message
    # models): imported when the index first tails, builds or searches, not by opening it
    # for ``lag`` (issue 34: the first %sessions list of a fresh kernel).
    from ..conversation import Hooks
    from ..messages import Message
    from .indexer import Indexer
    from .query import Hit

# A failure that must not reach the user's output is logged at debug, with its traceback:
# logging.getLogger("pseudoclaude_nb").setLevel(logging.DEBUG) (and a handler) shows it.
_log = logging.getLogger(__name__)

INDEX_NAME = "history.sqlite"
MAX_LIMIT = 50
BUILD_BYTES = 8 << 20  # an empty index over more log bytes than this is built by ``rebuild``
TRASH_DIR = "trash"  # session.lifecycle.TRASH_DIR

T = TypeVar("T")  # what a function run on the index connection returns

# Called during a rebuild with (log bytes done, log bytes in all); the magic draws it.
ProgressCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class IndexStats:
    sessions: int
    rows: int
    seconds: float
    log_bytes: int = 0
    index_bytes: int = 0


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
        self._tailer: Indexer | None = None  # made on first use (``_indexer``)
        self._lock = threading.RLock()
        self.disabled: str | None = None  # why the index cannot work at all (no FTS5, …)
        self.background = background
        self._backlog = Backlog(lambda folder: self.catch_up(folder))  # late bound: catch_up may be wrapped
        self._deferred: list[str] = []  # notices of the background indexer, said by the next flush
        self._busy: set[str] = set()  # sessions whose catch-up met another kernel's write (issue 41)

    @property
    def _indexer(self) -> Indexer:
        if self._tailer is None:
            from .indexer import Indexer

            self._tailer = Indexer()
        return self._tailer

    @property
    def _seen(self) -> dict[str, tuple[int, int, int]]:
        return self._indexer.seen

    # --- wiring ------------------------------------------------------------------------

    def hooks(self, session_dir: Path) -> Hooks:
        """Conversation hooks that bring ``session_dir``'s log into the index; never raise."""
        from ..conversation import Hooks

        folder = Path(session_dir)
        if self.background:  # the hook only marks the session: one call, on every append
            mark = self._backlog.marker(folder)
            return Hooks(on_append=mark, on_replace=mark)

        def on_append(_message: Message) -> None:
            self.catch_up(folder)

        def on_replace(_reason: str, _messages: list[Message]) -> None:
            self.catch_up(folder)

        return Hooks(on_append=on_append, on_replace=on_replace)

    # --- the background indexer ---------------------------------------------------------------

    def schedule(self, *session_dirs: Path) -> None:
        """Have the background indexer catch ``session_dirs`` up (soon, off the caller's thread)."""
        self._backlog.add(*session_dirs)

    def flush(self) -> None:
        """Catch up, in this thread, every session the background indexer has still to do.

        Waits for a catch-up the indexer has under way; then says what it met (its notices
        wait for a caller's thread: ``on_notice`` may draw in a notebook).
        """
        self._backlog.drain()
        deferred, self._deferred = self._deferred, []
        for text in [*deferred, *self._still_behind()]:
            self._notice(text)

    def ready(self) -> None:
        """Open the index now, without catching up: its shape checked, a foreign file set
        aside, a broken one said (``notices``). Never raises.

        What a run ends with: the catch-up of its appends is left to the background indexer,
        whose commit grew with the index (issue 34), while what is wrong with the file is
        still said in the run that met it.
        """
        if self.disabled:
            return
        try:
            self._run(lambda con: None)
        except Exception as exc:  # noqa: BLE001 - derived data: report, never fail the caller
            self._notice(f"history index not updated: {exc}")

    def take_notices(self) -> list[str]:
        """What the index met and has not said, the background indexer's included; forgotten here."""
        deferred, self._deferred = self._deferred, []
        kept = list(self.notices)
        self.notices.clear()
        return kept + deferred + self._still_behind()

    def _still_behind(self) -> list[str]:
        """One notice for the sessions a busy index left behind and that are still behind now
        (another kernel may have indexed them since): none when nothing is."""
        if not self._busy:
            return []
        busy, self._busy = self._busy, set()
        behind = sorted(busy & self.lag().keys())
        if not behind:
            return []
        names = ", ".join(behind[:3]) + (f" and {len(behind) - 3} more" if len(behind) > 3 else "")
        return [
            f"the history index was busy (another kernel in this folder was writing it), so the "
            f"latest entries of {names} are not indexed yet; nothing is lost: the next search or "
            "run reads them from the log"
        ]

    def lag(self, *, count: int = 1 << 62, sizes: dict[str, int] | None = None) -> dict[str, Lag]:
        """Sessions whose log holds entries the index has not consumed yet (empty: all indexed),
        but for those the background indexer is about to catch up (this kernel's appends).

        Reads the committed offsets; never raises, never waits long for a catch-up under way
        (then it says nothing).
        """
        if self.disabled or not self.path.exists() or not self._lock.acquire(timeout=0.05):
            return {}
        try:
            if self._con is None:
                # Not open yet (a fresh kernel's first listing): one read-only look, not an
                # opening for writing that waits for the disk (issue 34: lag said lazily).
                rows = read_offsets(self.path)
            else:
                rows = dict(
                    self._run(lambda con: con.execute("SELECT session_id, offset FROM logs").fetchall())
                )
        except Exception:  # noqa: BLE001 - a report, never a failure
            return {}
        finally:
            self._lock.release()
        found = lag(self.workspace, rows, count=count, sizes=sizes)
        for name in self._backlog.marked() & found.keys():
            del found[name]  # this kernel's last appends, caught up in a moment
        return found

    def close(self) -> None:
        if self._backlog:
            self.flush()  # what the background indexer had still to do is done now
        self._close_connection()

    def hand_over(self) -> list[Path]:
        """Close without catching up; the sessions still marked for the background indexer.

        For another index of the same file to schedule: a kernel's ``%sessions list`` opens
        one before the agent exists, and the agent, once built, keeps its own (issue 34).
        """
        marked = self._backlog.take()
        # A catch-up the background thread has under way ends with its session; the rest
        # of its round is skipped (``catch_up`` does nothing once disabled) and left to the
        # other index, whose first search catches every log up anyway.
        self.disabled = "handed over to another index"
        self._close_connection()
        return marked

    def _close_connection(self) -> None:
        with self._lock:
            if self._con is not None:
                try:
                    self._con.close()
                except sqlite3.Error:
                    pass
            self._con, self._inode = None, None
            if self._tailer is not None:
                self._tailer.clear()

    # --- keeping up with the logs -----------------------------------------------------------

    def catch_up(self, session_dir: Path) -> int:
        """Index what ``session_dir``'s log gained since the last call; the number of rows added.

        Never raises: this runs inside conversation hooks, and a broken index must not
        stop a run.
        """
        if self.disabled:
            return 0  # said once, when it was found out
        try:
            return self._run(lambda con: self._indexer.consume(con, Path(session_dir)))
        except IndexBusy:
            # Another kernel is writing: the next catch-up reads on from the committed offset,
            # so nothing is lost. Said when notices are taken, and only if still behind then.
            self._busy.add(Path(session_dir).name)
            return 0
        except Exception as exc:  # noqa: BLE001 - derived data: report, never fail the caller
            self._notice(f"history index not updated for {Path(session_dir).name}: {exc}")
            return 0

    def rebuild(self, progress: ProgressCallback | None = None) -> IndexStats:
        """Build the index again from every session log (``%sessions reindex``).

        One pass, one transaction, into a new file beside the old one (no journal, no
        fsync until the end, merges deferred to one ``optimize``), renamed into place when
        complete: an interrupted rebuild leaves the old index as it was. ``progress`` is
        called with (bytes done, bytes in all) as the logs are read.
        """
        from .rebuild import build, finish

        started = time.monotonic()
        self.flush()
        with self._lock:
            self._close_connection()
            self.disabled = None
            ensure_state_dir(self.workspace)
            tmp = self.path.with_name(f"{INDEX_NAME}.rebuild-{os.getpid()}")
            delete_files(tmp)
            present = self._present()
            total = sum(st.st_size for _, st in present.values())
            done = [0]

            def advance(n: int) -> None:
                done[0] += n
                if progress is not None:
                    try:
                        progress(min(done[0], total), total)
                    except Exception:  # noqa: BLE001 - a display problem must not stop the rebuild
                        _log.debug("the rebuild's progress could not be drawn", exc_info=True)

            if progress is not None:
                advance(0)
            try:
                con = self._connect(tmp, bulk=True)
                try:
                    con.execute("DROP INDEX IF EXISTS docs_sid")  # made once at the end: one sort
                    rows = build(con, [(sid, Path(present[sid][0])) for sid in sorted(present)], advance)
                    finish(con)  # merges, the vocabulary, the index dropped above
                    sessions = con.execute("SELECT count(*) FROM logs").fetchone()[0]
                finally:
                    con.close()
                fd = safeio.open_file(tmp, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
                for suffix in SUFFIXES[1:]:  # never let the old file's WAL meet the new file
                    unlink(f"{self.path}{suffix}")
                os.replace(tmp, self.path)
            except BaseException:
                delete_files(tmp)
                raise
            index_bytes = os.path.getsize(self.path)
        return IndexStats(sessions, rows, time.monotonic() - started, total, index_bytes)

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
                self._run(lambda con: self._indexer.consume(con, folder))
        else:
            if self._empty_beside_logs():
                self.rebuild()  # a new or lost index over existing logs: built in one pass, not row by row
            self._run(self._sync_all)
        from .query import match

        return self._run(lambda con: match(con, query, session_id, limit, sessions_dir(self.workspace)))

    def _empty_beside_logs(self) -> bool:
        """The index holds no session while the logs hold more than ``BUILD_BYTES``."""
        try:
            empty = self._run(lambda con: con.execute("SELECT 1 FROM logs LIMIT 1").fetchone() is None)
        except SessionError:
            return False
        return empty and sum(st.st_size for _, st in self._present().values()) > BUILD_BYTES

    def count(self, session_id: str | None = None) -> int:
        """Rows in the index, of one session or of all."""
        self.flush()
        if session_id is None:
            return self._run(lambda con: int(con.execute("SELECT count(*) FROM docs").fetchone()[0]))
        return self._run(
            lambda con: int(
                con.execute(
                    "SELECT count(*) FROM docs JOIN logs USING (sid) WHERE session_id = ?", (session_id,)
                ).fetchone()[0]
            )
        )

    # --- the connection, and recovering from a broken file ---------------------------------------

    def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on a healthy connection; a corrupt file is deleted, rebuilt and ``fn`` retried once."""
        with self._lock:
            if self.disabled:
                raise SessionError(f"history search is unavailable: {self.disabled}")
            for attempt in (1, 2):
                try:
                    return fn(self._open())
                except sqlite3.Error as exc:
                    if is_busy(exc):  # issue 41: another kernel's write, not a broken file
                        raise IndexBusy(
                            f"the history index {self.path.name} is busy: another kernel in this "
                            "folder is writing it; nothing is lost, try again in a moment"
                        ) from exc
                    if attempt == 2 or not is_corrupt(exc):
                        raise SessionError(
                            f"history index {self.path} failed: {exc}; run %sessions reindex to rebuild it"
                        ) from exc
                    self._notice(
                        f"the history index {self.path.name} was unreadable ({exc}); "
                        "it was deleted and is rebuilt from the session logs"
                    )
                    self._close_connection()
                    delete_files(self.path)
            raise AssertionError("unreachable")

    def _open(self) -> sqlite3.Connection:
        try:
            return self._connection()
        except OSError as exc:
            raise SessionError(
                f"history index {self.path} cannot be opened: {exc.strerror or exc}; "
                "move it away, then run %sessions reindex"
            ) from exc
        except Untrusted as exc:  # a second one, just after the first was set aside
            raise SessionError(
                f"history index {self.path} does not have the expected shape ({exc}); "
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
        try:
            con = self._connect(self.path)
        except Untrusted as exc:
            # Shipped with the workspace, or left by another program: never used, kept for a look.
            aside = set_aside(self.path)
            self._notice(
                f"the history index {self.path.name} does not have the expected shape ({exc}); it was "
                f"moved to {aside.name} unused, and the index is rebuilt from the session logs"
            )
            con = self._connect(self.path)
        st = os.stat(self.path)
        self._con, self._inode = con, (st.st_dev, st.st_ino)
        return con

    def _connect(self, path: Path, *, bulk: bool = False) -> sqlite3.Connection:
        """``connect``; raises ``Untrusted`` for a file that is not the expected shape."""
        try:
            return connect(path, bulk=bulk)
        except Unsupported as exc:
            self.disabled = str(exc)
            raise SessionError(f"history search is unavailable: {self.disabled}") from exc

    # --- forgetting ------------------------------------------------------------------------

    def forget(self, session_ids: list[str], *, scrub: bool = False) -> int:
        """Delete every row of ``session_ids`` now (trash, purge); the number of rows deleted.

        Their words leave the contentless table (read back from the log, which a trash
        has just moved) and words no other row holds leave the vocabulary. With ``scrub``
        (purge) the deleted tokens are also gone from the files: the full-text tables are
        merged (``optimize``), the database rebuilt (``VACUUM``) and the WAL checkpointed and
        truncated; if some rows' tokens could not be deleted (their log was gone), the whole
        index is rebuilt from the logs. ``secure_delete`` zeroes freed pages meanwhile. An
        index that does not exist is not created. Files set aside as not the expected shape
        (``history.sqlite.untrusted-*``) may hold the words of a file this package wrote
        before (an older schema): a purge deletes them. Raises ``SessionError`` if the index
        cannot be changed (another process holds it).
        """
        ids = [sid for sid in dict.fromkeys(session_ids) if sid]
        if scrub and ids:
            delete_aside(self.path)
        if self.disabled or not ids or not os.path.exists(self.path):
            return 0

        def run(con: sqlite3.Connection) -> tuple[int, bool]:
            deleted = 0
            with self._indexer.transaction(con):
                for sid in ids:
                    deleted += self._indexer.drop(con, sid, self._log_folder(sid))
            if not scrub:
                return deleted, False
            from .indexer import orphans

            if orphans(con):
                return deleted, True
            for table in ("words", "terms_g"):
                con.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
            con.execute("VACUUM")
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return deleted, False

        deleted, rebuild = self._run(run)
        if rebuild:
            self.rebuild()
        return deleted

    def _log_folder(self, session_id: str) -> Path | None:
        """Where a session's log is now: its folder, or (just trashed) its folder in the trash."""
        live = sessions_dir(self.workspace) / session_id
        if (live / LOG_NAME).is_file():
            return live
        trash = self.workspace / STATE_DIR / TRASH_DIR
        if trash.is_dir():
            for name in (session_id, *sorted(p.name for p in trash.glob(f"{session_id}~*"))[::-1]):
                if (trash / name / LOG_NAME).is_file():
                    return trash / name
        return None

    def _notice(self, text: str) -> None:
        """Said through ``on_notice`` during a run; kept in ``notices`` for the next magic otherwise."""
        if self._backlog.on_background_thread:
            self._deferred.append(text)
            return
        if self.on_notice is not None:
            try:
                self.on_notice(text)
                return
            except Exception:  # noqa: BLE001 - a display problem must not break indexing; kept below
                _log.debug("a history notice could not be said; it is kept for the next magic", exc_info=True)
        self.notices.append(text)

    # --- tailing every log -------------------------------------------------------------------------

    def _present(self) -> dict[str, tuple[str, os.stat_result]]:
        """Session id -> (its directory, its log's stat), of every session with a log."""
        root = sessions_dir(self.workspace)
        present: dict[str, tuple[str, os.stat_result]] = {}
        try:
            entries = list(os.scandir(root))
        except (FileNotFoundError, NotADirectoryError):
            return present
        for entry in entries:  # plain strings: a search of all sessions stats every log
            try:
                present[entry.name] = (entry.path, os.stat(os.path.join(entry.path, LOG_NAME)))
            except OSError:
                # Gone, not a folder, or what a clone can ship: a link loop (ELOOP), a folder
                # without permission. That one session is not searchable; the others are.
                continue
        return present

    def _sync_all(self, con: sqlite3.Connection) -> int:
        present = self._present()
        known = {row[0] for row in con.execute("SELECT session_id FROM logs")}
        for gone in known - present.keys():  # trashed or purged: not searchable any more
            with self._indexer.transaction(con):
                self._indexer.drop(con, gone, self._log_folder(gone))
        # In id order (ids start with the time): rowids then follow time, newest last.
        return sum(self._indexer.consume(con, present[sid][0], present[sid][1]) for sid in sorted(present))


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


class LifecycleHook:
    """What ``session.lifecycle`` tells the index (its ``IndexHook``): sessions left or came back."""

    def forget(self, workspace: Path, session_ids: list[str], *, scrub: bool) -> None:
        """Delete the sessions' rows; a busy index is cleaned at its next sync."""
        try:
            forget_sessions(workspace, session_ids, scrub=scrub)
        except SessionError:
            pass  # another kernel holds it: its next search of all sessions drops the rows

    def restored(self, workspace: Path, session_dir: Path) -> None:
        reindex_session(workspace, session_dir)


# Passed by the callers of trash, restore, purge and gc (``%sessions``): the log layer is
# told about its index per call and never imports it.
LIFECYCLE_HOOK = LifecycleHook()
