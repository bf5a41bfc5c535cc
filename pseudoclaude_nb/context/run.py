"""What a ``Runner`` asks of a session's context: one facade, the same with or without a session.

The runner talks to its context at four points — before a step, on an answer, when the
provider says the prompt is too long, on a tool result — and reads the window it works in.
``ContextHost`` is the facade of a session; ``NO_CONTEXT`` the one of a runner without one
(a plain library use, a test): it keeps nothing and changes nothing, so the runner never
asks whether it has a context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..cost import Spend
from ..messages import ToolCall, ToolResult, Usage
from .layer1 import Emit

if TYPE_CHECKING:
    from ..providers.base import Provider
    from ..tools import ToolRegistry
    from .confirm import Review


class RunContext(Protocol):
    @property
    def window(self) -> int | None:
        """The context window the run works in; None: no context keeps it."""
        ...

    @property
    def offers_handoff(self) -> bool:
        """Whether the run already offers the model a hand-off (``new_context``)."""
        ...

    @property
    def key(self) -> str:
        """The setting the current strategy came from ('' without a context): a provider's
        stored state follows it (``Request.thread``: a switch starts a new chain)."""
        ...

    def estimate(self) -> int: ...

    def before_step(self, provider: Provider, emit: Emit, review: Review | None = None) -> None: ...

    def surface(self, tools: ToolRegistry) -> ToolRegistry: ...

    def on_too_long(self, provider: Provider, emit: Emit, review: Review | None = None) -> bool: ...

    def on_usage(self, usage: Usage, length: int, sent: list[dict[str, Any]] | None, emit: Emit) -> None: ...

    def after_answer(self, provider: Provider, emit: Emit, review: Review | None = None) -> None: ...

    def hands_off_due(self) -> bool: ...

    def admit(self, call: ToolCall, result: ToolResult, emit: Emit) -> ToolResult: ...

    def after_tools(self, count: int) -> None: ...

    def run_spend(self) -> Spend: ...


class _NoContext:
    """No session's context: every request goes as it is, nothing is kept."""

    @property
    def window(self) -> int | None:
        return None

    @property
    def offers_handoff(self) -> bool:
        return False

    @property
    def key(self) -> str:
        return ""

    def estimate(self) -> int:
        return 0

    def before_step(self, provider: Provider, emit: Emit, review: Review | None = None) -> None:
        """Nothing to keep under a window."""

    def surface(self, tools: ToolRegistry) -> ToolRegistry:
        return tools

    def on_too_long(self, provider: Provider, emit: Emit, review: Review | None = None) -> bool:
        return False

    def on_usage(self, usage: Usage, length: int, sent: list[dict[str, Any]] | None, emit: Emit) -> None:
        """No anchor to keep."""

    def after_answer(self, provider: Provider, emit: Emit, review: Review | None = None) -> None:
        """Nothing to follow."""

    def hands_off_due(self) -> bool:
        return False

    def admit(self, call: ToolCall, result: ToolResult, emit: Emit) -> ToolResult:
        return result

    def after_tools(self, count: int) -> None:
        """No batch to check."""

    def run_spend(self) -> Spend:
        return Spend()


NO_CONTEXT: RunContext = _NoContext()

__all__ = ["NO_CONTEXT", "RunContext"]
