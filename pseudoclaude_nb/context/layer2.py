"""Layer 2 at run time: summarize the old history, keep the recent tail (``Summarize``).

The prompt and the cut are the pure functions of ``summarize``; this module asks
the provider (with retries that drop the oldest exchange when even the summary request is
too long), keeps the breaker, replaces the conversation (``compact``, through the one
replace step, ``SharedState.replaced``) and logs the ``compact`` entry. Any strategy's
``Summarize`` comes here: ``%compact`` works under rollover too. ``start`` (a strategy's
``Summarize(upto=...)``) puts the cut where the strategy said; ``instructions`` go into the
summarizing prompt.

A compaction is two steps: ``plan`` asks for the summary and writes nothing (what
``%compact --preview`` shows and keeps), ``commit`` replaces and logs it (``%compact
--apply`` commits a kept plan without asking the model again). ``compact`` is both at once,
with the person's say in between when the run carries a ``Review`` (``confirm``): approve
commits the plan, edit commits their text framed as the summary, reject replaces nothing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import ContextTooLong, ProviderError, SessionWriteError
from ..events import Compacted, CompactStarted
from ..messages import Message, Usage
from ..providers.base import Provider, Request
from ..session.entries import CompactEntry, NoteEntry, SpendEntry
from .breaker import MIN_FREED
from .confirm import Proposal, Review
from .estimate import estimate_request, estimate_tokens
from .layer1 import Emit, ignore
from .plan import Plan as Plan  # re-exported: the agent and %context name it layer2.Plan
from .summarize import (
    SUMMARY_SYSTEM,
    compacted,
    drop_oldest_exchange,
    freed_fraction,
    summary_messages,
    tail_start,
)

if TYPE_CHECKING:
    from .state import SharedState

SUMMARY_RETRIES = 3
MIN_SUMMARY_TOKENS = 64


def plan(
    state: SharedState, provider: Provider, start: int | None = None, instructions: str | None = None
) -> Plan:
    """Ask for the summary of the current conversation; replace and write nothing."""
    messages = state.conversation.messages()
    return _plan(state, provider, messages, state.estimate_of(messages), start, instructions)


def _plan(
    state: SharedState,
    provider: Provider,
    messages: list[Message],
    before: int,
    start: int | None = None,
    instructions: str | None = None,
) -> Plan:
    if start is None:
        start = tail_start(messages, state.settings.tail_tokens)
    head, tail = messages[:start], messages[start:]
    summary, error, spent = _summarize(state, provider, head, instructions)
    new = compacted(summary, tail) if summary is not None else None
    return planned(state, messages, start, before, summary, new, error, spent)


def planned(
    state: SharedState,
    messages: list[Message],
    start: int,
    before: int,
    summary: str | None,
    new: list[Message] | None,
    error: str | None,
    spent: tuple[tuple[str | None, Usage], ...],
) -> Plan:
    """The plan of replacing ``messages[:start]`` (``new`` holds what stands for them and the
    tail), unless it frees less than ``MIN_FREED``: any planner's (ours, or the provider's
    on-demand compaction: ``on_demand``)."""
    after = before
    if new is not None:
        after = state.estimate_of(new)
        freed = freed_fraction(before, after)
        if freed < MIN_FREED:
            error, new = f"it would free only {freed:.0%} of the context (needs {MIN_FREED:.0%})", None
            after = before
    head, tail = messages[:start], messages[start:]
    return Plan(
        messages,
        start,
        estimate_tokens(head),
        estimate_tokens(tail),
        before,
        after,
        summary,
        new,
        error,
        spent,
    )


def compact(
    state: SharedState,
    provider: Provider,
    trigger: str = "manual",
    emit: Emit = ignore,
    review: Review | None = None,
    before: int | None = None,
    *,
    start: int | None = None,
    instructions: str | None = None,
    strategy: str | None = None,
) -> Compacted:
    """One Layer 2 attempt (``trigger`` auto | manual | forced); ``ok`` False replaces nothing.

    With ``review``, a plan that would replace is put to the person first. ``before`` is the
    estimate that triggered it, when one did: the compaction line shows that very number.
    ``strategy``: whose action it is (the replace marker names it).
    """
    messages = state.conversation.messages()
    if before is None:
        before = state.estimate_of(messages)
    emit(CompactStarted(trigger, before))
    p = _plan(state, provider, messages, before, start, instructions)
    return settle(state, p, trigger, emit, review, strategy=strategy)


def settle(
    state: SharedState,
    p: Plan,
    trigger: str,
    emit: Emit,
    review: Review | None = None,
    *,
    strategy: str | None = None,
) -> Compacted:
    """A plan put to the person (with ``review``) and committed, edited or rejected as they say;
    any planner's (ours, or the provider's on-demand compaction: ``on_demand``). ``strategy``:
    whose action it is (the replace marker names it)."""
    if review is not None and p.new is not None and p.summary is not None:
        decision = review.decide(proposal(p, trigger), emit)
        if decision.action == "reject":
            return _rejected(state, p, trigger, emit, by_default=decision.by_default)
        if decision.action == "edit" and decision.text is not None:
            p = edited(state, p, decision.text)
    return commit(state, p, trigger, emit, strategy=strategy)


def proposal(p: Plan, trigger: str) -> Proposal:
    assert p.summary is not None
    return Proposal(
        "compact", trigger, p.summary, p.before, p.after, p.head, p.tail, p.head_tokens, p.tail_tokens
    )


def edited(state: SharedState, p: Plan, text: str) -> Plan:
    """``p`` with the person's ``text`` as its summary, framed like the model's (the log's
    writer redacts it like every line). The 5 % rule does not apply: the person chose it."""
    new = compacted(text, p.messages[p.head :])
    return replace(p, summary=text, new=new, after=state.estimate_of(new), error=None)


def _rejected(
    state: SharedState, p: Plan, trigger: str, emit: Emit, *, by_default: bool = False
) -> Compacted:
    """The person said no (or ``confirm_default`` did, nobody being there to answer): nothing
    replaced, the breaker untouched (a choice is not a failure), a note in the log so that a
    reader of the session sees why the context was not compacted."""
    why = "rejected by confirm_default (nobody could answer)" if by_default else "rejected by you"
    _spent(state, p)
    who = "PseudoClaude.confirm_default, nobody being there to answer" if by_default else "the person"
    state.record.record(
        NoteEntry.new(
            f"{trigger} compaction rejected by {who} (~{p.before:,} → ~{p.after:,} tokens proposed)", "info"
        )
    )
    result = Compacted(trigger, p.before, p.before, False, why)
    state.last_compact = result
    emit(result)
    return result


def commit(
    state: SharedState, p: Plan, trigger: str = "manual", emit: Emit = ignore, *, strategy: str | None = None
) -> Compacted:
    """Replace the conversation by ``p.new`` (when it has one), log the attempt, keep the breaker."""
    if p.new is not None:

        def failed(why: str) -> Exception:
            return _unwritten(state, why, Compacted(trigger, p.before, p.before, False, why), emit)

        state.replaced("compact", p.messages, p.new, failed=failed, strategy=strategy)
        state.compactions += 1
        state.summary_id = p.new[0].id if p.new else None
    state.preview = None  # made from a conversation that is gone, or spent
    _spent(state, p)
    result = Compacted(trigger, p.before, p.after, p.new is not None, p.error)
    state.breaker.record(result.ok, trigger)
    state.record.record(
        CompactEntry.new(
            trigger=trigger, before_tokens=p.before, after_tokens=p.after, ok=result.ok, error=p.error
        )
    )
    state.last_compact = result
    emit(result)
    return result


def _spent(state: SharedState, p: Plan) -> None:
    """What the plan's summary requests used, into the log and this run's spend (issue 31: a
    run's cost counts its summaries). Once: when the plan is committed or rejected; a preview
    never applied writes nothing, as a preview must."""
    for model, usage in p.spent:
        state.record.record(SpendEntry.new(usage, purpose="summary", model=model))
        state.side_spend.add(usage, model)


def _unwritten(state: SharedState, reason: str, attempt: Compacted, emit: Emit) -> SessionWriteError:
    """The log could not take the compaction (a full disk): nothing of it happened.

    Memory is back at the old messages (``replace_or_keep``), which the anchor and the
    calibration still describe. A disk failure is not a failed summary: the breaker does
    not count it and no ``compact`` entry is logged (a restore would count one). The
    ``SessionWriteError`` to raise, which stops a run.
    """
    state.last_compact = attempt
    emit(attempt)
    return SessionWriteError(
        f"the compaction was not applied: {reason}. The conversation is as it was (not compacted) "
        "and the log is resynced to it on its next write; free disk space, then run %agent again "
        "(or %compact) to compact."
    )


def _summarize(
    state: SharedState, provider: Provider, head: list[Message], instructions: str | None = None
) -> tuple[str | None, str | None, tuple[tuple[str | None, Usage], ...]]:
    """The summary of ``head`` (or None and why not), with what each summary request used."""
    if not head:
        return None, "nothing old enough to summarize: the recent tail is the whole conversation", ()
    spent: list[tuple[str | None, Usage]] = []
    system = SUMMARY_SYSTEM if not instructions else f"{SUMMARY_SYSTEM}\n\n{instructions.strip()}"
    for _ in range(1 + SUMMARY_RETRIES):
        messages = summary_messages(head)
        request = Request(
            system=system,
            messages=messages,
            max_tokens=_summary_cap(state, messages),
            purpose="summary",
        )
        try:
            response = provider.complete(request)
        except ContextTooLong:
            head = drop_oldest_exchange(head)
            if not head:
                return None, "the summary request is too long even without the older history", tuple(spent)
            continue
        except ProviderError as exc:
            return None, f"the summary request failed: {exc}", tuple(spent)
        spent.append((provider.model, response.usage))
        return (*_judged(response.text, response.stop_reason, request.max_tokens, head), tuple(spent))
    return None, f"the summary request was still too long after {SUMMARY_RETRIES} retries", tuple(spent)


def _judged(text: str, stop: str | None, cap: int, head: list[Message]) -> tuple[str | None, str | None]:
    """The summary, or why it is junk (issue 32: a small model's summary, cut by the cap,
    echoed the instructions and replaced the history). The breaker counts a rejection."""
    if not text.strip():
        return None, "the model returned an empty summary"
    if stop == "max_tokens":
        return None, f"the summary was cut by the output cap ({cap:,} tokens) before it ended"
    size, replaced = estimate_tokens([Message(role="assistant", content=text)]), estimate_tokens(head)
    if size >= replaced:
        return None, f"the summary (~{size:,} tokens) is not shorter than what it replaces (~{replaced:,})"
    return text, None


def _summary_cap(state: SharedState, messages: list[Message]) -> int:
    """The summary's output cap: the summary reserve, at most what the window leaves.

    A request that leaves (by the estimate) less than ``MIN_SUMMARY_TOKENS`` asks for the
    whole reserve: a server that counts it too long says so, and the oldest exchange goes.
    """
    reserve = state.settings.summary_reserve
    room = state.settings.context_window - estimate_request(SUMMARY_SYSTEM, messages, [])
    return min(reserve, room) if room >= MIN_SUMMARY_TOKENS else reserve
