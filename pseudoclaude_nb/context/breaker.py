"""The circuit breaker of automatic Layer 2: stop retrying a compaction that keeps failing.

Three consecutive automatic failures open it (a compaction that frees less than 5% is a
failure too). While open, automatic compaction is skipped — visibly — and ``%compact``
still works; any success closes it.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_FREED = 0.05


@dataclass
class Breaker:
    limit: int = 3
    failures: int = 0

    @property
    def open(self) -> bool:
        return self.failures >= self.limit

    def record(self, ok: bool, trigger: str) -> None:
        if ok:
            self.failures = 0
        elif trigger == "auto":
            # A manual attempt is the user's explicit try; only automatic ones count.
            self.failures += 1

    def state(self) -> str:
        return "open" if self.open else f"closed ({self.failures}/{self.limit} failures)"
