"""The host applies a strategy's action: every mechanism with a side effect lives here or below.

``apply`` takes one action, answered for one ``Ask`` (the view it was decided on, why the
host asked, the provider and the run's ``emit`` and ``review``), and returns what happened:
``None`` when nothing changed, else the event of the change (``Compacted``,
``RolloverCommitted``, ``Dropped``, …). The rules a strategy does not have to know:

- a tool call and its results stay together: a ``Drop`` or ``Spill`` that names one half
  applies to the whole pair, and says so; an id the conversation does not hold refuses the
  whole action, and says so (nothing half-applied);
- every change of the conversation is one replace (``SharedState.replaced``: one write, one
  fsync) whose marker names the strategy;
- the breaker, the person's review (``confirm_compaction``, a paused server compaction
  included), and a hand-off in a window with no work to hand over are the host's calls;
- a ``Summarize(native=True)`` goes to the provider's on-demand compaction when the provider
  has one (``on_demand``), to our summary otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import SessionError, SessionWriteError, StrategyError
from ..events import Compacted, Dropped, Notice, RolloverCommitted
from ..messages import Message
from ..providers.base import Provider
from ..strategies import (
    Action,
    Drop,
    Handoff,
    Keep,
    Note,
    Restrict,
    ServerCompacted,
    Spill,
    Strategy,
    Summarize,
    Trigger,
    View,
)
from . import layer2, on_demand, provider_compaction, rollover
from .confirm import Proposal, Review
from .estimate import estimate_tokens
from .layer1 import Emit, Spiller
from .plan import DropPlan, Plan
from .state import SharedState

# Which Layer 2 trigger a question's answer is (the compact entry and the event say it).
SUMMARY_TRIGGER: dict[str, str] = {
    "before": "auto",
    "answer": "auto",
    "too_long": "forced",
    "manual": "manual",
}


@dataclass(frozen=True)
class Ask:
    """One question to the strategy and what applying its answer needs."""

    state: SharedState
    spiller: Spiller
    strategy: Strategy
    view: View
    provider: Provider | None
    emit: Emit
    review: Review | None = None

    @property
    def trigger(self) -> Trigger:
        return self.view.trigger

    def refuse(self, text: str) -> None:
        self.emit(Notice(f"strategy {self.strategy.name}: {text}", "warning"))


def apply(ask: Ask, action: Action) -> object | None:
    """Apply ``action``; the event of the change, or None when nothing changed."""
    match action:
        case Keep():
            return None
        case Summarize():
            return _summarize(ask, action)
        case Drop():
            plan = drop_plan(ask, action)
            return None if plan is None else commit_drop(ask.state, plan, ask.emit, ask.review, ask.trigger)
        case Spill():
            return _spill(ask, action)
        case Handoff():
            return _handoff(ask, action)
        case Note():
            _note(ask, action.text, action.kind)
            return _announced(ask, action, Notice(action.text))
        case Restrict():
            ask.state.restricted = tuple(action.tools)
            _note(ask, action.note, action.kind)
            return _announced(ask, action, Notice(action.note))
        case ServerCompacted():
            return _server(ask, action)
    raise StrategyError(
        f"strategy {ask.strategy.name} answered {action!r}, which is not an action: return one of "
        "Keep(), Summarize(...), Drop(ids), Spill(ids), Handoff(...), Note(text), Restrict(tools, note)"
    )


# --- each action --------------------------------------------------------------------------------


def _summarize(ask: Ask, action: Summarize) -> Compacted | None:
    s, trigger = ask.state, SUMMARY_TRIGGER.get(ask.trigger, "auto")
    if ask.provider is None:
        raise StrategyError("a summary needs a provider")
    if trigger != "manual" and ask.review is not None and ask.review.skips("compact"):
        return None
    if trigger == "auto" and s.breaker.open:
        if not s.breaker_noted:
            s.breaker_noted = True
            ask.emit(
                Notice(
                    f"automatic compaction skipped: the breaker opened after "
                    f"{s.breaker.failures} failed attempts; %compact still works",
                    "warning",
                )
            )
        return None
    start = None
    if action.upto is not None:
        messages = s.conversation.messages()
        start = _index(messages, action.upto)
        if start is None:
            ask.refuse(
                f"Summarize(upto={action.upto!r}) names no message of the conversation; nothing was summarized"
            )
            return None
        while start > 0 and messages[start].tool_result is not None:
            start -= 1  # the kept part never starts inside a tool exchange
    review = None if trigger == "manual" else ask.review
    before = ask.view.estimate if trigger == "auto" else None
    if action.native and on_demand.supported(ask.provider):
        return on_demand.compact(
            s, ask.provider, trigger, ask.emit, review, before, start=start, strategy=ask.strategy.name
        )
    return layer2.compact(
        s,
        ask.provider,
        trigger,
        ask.emit,
        review,
        before=before,
        start=start,
        instructions=action.instructions,
        strategy=ask.strategy.name,
    )


def summary_plan(state: SharedState, provider: Provider, action: Summarize, strategy: str) -> Plan:
    """What ``action`` would replace, its summary asked for (the provider's own with ``native``,
    where it has one) and nothing written: ``%compact --preview``."""
    start = None
    if action.upto is not None:
        start = _index(state.conversation.messages(), action.upto)
        if start is None:
            raise SessionError(f"strategy {strategy}: Summarize(upto={action.upto!r}) names no message")
    if action.native and on_demand.supported(provider):
        return on_demand.plan(state, provider, start=start)
    return layer2.plan(state, provider, start, action.instructions)


def drop_plan(ask: Ask, action: Drop) -> DropPlan | None:
    """What ``action`` would take out, pairs made whole; None (said) when it names an unknown id."""
    s = ask.state
    messages = s.conversation.messages()
    chosen, widened, unknown = whole_pairs(messages, set(action.ids))
    if unknown:
        ask.refuse(f"Drop names {_listed(unknown)}, not in the conversation; nothing was dropped")
        return None
    if not chosen:
        return None
    if widened:
        ask.emit(
            Notice(
                f"strategy {ask.strategy.name}: Drop named one half of a tool call and its results; "
                f"{_count(len(widened), 'message')} more go with it (a call and its results stay together)"
            )
        )
    new = [m for m in messages if m.id not in chosen]
    before = s.estimate()
    after = s.calibrated(s.estimate_of(new))
    order = [m.id for m in messages if m.id in chosen]
    return DropPlan(
        messages, ask.strategy.name, tuple(order), tuple(i for i in order if i in widened), before, after, new
    )


def commit_drop(
    state: SharedState, plan: DropPlan, emit: Emit, review: Review | None = None, trigger: str = "manual"
) -> Dropped | None:
    """Take the plan's messages out: one replace (reason ``drop``) naming the strategy."""
    if review is not None and trigger != "manual":
        if review.skips("drop"):
            return None
        gone = [m for m in plan.messages if m.id in set(plan.dropped)]
        listing = "\n".join(f"{m.role}: {_gist(m)}" for m in gone)
        decision = review.decide(
            Proposal(
                "drop",
                trigger,
                listing,
                plan.before,
                plan.after,
                len(gone),
                len(plan.new),
                estimate_tokens(gone),
                estimate_tokens(plan.new),
            ),
            emit,
        )
        if decision.action == "reject":
            return None

    def failed(why: str) -> Exception:
        return SessionWriteError(
            f"the drop of strategy {plan.strategy} was not applied: {why}. The conversation is as it "
            "was; free disk space, then run %agent again"
        )

    after = state.replaced("drop", plan.messages, plan.new, failed=failed, strategy=plan.strategy)
    event = Dropped(plan.strategy, len(plan.dropped), plan.before, after, len(plan.widened))
    emit(event)
    return event


def _spill(ask: Ask, action: Spill) -> int | None:
    s = ask.state
    messages = s.conversation.messages()
    chosen, widened, unknown = whole_pairs(messages, set(action.ids))
    if unknown:
        ask.refuse(f"Spill names {_listed(unknown)}, not in the conversation; nothing was spilled")
        return None
    results = {m.id for m in messages if m.id in chosen and m.tool_result is not None}
    if widened and results:
        ask.emit(Notice(f"strategy {ask.strategy.name}: Spill named tool calls; their results are spilled"))
    if s.session_dir is None:
        ask.refuse("Spill needs a session to keep the files in; nothing was spilled")
        return None
    spilled = ask.spiller.spill_results(results, ask.strategy.name, ask.emit)
    return spilled or None


def _handoff(ask: Ask, action: Handoff) -> RolloverCommitted | None:
    s = ask.state
    if not rollover.has_work(s):
        if ask.trigger != "too_long":
            # Over the limit before any answer in this window (a huge prompt): there is nothing
            # to hand over, and a new window would hold the same prompt.
            ask.emit(
                Notice("the context is over its limit but this window holds no work to hand over", "warning")
            )
        return None
    if ask.review is not None and ask.review.skips("rollover"):
        return None  # the person rejected it in this run; the next run asks again
    return rollover.commit(s, ask.emit, ask.review, note=action.note, strategy=ask.strategy.name)


def _note(ask: Ask, text: str, kind: str | None) -> None:
    # A user-side message, appended (never edited in): it is logged like any message, keeps
    # the cached prefix intact, and its ``host`` field is how a resume knows it was said.
    host = kind or "note"
    ask.state.conversation.append(Message(role="user", content=text, host=host))
    ask.state.notes.add(host)


def _announced(ask: Ask, action: Action, notice: Notice) -> Notice:
    said = Notice(notice.text.removeprefix("[host note] "), "warning")
    ask.emit(said)
    for event in ask.strategy.events(action, ask.view):
        ask.emit(event)
    return said


def _server(ask: Ask, action: ServerCompacted) -> Compacted | Notice | None:
    s = ask.state
    messages = s.conversation.messages()
    at = _index(messages, action.at)
    if at is None:
        ask.refuse(f"ServerCompacted names {action.at!r}, not in the conversation; nothing was replaced")
        return None
    last = at == len(messages) - 1 and at > 0
    if ask.review is not None and ask.trigger == "answer" and last and on_demand.paused(messages[at]):
        # The provider paused after its compaction, as asked when the person confirms them.
        return provider_compaction.adopt_paused(s, ask.review, ask.emit, strategy=ask.strategy.name)
    if not provider_compaction.adopt(s, at, ask.emit, strategy=ask.strategy.name):
        return None
    return s.last_compact


# --- pairs ------------------------------------------------------------------------------------------


def whole_pairs(messages: list[Message], ids: set[str]) -> tuple[set[str], set[str], list[str]]:
    """``ids`` with the other half of every tool call/result pair they touch: (all of them, those
    added, the ids no message has). An answer's calls go with all their results, and a result
    with the answer that called and that answer's other results."""
    known = {m.id for m in messages}
    unknown = sorted(ids - known)
    caller = {c.id: m.id for m in messages for c in m.tool_calls}
    results: dict[str, list[str]] = {}
    for m in messages:
        if m.tool_result is not None and m.tool_result.call_id in caller:
            results.setdefault(caller[m.tool_result.call_id], []).append(m.id)
    chosen = ids & known
    answers = {mid for mid in chosen if mid in results}
    answers |= {
        caller[m.tool_result.call_id]
        for m in messages
        if m.id in chosen and m.tool_result is not None and m.tool_result.call_id in caller
    }
    whole = chosen | answers | {r for a in answers for r in results.get(a, ())}
    return whole, whole - chosen, unknown


def _index(messages: list[Message], mid: str) -> int | None:
    return next((i for i, m in enumerate(messages) if m.id == mid), None)


def _listed(ids: list[str]) -> str:
    shown = ", ".join(repr(i) for i in ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
    return f"{_count(len(ids), 'id')} ({shown})"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _gist(m: Message) -> str:
    if m.tool_result is not None:
        return f"result of {m.tool_result.call_id} ({len(m.tool_result.content):,} chars)"
    if m.tool_calls:
        return "calls " + ", ".join(c.name for c in m.tool_calls)
    text = " ".join(m.content.split())
    return text[:80] + ("…" if len(text) > 80 else "")


def shrank(result: object | None) -> bool:
    """Whether an answer to ``too_long`` made the request smaller (a failed summary did not)."""
    if isinstance(result, Compacted):
        return result.ok
    return result is not None and not isinstance(result, Notice)  # a note shrinks nothing
