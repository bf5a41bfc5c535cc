"""What the background indexer has still to do, and how far the index is behind the logs.

The agent's history hook only *marks* a session here; one daemon thread catches the marked
sessions up once the appends pause for ``QUIET_SECONDS`` (a burst becomes one transaction,
and the indexer's Python work does not take the interpreter from the appends it follows;
an agent pauses at every model call), or after ``MAX_WAIT_SECONDS`` of a steady stream.
Every search drains the backlog first in its own thread. Notices met on the background
thread wait for a caller's thread (``on_notice`` may draw in a notebook).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from time import monotonic
from typing import cast

from .. import safeio
from ..workspace import LOG_NAME, sessions_dir

QUIET_SECONDS = 0.2  # the background indexer starts once no session was marked for this long
MAX_WAIT_SECONDS = 2.0  # ... or once the first mark waited this long
LAG_COUNT_BYTES = 16 << 20


class Backlog:
    """Sessions marked for a catch-up, and the daemon thread that catches them up."""

    def __init__(self, catch_up: Callable[[Path], object]) -> None:
        self._catch_up = catch_up
        self._pending: dict[str, Path] = {}  # by the folder's text: a str keeps its hash
        self._pending_lock = threading.Lock()
        self._wake = threading.Event()  # set when a session is newly marked
        self._last_mark = 0.0
        self._thread: threading.Thread | None = None
        self._running = False  # the thread's loop is on (it clears this if it ever ends)
        self._drain_lock = threading.Lock()  # one catch-up of the pending sessions at a time
        self._local = threading.local()
        self._taken: list[Path] = []  # the sessions a catch-up under way took (unmarked meanwhile)

    def __bool__(self) -> bool:
        return bool(self._pending)

    def marked(self) -> set[str]:
        """The names of the session folders marked or being caught up now: their lag is this
        kernel's own appends, gone in a moment, not news for a listing."""
        with self._pending_lock:
            return {p.name for p in (*self._pending.values(), *self._taken)}

    @property
    def on_background_thread(self) -> bool:
        return getattr(self._local, "background", False)

    def marker(self, session_dir: Path) -> Callable[..., None]:
        """``mark(*_)``: marks ``session_dir``, taking any hook's arguments (one call per append)."""
        folder = Path(session_dir)
        key = str(folder)
        pending = self._pending

        def mark(*_: object) -> None:
            # After a fsync the caches are cold and every line run here costs several
            # times its hot cost; an append's whole budget is a few tens of microseconds
            # (SPEC §15). So: marked already (the appends of one run) and the thread on,
            # the stamp is all: the thread reads the log when it takes the session.
            self._last_mark = monotonic()
            if key not in pending or not self._running:
                self._mark(key, folder)

        return mark

    def add(self, *session_dirs: Path) -> None:
        """Mark each of ``session_dirs``; the background thread catches them up soon.

        All at once: the thread starts with the first mark, and marking a thousand one by
        one (a listing's lagging sessions) then raced it for the GIL (~0.15 s).
        """
        self._last_mark = monotonic()  # what the thread's pause is measured from
        self._mark({str(d): Path(d) for d in session_dirs})

    def _mark(self, key: str | dict[str, Path], folder: Path | None = None) -> None:
        with self._pending_lock:
            self._pending.update(
                key if isinstance(key, dict) else {key: cast(Path, folder)}
            )  # given with a str key
            if self._thread is None or not self._thread.is_alive():
                self._running = True
                self._thread = threading.Thread(target=self._loop, name="pseudoclaude-indexer", daemon=True)
                self._thread.start()
        self._wake.set()

    def take(self) -> list[Path]:
        """The marked sessions, unmarked here and not caught up: another index takes them over."""
        with self._pending_lock:
            pending = sorted(self._pending.values())
            self._pending.clear()  # in place: the markers hold this dict
        return pending

    def drain(self) -> None:
        """Catch up every marked session in this thread, after a catch-up under way ends."""
        with self._drain_lock:
            self._drain()

    def _drain(self) -> None:
        with self._pending_lock:
            pending = self._taken = sorted(self._pending.values())
            self._pending.clear()  # in place: the markers hold this dict
        try:
            for folder in pending:
                self._catch_up(folder)
        finally:
            with self._pending_lock:
                self._taken = []

    def _loop(self) -> None:
        try:
            self._catch_ups()
        finally:
            self._running = False

    def _catch_ups(self) -> None:
        while True:
            self._wake.wait()
            first = monotonic()
            while True:
                now = monotonic()
                quiet = now - self._last_mark
                if quiet >= QUIET_SECONDS or now - first >= MAX_WAIT_SECONDS:
                    break
                time.sleep(QUIET_SECONDS - quiet)
            self._wake.clear()  # before the swap: a session marked after it wakes the next round
            with self._drain_lock:
                self._local.background = True
                try:
                    self._drain()
                finally:
                    self._local.background = False


@dataclass(frozen=True)
class Lag:
    entries: int  # log lines not in the index yet (counted up to LAG_COUNT_BYTES)
    bytes: int
    counted: bool  # False: too many bytes behind to count their lines here


def lag(
    workspace: Path, offsets: dict[str, int], *, count: int = 1 << 62, sizes: dict[str, int] | None = None
) -> dict[str, Lag]:
    """Sessions whose log has grown past the offset the index committed for it.

    The entries behind are counted (the logs read past their offsets) while all that is
    behind is within ``count`` bytes; past it only the bytes are said (one stat a log):
    ``%sessions list`` of 1,000 unindexed logs spent ~0.5 s reading them. ``sizes`` (the
    logs' sizes by session id, as a listing has just read them) spares a second stat of each.
    """
    out: dict[str, Lag] = {}
    root = sessions_dir(workspace)
    if not root.is_dir():
        return out
    behind: dict[str, tuple[Path, int, int]] = {}
    if sizes is None:
        sizes = {}
        for d in root.iterdir():
            try:
                sizes[d.name] = os.stat(d / LOG_NAME).st_size
            except OSError:
                continue
    for name, size in sizes.items():
        offset = offsets.get(name, 0)
        if size > offset:
            behind[name] = (root / name / LOG_NAME, offset, size - offset)
    counting = sum(b for _, _, b in behind.values()) <= count
    for name, (log, offset, nbytes) in behind.items():
        if not counting or nbytes > LAG_COUNT_BYTES:
            out[name] = Lag(0, nbytes, False)
            continue
        try:
            with os.fdopen(safeio.open_file(log), "rb") as f:
                f.seek(offset)
                entries = f.read(nbytes).count(b"\n")
        except OSError:
            continue
        if entries:
            out[name] = Lag(entries, nbytes, True)
    return out
