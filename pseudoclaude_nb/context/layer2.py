"""Layer 2 at run time: summarize the old history, keep the recent tail.

The prompt and the cut are the pure functions of ``compact.summarize``; this module asks
the provider (with retries that drop the oldest exchange when even the summary request is
too long), keeps the breaker, replaces the conversation (``compact``) and logs the
``compact`` entry. Both strategies have it: ``%compact`` works under rollover too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from ..compact.breaker import MIN_FREED
from ..compact.summarize import (
    SUMMARY_SYSTEM,
    compacted,
    drop_oldest_exchange,
    freed_fraction,
    summary_messages,
    tail_start,
)
from ..errors import ContextTooLong, ProviderError, SessionWriteError
from ..events import Compacted, CompactStarted
from ..messages import Message
from ..providers.base import Provider, Request
from .layer1 import Emit, ignore

if TYPE_CHECKING:
    from .state import SharedState

SUMMARY_RETRIES = 3


def compact(
    state: SharedState, provider: Provider, trigger: str = "manual", emit: Emit = ignore
) -> Compacted:
    """One Layer 2 attempt (``trigger`` auto | manual | forced); ``ok`` False replaces nothing."""
    messages = state.conversation.messages()
    before = state.estimate_of(messages)
    emit(CompactStarted(trigger, before))
    start = tail_start(messages, state.settings.tail_tokens)
    head, tail = messages[:start], messages[start:]
    new, error = _summarize(state, provider, head, tail)
    after = before
    if new is not None:
        after = state.estimate_of(new)
        freed = freed_fraction(before, after)
        if freed < MIN_FREED:
            error, new = f"it would free only {freed:.0%} of the context (needs {MIN_FREED:.0%})", None
            after = before
    if new is not None:
        failed = state.replace_or_keep("compact", messages, new)
        if failed is not None:
            _unwritten(state, failed, Compacted(trigger, before, before, False, failed), emit)
        state.reset_anchor(new)
        state.compactions += 1
    result = Compacted(trigger, before, after, new is not None, error)
    state.breaker.record(result.ok, trigger)
    if state.writer is not None:
        state.writer.compact(
            trigger=trigger, before_tokens=before, after_tokens=after, ok=result.ok, error=error
        )
    state.last_compact = result
    emit(result)
    return result


def _unwritten(state: SharedState, reason: str, attempt: Compacted, emit: Emit) -> NoReturn:
    """The log could not take the compaction (a full disk): nothing of it happened.

    Memory is back at the old messages (``replace_or_keep``), which the anchor and the
    calibration still describe. A disk failure is not a failed summary: the breaker does
    not count it and no ``compact`` entry is logged (a restore would count one). Raises
    ``SessionWriteError``, which stops a run.
    """
    state.last_compact = attempt
    emit(attempt)
    raise SessionWriteError(
        f"the compaction was not applied: {reason}. The conversation is as it was (not compacted) "
        "and the log is resynced to it on its next write; free disk space, then run %agent again "
        "(or %compact) to compact."
    )


def _summarize(
    state: SharedState, provider: Provider, head: list[Message], tail: list[Message]
) -> tuple[list[Message] | None, str | None]:
    if not head:
        return None, "nothing old enough to summarize: the recent tail is the whole conversation"
    for _ in range(1 + SUMMARY_RETRIES):
        request = Request(
            system=SUMMARY_SYSTEM,
            messages=summary_messages(head),
            max_tokens=state.settings.summary_reserve,
            purpose="summary",
        )
        try:
            response = provider.complete(request)
        except ContextTooLong:
            head = drop_oldest_exchange(head)
            if not head:
                return None, "the summary request is too long even without the older history"
            continue
        except ProviderError as exc:
            return None, f"the summary request failed: {exc}"
        if not response.text.strip():
            return None, "the model returned an empty summary"
        return compacted(response.text, tail), None
    return None, f"the summary request was still too long after {SUMMARY_RETRIES} retries"
