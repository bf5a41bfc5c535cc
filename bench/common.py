"""What every benchmark shares: sizes (full and ``--quick``), timing, result rows.

A row is one line of SPEC §15 (or an extra figure): what was measured, the ratio the
target is about, the target, and whether it was met. Ratios compare two things timed in
the same run on the same machine, so they mean something on a laptop and in CI alike;
the absolute times are kept beside them for the reader.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Sizes:
    """How big each benchmark runs. ``full`` is what SPEC §15 names; ``quick`` keeps CI under a minute."""

    name: str
    resume_log_mb: int  # the log that resume and full replay read (SPEC: 200 MB)
    overhead_big: int  # messages for the per-step overhead at the large end (SPEC: 10,000)
    overhead_small: int  # ... and at the small end (SPEC: 100)
    overhead_steps: int  # steps timed at each end
    appends: int  # durable appends timed (each one fsync)
    replace_messages: int  # the snapshot of the replace row (SPEC: 1,000)
    sessions: int  # sessions listed (SPEC: 1,000)
    history_mb: tuple[int, ...]  # history sizes indexed for search (SPEC: 1 GB, extrapolated)
    history_queries: int
    corpus_kb: int  # per tokenizer corpus
    cost_steps: int  # steps of the context-cost task (the issue: >= 200)
    cost_window: int  # the window of the managed strategies
    repeat: int  # repetitions of each timing; the median is kept
    index_variants: bool = True  # also time the reference rows with the history index
    timeline_mb: int = 200  # the log the timeline is built for (issue 18: 200 MB)
    magic_big: int = 10_000  # messages of the big session for the per-step cost through %agent
    magic_steps: int = 60  # model steps of each timed %agent run (a step is ~3 ms, its fsyncs vary)
    memory_messages: int = 20_000  # the log whose full load's memory is measured (~40 MB)


FULL = Sizes(
    name="full",
    resume_log_mb=200,
    overhead_big=10_000,
    overhead_small=100,
    overhead_steps=300,
    appends=400,
    replace_messages=1_000,
    sessions=1_000,
    history_mb=(32, 64, 128, 256),
    history_queries=40,
    corpus_kb=200,
    cost_steps=220,
    cost_window=200_000,
    repeat=5,
)

QUICK = Sizes(
    name="quick",
    index_variants=False,
    timeline_mb=4,
    magic_big=1_000,
    magic_steps=5,
    memory_messages=2_000,
    resume_log_mb=30,
    overhead_big=10_000,
    overhead_small=100,
    overhead_steps=100,
    appends=60,
    replace_messages=1_000,
    sessions=200,
    history_mb=(2, 4),
    history_queries=10,
    corpus_kb=60,
    cost_steps=80,
    cost_window=100_000,
    repeat=3,
)


@dataclass
class Row:
    """One measured figure, with its target."""

    key: str
    what: str
    target: str
    value: float | None  # the figure the target is about (a ratio, seconds, bytes…)
    unit: str
    ok: bool | None  # None: informational, no target
    detail: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def timed(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def median_time(fn: Callable[[], Any], repeat: int, *, setup: Callable[[], Any] | None = None) -> float:
    """Median of ``repeat`` runs of ``fn`` (``setup`` before each, not timed), GC on as a user runs it (issue 34)."""
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        times.append(timed(fn))
    return statistics.median(times)


def cpu_time(fn: Callable[[], Any]) -> float:
    """CPU seconds of this process spent in ``fn`` (GC on)."""
    started = time.process_time()
    fn()
    return time.process_time() - started


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def drop_page_cache_hint() -> str:
    """Benchmarks read files the OS has cached (they were just written): say so in the report."""
    return "files read from the page cache (written just before); a cold disk adds its read time"
