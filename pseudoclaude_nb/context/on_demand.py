"""The provider's own compaction when asked, as a Layer 2 plan (issue 43, ``--strategy api``).

A strategy's ``Summarize(native=True)`` (``--strategy api``'s answer to ``%compact``, and at
the line in a window the provider no longer compacts on its own) has a provider that compacts
on demand (``CompactsOnDemand``: Anthropic's ``compaction: {"type": "summarize"}``, OpenAI's
``/responses/compact``) write the summary instead of our summarizer. The cut is Layer 2's (the
recent tail kept word for word, never inside a tool exchange: the documentation's "compaction
that keeps recent turns"); the provider gets the older messages and returns what stands for
them — its block or item, verbatim, which goes back first — and the plan is the same ``Plan``
Layer 2 makes, so ``%compact --preview`` shows it and writes nothing, ``--apply`` commits it
without asking again, ``%compact --undo`` takes it back, and a run commits it (trigger
``auto``) where the provider cannot compact at its threshold on its own. The protocol is the
provider's; this module only plans and commits.

It also puts a paused server compaction (Anthropic's ``pause_after_compaction``) to the
person's ``Review`` (``review_pause``, for ``provider_compaction.adopt_paused``): approve keeps
the provider's block, edit puts their text in its place (framed as Layer 2 frames a summary),
reject drops the block and the run goes on without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from ..errors import ProviderError
from ..events import Compacted, CompactStarted
from ..messages import Message, Usage
from ..providers.base import CompactsOnDemand, Provider, Request
from ..session.entries import NoteEntry
from . import layer2
from .confirm import Proposal, Review
from .estimate import estimate_tokens
from .layer1 import Emit, ignore
from .summarize import compacted, tail_start

if TYPE_CHECKING:
    from .state import SharedState

COMPACTION = "compaction"
# The compaction request's output room: the block is a summary, never a long answer.
SUMMARY_TOKENS = 16_000


def supported(provider: Provider) -> bool:
    return isinstance(provider, CompactsOnDemand)


def plan(
    state: SharedState, provider: Provider, before: int | None = None, start: int | None = None
) -> layer2.Plan:
    """Ask the provider to compact the conversation but its recent tail; replace and write nothing.
    ``before``: the estimate that triggered it, when one did (else a fresh one, as Layer 2's);
    ``start``: where the kept part begins (a strategy's ``Summarize(upto=...)``; else Layer 2's cut)."""
    assert isinstance(provider, CompactsOnDemand)
    messages = state.conversation.messages()
    before = state.estimate_of(messages) if before is None else before
    if start is None:
        start = tail_start(messages, state.settings.tail_tokens)
    head, tail = messages[:start], messages[start:]
    summary, new, error = "", None, None
    spent: tuple[tuple[str | None, Usage], ...] = ()
    if not head:
        error = "nothing old enough to compact: the recent tail is the whole conversation"
    else:
        request = Request(
            system=state.system,
            messages=head,
            tools=state.tools,
            max_tokens=min(SUMMARY_TOKENS, state.settings.summary_reserve),
            purpose="summary",
        )
        try:
            result = provider.compact_on_demand(request)
        except ProviderError as exc:
            error = f"the provider's compaction request failed: {exc}"
        else:
            spent = ((provider.model, result.usage),)
            summary, error = result.summary, result.error
            new = [*result.messages, *tail] if result.messages and error is None else None
    return layer2.planned(state, messages, start, before, summary or None, new, error, spent)


def compact(
    state: SharedState,
    provider: Provider,
    trigger: str = "manual",
    emit: Emit = ignore,
    review: Review | None = None,
    before: int | None = None,
    *,
    start: int | None = None,
    strategy: str | None = None,
) -> Compacted:
    """One on-demand compaction, committed (``%compact``, or ``auto`` at the strategy's line);
    ``strategy``: whose action it is (the replace marker names it)."""
    emit(CompactStarted(trigger, state.estimate() if before is None else before))
    p = plan(state, provider, before, start)
    return layer2.settle(state, p, trigger, emit, review, strategy=strategy)


Verdict = Literal["approve", "edit", "reject"]


def paused(message: Message) -> bool:
    """An answer that is only the provider's compaction (``stop_reason`` ``compaction``: the
    provider paused after it, as asked when the person confirms compactions)."""
    return (
        not message.content.strip()
        and not message.tool_calls
        and any(r.kind == COMPACTION for r in message.reasoning)
    )


def review_pause(
    state: SharedState, messages: list[Message], review: Review, emit: Emit
) -> tuple[Verdict, list[Message] | None]:
    """The person's say over a paused server compaction: (verdict, the conversation to put in
    its place — None to keep the provider's block as it came)."""
    last = messages[-1]
    block = next(r for r in last.reasoning if r.kind == COMPACTION)
    text = _summary_of(block.data)
    before = state.estimate_of(messages)
    proposal = Proposal(
        "compact", "server", text, before, state.estimate_of([last]), len(messages) - 1, 0,
        estimate_tokens(messages[:-1]), 0,
    )  # fmt: skip
    decision = review.decide(proposal, emit)
    if decision.action == "reject":
        state.record.record(
            NoteEntry.new(
                f"server compaction rejected {decision.who}: its block was dropped and the run goes on "
                "without it (the provider compacts no more in this run)",
                "info",
            )
        )
        return "reject", messages[:-1]
    if decision.action == "edit" and decision.text is not None:
        return "edit", compacted(decision.text, [])
    return "approve", None


def _summary_of(data: str | None) -> str:
    import orjson

    try:
        block = orjson.loads(data or "{}")
    except orjson.JSONDecodeError:
        block = {}
    content = block.get("content") if isinstance(block, dict) else None
    return (
        content if isinstance(content, str) and content.strip() else "(the provider's compaction is opaque)"
    )
