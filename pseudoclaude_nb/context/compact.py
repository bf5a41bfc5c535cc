"""The compact strategy: Layer 2 at the threshold, once per request, behind the breaker.

A run's ``review`` (``confirm_compaction``) comes with each call: once the person rejected
a compaction, this run does not plan (nor ask) another; the next run does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ToolError
from ..events import Notice
from ..providers.base import Provider
from ..session.loader import LoadResult
from . import layer2
from .confirm import Review
from .handoff import Intent
from .layer1 import Emit
from .strategy import Marks

if TYPE_CHECKING:
    from ..history import HistoryIndex
    from ..tools import ToolRegistry
    from ..tools.registry import Tool
    from .state import SharedState


class CompactStrategy:
    name = "compact"

    def __init__(self, state: SharedState) -> None:
        self.state = state

    def marks(self) -> Marks:
        return (("Layer 2", self.state.settings.threshold),)

    def threshold(self) -> int:
        return self.state.settings.threshold

    def phase(self) -> str:
        return "normal"

    def sections(self) -> list[tuple[str, str]]:
        return []

    def tools(self, history: HistoryIndex, emit: Emit) -> list[Tool]:
        return []

    def describe(self) -> dict[str, Any]:
        return {}

    def before_request(
        self, estimate: int, provider: Provider, emit: Emit, review: Review | None = None
    ) -> bool:
        s = self.state
        if estimate < s.settings.threshold or (review is not None and review.skips("compact")):
            return False
        if s.breaker.open:
            if not s.breaker_noted:
                s.breaker_noted = True
                emit(
                    Notice(
                        f"automatic compaction skipped: the breaker opened after "
                        f"{s.breaker.failures} failed attempts; %compact still works",
                        "warning",
                    )
                )
            return False
        layer2.compact(s, provider, "auto", emit, review, before=estimate)
        return True

    def after_response(self, emit: Emit, review: Review | None = None) -> bool:
        return False

    def hands_off_due(self, estimate: int) -> bool:
        return False

    def recover(self, provider: Provider, emit: Emit, review: Review | None = None) -> bool:
        return layer2.recover(self.state, provider, emit, review)

    def surface(self, tools: ToolRegistry) -> ToolRegistry:
        return tools

    def restore(self, loaded: LoadResult) -> None:
        pass

    def declare(self, intent: Intent, emit: Emit) -> str:
        raise ToolError("new_context works only with --strategy rollover; keep working in this window")
