"""The hooks of one run, after openai-agents' ``RunHooksBase``: told when a model request
starts and ends, when a tool starts and ends, when a permission prompt goes out and is
answered, and of every other event the run reports.

A run's hooks exist before anything of the run is built, so whatever reports during the run
— the runner, the tools a plan made (``new_context``), the permission prompt — is handed
them at construction; nothing is patched in afterwards. ``RunHooks`` does nothing;
``RunEvents`` is the run's own: it turns each hook into the run's events for its listeners
(renderers, gauges, widgets), which only observe.
"""

from __future__ import annotations

from collections.abc import Iterable

from .context.estimate import estimate_request
from .events import (
    CompactStarted,
    Listener,
    Notice,
    PermissionAnswered,
    PermissionAsked,
    RolloverDeclared,
    RunEvent,
    ToolFinished,
    ToolStarted,
)
from .messages import ToolCall, ToolResult, Usage
from .providers.base import Request, Response


class RunHooks:
    """Every hook of a run; each does nothing unless a subclass says otherwise."""

    def on_event(self, event: RunEvent) -> None:
        """Any event of the run (notices, context states, deltas, the end)."""

    def on_llm_start(self, request: Request) -> None:
        """A model request is about to be sent."""

    def on_llm_end(self, request: Request, response: Response) -> None:
        """The model answered ``request``."""

    def on_tool_start(self, call: ToolCall) -> None:
        """A tool call is about to run (its permission not asked yet)."""

    def on_tool_end(self, call: ToolCall, result: ToolResult, seconds: float) -> None:
        """A tool call ended; ``seconds`` leaves out the time the person took to answer."""

    def on_permission(self, call: ToolCall, allowed: bool | None) -> None:
        """A permission prompt for ``call`` went out (``None``) or was answered."""


class RunEvents(RunHooks):
    """The run's hooks as events for its listeners; a listener that fails is detached."""

    def __init__(self, listeners: Iterable[Listener] = ()) -> None:
        self.listeners = list(listeners)
        self._last: tuple[Request, Usage] | None = None  # what a replace un-caches (issue 31)

    def on_event(self, event: RunEvent) -> None:
        if isinstance(event, (CompactStarted, RolloverDeclared)):
            self._say_cache_loss(event)
        # Listeners only observe: a broken display must not break the run (an interrupt,
        # though, is the user's and goes through).
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception as exc:  # noqa: BLE001 - any display bug: detached and said as a notice
                self.listeners.remove(listener)
                self.on_event(Notice(f"a display listener failed and was detached: {exc!r}", "warning"))

    def on_llm_end(self, request: Request, response: Response) -> None:
        self._last = (request, response.usage)

    def on_tool_start(self, call: ToolCall) -> None:
        self.on_event(ToolStarted(call))

    def on_tool_end(self, call: ToolCall, result: ToolResult, seconds: float) -> None:
        self.on_event(ToolFinished(call, result, seconds))

    def on_permission(self, call: ToolCall, allowed: bool | None) -> None:
        self.on_event(PermissionAsked(call) if allowed is None else PermissionAnswered(call, allowed))

    def _say_cache_loss(self, event: CompactStarted | RolloverDeclared) -> None:
        """issue 31: a replace makes the next request write the conversation to the prompt cache
        again; say how much of it was cached (the last request's prompt, as measured, less the
        system prompt and tools, which stay cached)."""
        if self._last is None:
            return  # no request of this run yet: what is cached is not known here
        request, usage = self._last
        cached = usage.prompt_total - estimate_request(request.system, [], request.tools)
        if cached > 0:
            what = "compaction" if isinstance(event, CompactStarted) else "handoff"
            self.on_event(
                Notice(
                    f"this {what} invalidates ~{cached:,} cached tokens of the prompt cache "
                    "(the system prompt and tools stay cached)"
                )
            )


__all__ = ["RunEvents", "RunHooks"]
