"""Facts in a context: what a request (or the final context) holds, and which facts it keeps.

A context is read as the model would see it: the system prompt (pins included), then every
message's text, tool calls with their arguments, and tool results. A fact is kept when its
needle is in that text (case folded: a summary may start a sentence with it). No I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from ..messages import Message
from .task import Fact


def message_text(m: Message) -> str:
    # Reasoning goes back to the model too; a provider's compaction block (the api strategy)
    # is one, and it holds the summary the model continues from.
    parts = [*(r.text or r.data or "" for r in m.reasoning), m.content]
    parts += [f"{c.name} {json.dumps(c.arguments, ensure_ascii=False)}" for c in m.tool_calls]
    if m.tool_result is not None:
        parts.append(m.tool_result.content)
    return "\n".join(p for p in parts if p)


def context_text(system: str, messages: Iterable[Message]) -> str:
    return "\n\n".join([system, *(message_text(m) for m in messages)])


def kept(facts: Sequence[Fact], text: str) -> dict[str, bool]:
    """Fact key -> whether ``text`` holds it."""
    folded = text.casefold()
    return {f.key: f.needle.casefold() in folded for f in facts}


def fidelity(facts: Sequence[Fact], text: str) -> float:
    """The share of ``facts`` that ``text`` holds (1.0 for no facts)."""
    if not facts:
        return 1.0
    return sum(kept(facts, text).values()) / len(facts)


def _last_mentions(facts: Sequence[Fact], messages: Sequence[Message]) -> dict[int, int]:
    """Fact index -> the message that mentioned it last (absent: never mentioned)."""
    last: dict[int, int] = {}
    for at, m in enumerate(messages):
        text = message_text(m).casefold()
        for i, f in enumerate(facts):
            if f.needle.casefold() in text:
                last[i] = at
    return last


def newest(facts: Sequence[Fact], messages: Sequence[Message], budget: int) -> list[Fact]:
    """The at most ``budget`` facts of ``messages`` mentioned last, in the order they were stated.

    The lab model's memory (``model``): what a summary of limited length keeps when it
    favours what it saw last — the worst case for a requirement stated once, at the start.
    "Last" is by message; within one message (a summary carries many facts) the fact stated
    later counts as newer, ``facts`` being in the order the task states them.
    """
    last = _last_mentions(facts, messages)
    chosen = sorted(last, key=lambda i: (last[i], i))[-budget:] if budget > 0 else []
    return [facts[i] for i in sorted(chosen)]


def careful(facts: Sequence[Fact], messages: Sequence[Message], budget: int) -> list[Fact]:
    """Every must-keep fact ``messages`` mention, then the newest of the others up to ``budget``
    facts in all, in the order stated: the good case (issue 46), a summary that knows what
    matters, beside ``newest``'s worst case. Its must-keep facts may pass ``budget`` (seven must
    be kept, and a careful summary keeps them all); the others only fill what is left."""
    last = _last_mentions(facts, messages)
    must = [i for i in last if facts[i].must_keep]
    room = max(budget - len(must), 0)
    rest = sorted((i for i in last if not facts[i].must_keep), key=lambda i: (last[i], i))
    chosen = must + (rest[-room:] if room else [])
    return [facts[i] for i in sorted(chosen)]
