"""The first run's imports, done while a kernel is idle (``magics.warm``, issue 47).

A stand-in shell with IPython's event hooks and a module that records the thread importing
it: the warm-up starts only after ``IDLE`` seconds without a cell, on a thread of its own; a
cell that starts before then cancels it (it starts again after that cell), and a cell that
starts while it imports waits for it to finish.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
from IPython.core.events import EventManager, available_events

from pseudoclaude_nb.magics import warm


class Shell:
    def __init__(self) -> None:
        self.events = EventManager(self, available_events)
        self.kernel = object()

    def cell(self) -> None:
        self.events.trigger("pre_run_cell", None)
        self.events.trigger("post_run_cell", None)


@pytest.fixture
def slow_module(tmp_path: Path, monkeypatch):
    """A module whose import takes 0.3 s and notes the thread that imported it."""
    name = f"pc_warm_probe_{id(tmp_path)}"
    (tmp_path / f"{name}.py").write_text(
        "import threading, time\nTHREAD = threading.current_thread().name\ntime.sleep(0.3)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(warm, "IDLE", 0.1)
    yield name
    sys.modules.pop(name, None)


def test_it_imports_on_its_own_thread_once_the_kernel_is_idle(slow_module: str) -> None:
    shell = Shell()
    w = warm.Warmer(shell, lambda: [slow_module])
    shell.cell()  # the %load_ext cell ends
    assert slow_module not in sys.modules  # not at once: only after IDLE seconds without a cell
    deadline = time.monotonic() + 5
    while not w.done and time.monotonic() < deadline:
        time.sleep(0.02)
    assert w.done and sys.modules[slow_module].THREAD == "pseudoclaude-warm"
    w.close()


def test_a_cell_before_the_idle_time_puts_it_off(slow_module: str) -> None:
    shell = Shell()
    w = warm.Warmer(shell, lambda: [slow_module])
    for _ in range(5):  # cells back to back: never idle long enough
        shell.cell()
        time.sleep(0.03)
    assert slow_module not in sys.modules and not w.done
    w.close()
    time.sleep(0.3)
    assert slow_module not in sys.modules  # closed: the pending start was cancelled


def test_a_cell_that_starts_during_the_warm_up_waits_for_it(slow_module: str) -> None:
    shell = Shell()
    w = warm.Warmer(shell, lambda: [slow_module])
    shell.events.trigger("post_run_cell", None)
    time.sleep(0.2)  # the thread has started and is importing
    assert any(t.name == "pseudoclaude-warm" for t in threading.enumerate())
    shell.events.trigger("pre_run_cell", None)  # returns only when the import is done
    assert slow_module in sys.modules and w.done
    w.close()


def test_no_warm_up_without_a_kernel() -> None:
    shell = Shell()
    shell.kernel = None
    assert warm.warmer(shell, settings=None) is None
