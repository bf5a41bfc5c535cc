"""The provider's own compaction at run time (issue 31): what a strategy with ``server_context``
asks of the provider, and the host's side of ``ServerCompacted``.

Before each agent request the host asks the provider (``ManagesContext``) for server-side
compaction at the Layer 2 line (``server_context``: all three built-ins act at the same
estimate) and, when ``api_clear_tool_results`` is set, for the clearing of old tool results.
The host summarizes nothing.

What comes back: a reply whose first block is a ``compaction`` block (kept on the answer as a
``Reasoning(kind="compaction")``, verbatim) says the provider summarized everything before
it, and drops that from every later request. ``View.server_compaction`` names that answer
(right after it, or at the next request for a log that ended between the two); a strategy's
``ServerCompacted`` makes the conversation say so (``adopt``): it is replaced by the messages
from that answer on — a ``compact`` replace with a ``compact`` entry (trigger ``server``),
exactly like Layer 2's — so resume, ``%context``, ``--at``, the gauge, the timeline and
``%compact --undo`` see it.

An undo restores the messages before it; the undone compaction block is dropped from the
answer that carried it (``undone``), or the provider would drop them again at once.

Issue 43 (the protocol is the providers', the planning ``on_demand``'s): with the person
confirming compactions the provider pauses after its own (``server_context(settings, review)``)
and ``adopt_paused`` puts it to them before the conversation follows it; a history that starts
with an on-demand block (``holds_on_demand``, which Anthropic takes with no compaction edit
beside it) is one the provider no longer compacts at the line (``View.server_compacts``). A
block the provider refused past ``provider_blocks``' bounds (issue 41) is said once the answer
it came with is in the log (``refusal``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ConfigError, ProviderError, SessionWriteError
from ..events import Compacted, Notice
from ..messages import ORIGIN_ON_DEMAND, Message
from ..providers.base import Provider, RefusesBlocks, ServerContext
from ..session.entries import CompactEntry
from . import on_demand
from .layer1 import Emit

if TYPE_CHECKING:
    from .confirm import Review
    from .settings import CompactSettings
    from .state import SharedState

COMPACTION = "compaction"
TRIGGER = "server"  # the compact entry's and the event's trigger: the provider compacted


def unsupported(provider_name: str, strategy: str = "api") -> ConfigError:
    """A strategy with ``server_context`` (``--strategy api``) with a provider that cannot
    manage the context: what to use instead."""
    why = {
        "openai": "this OpenAI-compatible endpoint is spoken to through chat completions, which have no "
        "server-side compaction (the Responses API has: %config PseudoClaude.openai_api = 'responses', "
        "the default for api.openai.com)",
        "offline": "the offline explainer asks no model at all",
    }.get(provider_name, f"the {provider_name} provider has no context management of its own")
    return ConfigError(
        f"--strategy {strategy} asks the provider to manage the context itself, and {why}. Use "
        "--provider anthropic (a model with server-side compaction, e.g. claude-sonnet-4-6), or "
        "--provider demo or scripted offline (they emulate it); or keep this provider with "
        "--strategy compact (our summary) or --strategy rollover (a handoff), per run or with "
        "%config PseudoClaude.strategy"
    )


def server_context(settings: CompactSettings, review: Review | None = None) -> ServerContext:
    """What the provider is asked for under ``settings``: compaction at the Layer 2 line; with a
    ``review``, a pause after it (to ask), or none at all once the person rejected one this run."""
    return ServerContext(
        trigger=settings.threshold,
        clear_tool_results=settings.clear_tool_results,
        pause=review is not None,
        compact=review is None or not review.skips("compact"),
    )


def holds_on_demand(first: Message | None) -> bool:
    """Whether the conversation starts (``first``) with the provider's on-demand compaction (which
    Anthropic takes with no compaction edit beside it: the provider no longer compacts at the line)."""
    return first is not None and any(r.origin == ORIGIN_ON_DEMAND for r in first.reasoning)


def raise_refusal(provider: object) -> None:
    """``ProviderError`` with the reason ``provider`` refused the last answer's block
    (``RefusesBlocks``), once; nothing when it kept every block."""
    if not isinstance(provider, RefusesBlocks):
        return
    refused, provider.refused_block = provider.refused_block, None
    if isinstance(refused, str):
        raise ProviderError(refused)


def server_side(
    state: SharedState, trigger: str, *, live: bool, provider: Provider | None = None
) -> tuple[str | None, bool]:
    """What a ``server_context`` strategy's view shows of the provider's side: the message whose
    compaction the conversation does not follow yet (``pending``), and whether the provider
    compacts at the line on its own (``View.server_compacts``): not in a window that began with
    its on-demand compaction, when it can compact on demand (else it is asked as ever)."""
    on_its_own = not holds_on_demand(state.conversation.first()) or (
        provider is not None and not on_demand.supported(provider)
    )
    return pending(state, trigger, live=live), on_its_own


def compaction_at(messages: list[Message]) -> int | None:
    """The index of the last message that carries a compaction block (None: none does)."""
    for i in range(len(messages) - 1, -1, -1):
        if any(r.kind == COMPACTION for r in messages[i].reasoning):
            return i
    return None


def undone(messages: list[Message]) -> list[Message]:
    """``messages`` restored by an undo: a compaction block anywhere but on the first message
    is one the undo took back, so it is dropped (the answer's text and calls stay)."""
    out = messages[:1]
    for m in messages[1:]:
        if any(r.kind == COMPACTION for r in m.reasoning):
            m = m.model_copy(update={"reasoning": tuple(r for r in m.reasoning if r.kind != COMPACTION)})
        out.append(m)
    return out


def pending(state: SharedState, trigger: str, *, live: bool) -> str | None:
    """The message whose compaction the conversation does not follow yet (``View.server_compaction``).

    An answer is looked at as it comes (``answer``); before a request, the whole conversation
    once per host, restore and switch (a log that ended between an answer and its replace),
    and only when the question is a real one (``live``: its answer will be applied).
    """
    s = state
    if trigger == "answer":
        last = s.conversation.last()
        if last is None or len(s.conversation) < 2 or not any(r.kind == COMPACTION for r in last.reasoning):
            return None
        return last.id
    if trigger != "before" or s.caught_up or not live:
        return None
    s.caught_up = True
    messages = s.conversation.messages()
    at = compaction_at(messages)
    return messages[at].id if at else None


def adopt(state: SharedState, at: int, emit: Emit, *, strategy: str | None = None) -> bool:
    """The conversation follows the provider's compaction carried by message ``at``: the
    messages from it on. True when it replaced (``at`` 0: it already starts there)."""
    s = state
    messages = s.conversation.messages()
    if not 0 < at < len(messages):
        return False
    new = messages[at:]
    before = s.estimate_of(messages)
    # The usage of the answer that carried the block measured the compacted request: it
    # stays the anchor, now at the new length.
    measured = s.anchor[0] if s.anchor is not None and s.anchor[1] == len(messages) else None
    if measured is not None:
        # Never under what is sent from now on (issue 41: a server that says 15 tokens for
        # an answer whose block goes back at 20 MB must not hide it from the estimate).
        measured = max(measured, s.estimate_of(new))

    def failed(why: str) -> Exception:
        emit(Compacted(TRIGGER, before, before, False, why))
        return SessionWriteError(
            f"the provider's compaction could not be written to the log: {why}. The "
            "conversation is as it was and is written again on the next write; free disk space"
        )

    after = s.replaced("compact", messages, new, failed=failed, measured=measured, strategy=strategy)
    s.compactions += 1
    s.summary_id = new[0].id
    result = Compacted(TRIGGER, before, after, True)
    s.breaker.record(True, TRIGGER)
    s.record.record(
        CompactEntry.new(trigger=TRIGGER, before_tokens=before, after_tokens=after, ok=True, error=None)
    )
    s.last_compact = result
    emit(result)
    return True


def adopt_paused(
    state: SharedState, review: Review, emit: Emit, *, strategy: str | None = None
) -> Compacted | Notice | None:
    """The provider paused right after its compaction (the last answer is only its block:
    ``pause_after_compaction``, asked when the person confirms compactions): the person's say
    first. Approve: the conversation follows the block (``adopt``); edit: their text stands for
    everything before, framed as Layer 2 frames a summary; reject: the block is dropped (a
    ``resync`` replace, no compaction) and the run goes on without it. The event of the change
    (a rejection: its note, already said by the review and logged), None when nothing changed."""
    s = state
    messages = s.conversation.messages()
    verdict, instead = on_demand.review_pause(s, messages, review, emit)
    if instead is None:
        return s.last_compact if adopt(s, len(messages) - 1, emit, strategy=strategy) else None
    reason = "resync" if verdict == "reject" else "compact"
    before = s.estimate_of(messages)

    def failed(why: str) -> Exception:
        return SessionWriteError(f"the answer to the compaction could not be written to the log: {why}")

    s.replaced(reason, messages, instead, failed=failed, strategy=strategy)
    if reason == "compact":
        after = s.estimate_of(instead)
        s.compactions += 1
        s.summary_id = instead[0].id if instead else None
        s.record.record(
            CompactEntry.new(trigger=TRIGGER, before_tokens=before, after_tokens=after, ok=True, error=None)
        )
        s.last_compact = Compacted(TRIGGER, before, after, True)
        emit(s.last_compact)
        return s.last_compact
    return Notice("server compaction rejected: its block was dropped and the run goes on without it", "info")
