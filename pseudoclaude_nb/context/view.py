"""What the host shows a strategy: a read-only ``View`` of one session's context.

Built from the host's state for each question (``view``); nothing in it reaches back. The
figures are the host's own (the estimate, the breaker, the counters); the messages are built
only when a strategy reads them (``strategies.Messages``), so the per-step cost of asking a
strategy that does not read them stays flat however long the conversation is.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from ..messages import Message
from ..strategies import Kind, Limits, Messages, MessageView, Trigger, View
from .estimate import estimate_tokens

if TYPE_CHECKING:
    from .settings import CompactSettings
    from .state import SharedState


@lru_cache(maxsize=64)
def limits_of(settings: CompactSettings) -> Limits:
    """The lines of ``settings``' window (a frozen value: computed once per settings)."""
    lines = settings.rollover_limits
    return Limits(settings.context_window, settings.threshold, lines["remind"], lines["base"], lines["hard"])


def view(
    state: SharedState,
    trigger: Trigger,
    estimate: int,
    *,
    pins: tuple[str, ...] = (),
    server_compaction: str | None = None,
    server_compacts: bool = False,
    settings: CompactSettings | None = None,
) -> View:
    """The view of ``state`` for ``trigger`` (``settings``: a plan's, instead of the state's)."""
    s = state
    settings = settings or s.settings
    limits = limits_of(settings)
    if s.handoff is not None:
        from .handoff import render_handoff  # a declared hand-off only (rollover's models)
    return View(
        trigger,
        limits.window,
        estimate,
        limits.threshold,
        limits,
        pins,
        render_handoff(s.handoff.handoff) if s.handoff is not None else None,
        frozenset(s.notes),
        server_compaction,
        server_compacts,
        s.compactions,
        s.rollovers,
        s.breaker.open,
        Messages(len(s.conversation), _Reader(s).build),
    )


class _Reader:
    """Builds the ``i``-th message's view; the conversation is read once, on the first build."""

    __slots__ = ("_read", "state")  # one per view: as light as it can be

    def __init__(self, state: SharedState) -> None:
        self.state = state
        self._read: tuple[list[Message], list[int], dict[str, str]] | None = None

    def build(self, i: int) -> MessageView:
        s = self.state
        if self._read is None:
            messages = s.conversation.messages()
            answers, steps = 0, []
            for m in messages:
                steps.append(1 + answers)
                answers += m.role == "assistant"
            self._read = messages, steps, {c.id: c.name for m in messages for c in m.tool_calls}
        messages, steps, tools = self._read
        m = messages[i]
        result = m.tool_result
        return MessageView(
            id=m.id,
            role=m.role,
            kind=kind_of(m, summary=m.id == s.summary_id),
            tokens=s.calibrated(estimate_tokens([m], digits=s.digits)),
            step=steps[i],
            spilled=m.is_spill_preview,
            tools=tuple(c.name for c in m.tool_calls) if result is None else (tools.get(result.call_id, ""),),
            call_ids=tuple(c.id for c in m.tool_calls) if result is None else (result.call_id,),
        )


# The kind of a provider's compaction block (``provider_compaction.COMPACTION``, a value of the
# log's ``ReasoningKind``): named here so a view imports no strategy's mechanism.
_COMPACTION = "compaction"


def kind_of(m: Message, *, summary: bool = False) -> Kind:
    """What a message is. A summary is recognised by structured facts, never by its text: the
    provider's compaction block on an answer, or the message a compaction or hand-off began
    its window with (``summary``: the host's ``summary_id``)."""
    if m.tool_result is not None:
        return "tool_result"
    if summary or any(r.kind == _COMPACTION for r in m.reasoning):
        return "summary"
    if m.host is not None:
        return "note"
    return "tool_call" if m.tool_calls else "text"
