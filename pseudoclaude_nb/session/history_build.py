"""Building the history index from every log in one pass (``%sessions reindex``, a lost index).

The rows are the ones ``history_indexer`` derives when it tails a log; here a reader thread
decodes the logs while the caller's thread inserts, into an index that starts empty.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
from pathlib import Path

from . import history_indexer as tailing
from .history_indexer import Progress
from .paths import LOG_NAME


def build(con: sqlite3.Connection, sessions: list[tuple[str, Path]], progress: Progress | None = None) -> int:
    """Index every log into an empty index (a rebuild); the rows added.

    A reader thread decodes the logs into rows while this thread inserts them: SQLite
    tokenizes with the GIL released, so the two overlap on two cores.
    """
    batches: queue.Queue = queue.Queue(maxsize=4)
    stop = threading.Event()

    def read() -> None:
        try:
            next_id = 1
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
                        if batch.bytes >= tailing.BLOCK_BYTES:
                            batches.put(("rows", batch.take(), batch.bytes))
                            batch.bytes = 0
                    batches.put(("rows", batch.take(), batch.bytes + (size - end)))
                    next_id = batch.next_id
                    st = os.fstat(f.fileno())
                    stamp = (
                        tailing.stamp_text((st.st_ino, st.st_size, st.st_mtime_ns)) if end == st.st_size else None
                    )
                    batches.put(("log", (sid, session_id, end, tailing.head_of(f, end), stamp), batch.rows))
        except BaseException as exc:  # noqa: BLE001 - handed to the writer, which raises it
            batches.put(("error", exc, 0))
        finally:
            batches.put(None)

    reader = threading.Thread(target=read, name="pseudoclaude-reindex", daemon=True)
    reader.start()
    rows = 0
    try:
        with tailing.transaction(con):
            while (item := batches.get()) is not None:
                what, value, n = item
                if what == "error":
                    raise value
                if what == "log":
                    con.execute(
                        "INSERT INTO logs(sid, session_id, offset, head, stamp) VALUES (?, ?, ?, ?, ?)", value
                    )
                    rows += n
                    continue
                tailing.write(con, value)
                if progress is not None:
                    progress(n)
    finally:
        stop.set()
        while reader.is_alive():  # let a reader blocked on a full queue finish
            try:
                batches.get(timeout=0.1)
            except queue.Empty:
                pass
        reader.join()
    return rows
