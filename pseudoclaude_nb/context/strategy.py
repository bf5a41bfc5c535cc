"""The seam between a session's context and the way it is kept under the window.

A strategy is composed over the session's ``SharedState`` (it holds a reference; it owns
only what is its own, such as rollover's claimed reminder) and is asked at fixed points of
a run. Events and the provider come with each call, so whoever asks hears the answer.
Switching strategy builds another object over the same state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from ..providers.base import Provider
from ..session.loader import LoadResult
from .handoff import Intent
from .layer1 import Emit

if TYPE_CHECKING:
    from ..tools import ToolRegistry
    from .confirm import Review
    from .settings import CompactSettings

Marks = tuple[tuple[str, int], ...]


class ContextStrategy(Protocol):
    name: str

    def marks(self) -> Marks:
        """(label, tokens) lines for gauges and ``%context``: where this strategy acts."""
        ...

    def threshold(self) -> int:
        """The estimate at which the host starts to act."""
        ...

    def phase(self) -> str:
        """Where this strategy stands in the current window (``normal`` when it has no phases)."""
        ...

    def before_request(
        self, estimate: int, provider: Provider, emit: Emit, review: Review | None = None
    ) -> bool:
        """The pre-step boundary, at ``estimate`` tokens; True when it acted (replace or note).

        ``review`` (this run's, when ``confirm_compaction`` is on) is asked before a replace."""
        ...

    def recover(self, provider: Provider, emit: Emit, review: Review | None = None) -> bool:
        """The provider said the prompt is too long: shrink once; True when that worked."""
        ...

    def surface(self, tools: ToolRegistry) -> ToolRegistry:
        """The tools the next request offers."""
        ...

    def restore(self, loaded: LoadResult) -> None:
        """What is the strategy's own, from a log (the shared state is restored already)."""
        ...

    def declare(self, intent: Intent, emit: Emit) -> str:
        """``new_context``'s handler."""
        ...


def marks_for(name: str, settings: CompactSettings) -> Marks:
    """The marks of strategy ``name`` under ``settings``, without a session."""
    if name == "rollover":
        return tuple(settings.rollover_limits.items())
    return (("Layer 2", settings.threshold),)


def threshold_for(name: str, settings: CompactSettings) -> int:
    return settings.rollover_limits["base"] if name == "rollover" else settings.threshold


__all__ = ["ContextStrategy", "Marks", "marks_for", "threshold_for"]
