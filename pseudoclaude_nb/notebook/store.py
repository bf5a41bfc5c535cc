"""The cells this kernel ran, as ``CellRecord`` s in order: what the activity block and
``read_cells`` read. It keeps the last ``limit`` records only (older ones are dropped).

A cell marked ``agent-skip`` is a record with ``skipped`` set and nothing else: ``last``
and ``by_count`` (what ``read_cells`` reads) leave it out; ``records`` keeps it, so the
activity block can count it. The names such a cell bound are kept too, with the identity of
what each was bound to (``withhold``): ``inspect_variable`` leaves a name out while it still
holds that object (``withheld``; issue 41), and reads it again once another cell binds it anew."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from .record import CellRecord

STORE_LIMIT = 500


class CellStore:
    def __init__(self, limit: int = STORE_LIMIT) -> None:
        self._records: deque[CellRecord] = deque(maxlen=limit)
        self._lock = threading.Lock()
        self._seq = 0
        self._withheld: dict[str, int] = {}  # name an agent-skip cell bound -> id() of its value

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

    def withhold(self, bound: Mapping[str, int]) -> None:
        """Names a cell marked ``agent-skip`` bound, each with ``id()`` of the value it bound."""
        with self._lock:
            self._withheld.update(bound)

    def withheld(self, namespace: Mapping[str, Any]) -> frozenset[str]:
        """The names of ``namespace`` that still hold what an ``agent-skip`` cell bound them to."""
        with self._lock:
            held = list(self._withheld.items())
        return frozenset(n for n, i in held if n in namespace and id(namespace[n]) == i)

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
