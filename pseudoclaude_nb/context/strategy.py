"""The seam between a session's context and the way it is kept under the window.

A strategy is composed over the session's ``SharedState`` (it holds a reference; it owns
only what is its own, such as rollover's claimed reminder) and is asked at fixed points of
a run. Events and the provider come with each call, so whoever asks hears the answer.
Switching strategy builds another object over the same state.

Each strategy owns what it adds to a request — its system sections (``sections``) and its
tools (``tools``) — and what ``%context`` shows of it (``marks``, ``describe``), so nothing
outside the registry (``manager.STRATEGIES``) tells strategies apart by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..providers.base import Provider
from ..session.loader import LoadResult
from .handoff import Intent
from .layer1 import Emit

if TYPE_CHECKING:
    from ..history import HistoryIndex
    from ..tools import ToolRegistry
    from ..tools.registry import Tool
    from .confirm import Review
    from .state import SharedState

Marks = tuple[tuple[str, int], ...]


class ContextStrategy(Protocol):
    name: str
    state: SharedState  # the session's (a strategy is built over it: ``manager.STRATEGIES``)

    def marks(self) -> Marks:
        """(label, tokens) lines for gauges and ``%context``: where this strategy acts."""
        ...

    def threshold(self) -> int:
        """The estimate at which the host starts to act."""
        ...

    def phase(self) -> str:
        """Where this strategy stands in the current window (``normal`` when it has no phases)."""
        ...

    def sections(self) -> list[tuple[str, str]]:
        """The (title, text) system sections this strategy adds to every request."""
        ...

    def tools(self, history: HistoryIndex, emit: Emit) -> list[Tool]:
        """The tools this strategy adds to a run; ``emit`` is the run's (their events reach it)."""
        ...

    def describe(self) -> dict[str, Any]:
        """What ``%context`` shows of this strategy beyond its marks (its own counters)."""
        ...

    def before_request(
        self, estimate: int, provider: Provider, emit: Emit, review: Review | None = None
    ) -> bool:
        """The pre-step boundary, at ``estimate`` tokens; True when it acted (replace or note).

        ``review`` (this run's, when ``confirm_compaction`` is on) is asked before a replace."""
        ...

    def after_response(self, emit: Emit, review: Review | None = None) -> bool:
        """An answer is in and logged: act on it where the strategy reads answers (``api``: the
        provider compacted, so the conversation is replaced, once ``review`` — this run's, when
        the person confirms compactions — approved it); True when it acted."""
        ...

    def hands_off_due(self, estimate: int) -> bool:
        """Whether a cut answer at ``estimate`` goes on to a hand-off instead of ending the run
        (rollover past its base mark, issue 32)."""
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


__all__ = ["ContextStrategy", "Marks"]
