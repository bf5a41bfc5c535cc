"""A run that a kernel restart cut off is said, when its session next runs.

A restart kills the kernel mid-run: no ``RunFinished``, nothing in the log says the run
ended, and the notebook keeps the cell's last output (a running tool line, forever). This
listener keeps ``running.json`` in the session's folder while a run goes (its pid and
step, rewritten at each step) and removes it when the run finishes, whatever the status.
The next run of that session in another process that finds one says so first, as a
notice: "the last run was cut by a kernel restart at step N". (The frozen output goes when
its cell is run again: a front end clears a cell's outputs when it runs it.)

The marker is read and written through ``safeio`` like the package's other files there: a
link put into the folder is neither followed nor written through, and a marker a clone
ships (huge, or nested past the parser's depth) is ignored instead of read whole.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from . import safeio
from .events import Notice, RunEvent, RunFinished, StepStarted

MARKER = "running.json"
MAX_MARKER_BYTES = 4096  # what this module writes is under 100 bytes


def cut_run(session_dir: Path) -> dict[str, Any] | None:
    """The marker another process left in ``session_dir`` (its run never finished), if any."""
    try:
        data = json.loads(safeio.read_bytes(session_dir / MARKER, limit=MAX_MARKER_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("pid") == os.getpid():
        return None
    return data


def cut_line(data: dict[str, Any]) -> str:
    when = data.get("started")
    at = (
        time.strftime(" (started %Y-%m-%d %H:%M)", time.localtime(when))
        if isinstance(when, (int, float))
        else ""
    )
    return (
        f"the last run was cut by a kernel restart at step {data.get('step', '?')}{at}; "
        "this run continues from what the session log holds"
    )


class RunMarker:
    """A runner listener. ``session_dir`` is asked for at each step (a run can start one)."""

    def __init__(self, session_dir: Any, say: Any) -> None:
        self._dir = session_dir  # () -> Path | None
        self._say = say  # (RunEvent) -> None: the renderer, for the notice
        self._path: Path | None = None
        self._fd: int | None = None  # the session folder, opened once a run (safeio.open_dir)
        self._started = time.time()

    def __call__(self, event: RunEvent) -> None:
        if isinstance(event, StepStarted):
            folder = self._dir()
            if folder is None:
                return
            path = Path(folder) / MARKER
            if path != self._path:  # the run's first step in this session: was the last one cut?
                found = cut_run(Path(folder))
                if found is not None:
                    self._say(Notice(cut_line(found), level="warning"))
                self._clear()
                self._path = path
                try:
                    # Walked to once, not at every step (each component opened without following
                    # links: ~0.1 ms a step on a deep path).
                    self._fd = safeio.open_dir(path.parent)
                except OSError:
                    self._fd = None
            self._write(event.step)
        elif isinstance(event, RunFinished):
            self._clear()

    def _write(self, step: int) -> None:
        if self._fd is None:
            return  # a marker is a courtesy: a folder that cannot be opened has none
        data = {"pid": os.getpid(), "step": step, "started": self._started}
        try:
            safeio.write_atomic_at(self._fd, MARKER, json.dumps(data), fsync=False)
        except OSError:
            pass  # never the run's problem

    def __del__(self) -> None:
        # A run that ended in an unexpected error sends no RunFinished: the marker stays (the
        # next run says the run was cut), the folder's descriptor goes with the listener.
        if self._fd is not None:
            os.close(self._fd)

    def _clear(self) -> None:
        if self._fd is not None:
            try:
                os.unlink(MARKER, dir_fd=self._fd)
            except OSError:
                pass
            os.close(self._fd)
            self._fd = None
        self._path = None
