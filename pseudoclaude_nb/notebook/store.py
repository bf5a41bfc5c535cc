"""The cells this kernel ran, as ``CellRecord`` s in order: what the activity block and
``read_cells`` read. It keeps the last ``limit`` records only (older ones are dropped).

A cell marked ``agent-skip`` is a record with ``skipped`` set and nothing else: ``last``
and ``by_count`` (what ``read_cells`` reads) leave it out; ``records`` keeps it, so the
activity block can count it."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator

from .record import CellRecord

STORE_LIMIT = 500


class CellStore:
    def __init__(self, limit: int = STORE_LIMIT) -> None:
        self._records: deque[CellRecord] = deque(maxlen=limit)
        self._lock = threading.Lock()
        self._seq = 0

    def next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    @property
    def last_seq(self) -> int:
        """The sequence number of the last record handed out (0: none yet)."""
        return self._seq

    def add(self, record: CellRecord) -> None:
        with self._lock:
            self._records.append(record)

    def records(self) -> list[CellRecord]:
        with self._lock:
            return list(self._records)

    def __iter__(self) -> Iterator[CellRecord]:
        return iter(self.records())

    def __len__(self) -> int:
        return len(self._records)

    def since(self, seq: int) -> list[CellRecord]:
        """Records after sequence number ``seq``, oldest first."""
        return [r for r in self.records() if r.seq > seq]

    def sendable(self) -> list[CellRecord]:
        """Records the model may read: all but the cells marked ``agent-skip``."""
        return [r for r in self.records() if not r.skipped]

    def last(self, n: int) -> list[CellRecord]:
        return self.sendable()[-n:] if n > 0 else []

    def by_count(self, start: int | None, end: int | None) -> list[CellRecord]:
        """Records whose execution count is within ``start..end`` (inclusive)."""
        lo = start if start is not None else float("-inf")
        hi = end if end is not None else float("inf")
        return [r for r in self.sendable() if r.execution_count is not None and lo <= r.execution_count <= hi]
