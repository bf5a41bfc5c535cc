"""Where the prompt cache stands for the next request (issue 31): for ``%context`` and ``%compact``.

Anthropic caches the prefix up to each ``cache_control`` breakpoint (tools, then system, then
messages; ``providers/anthropic.py`` places them on the system prompt, on the previous
request's last block and on the last block). A cache entry lives 5 minutes from its last use.
OpenAI caches the longest prefix it has seen, from 1,024 tokens, on its own. Either way the next
request reads back what the previous one sent, if it comes in time and the conversation was
not replaced since — a compaction or handoff keeps only the system prompt and tools cached.
The scripted provider simulates the Anthropic case. Figures are estimates (bytes/3.5), except
the previous request's size, which the provider measured. No IPython here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..messages import Message, Usage
from .estimate import message_bytes, tokens_for_bytes

TTL_SECONDS = 300  # Anthropic's default (5-minute) cache lifetime; OpenAI keeps entries at least as long
MIN_CACHEABLE = 1024  # the smallest cached prefix, tokens (OpenAI; Anthropic's for most models)


@dataclass(frozen=True)
class Breakpoint:
    where: str  # what the cached prefix ends with
    tokens: int  # the prefix up to it, estimated


@dataclass(frozen=True)
class CacheOutlook:
    breakpoints: list[Breakpoint]
    expected_read: int  # tokens of the next request expected to be a cache read
    reason: str  # why that many
    invalidated_by_replace: int  # cached conversation tokens a compaction or handoff now would drop

    def lines(self) -> list[str]:
        out = [f"cache: next request reads ~{self.expected_read:,} tokens from the cache ({self.reason})"]
        out += [
            f"  breakpoint {i}: after {b.where} (~{b.tokens:,} tokens)"
            for i, b in enumerate(self.breakpoints, 1)
        ]
        if self.invalidated_by_replace:
            out.append(
                f"  a compaction or handoff now invalidates ~{self.invalidated_by_replace:,} cached tokens "
                "(the system prompt and tools stay cached)"
            )
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "breakpoints": [{"after": b.where, "tokens": b.tokens} for b in self.breakpoints],
            "expected_cache_read": self.expected_read,
            "reason": self.reason,
            "invalidated_by_replace": self.invalidated_by_replace,
        }


def outlook(
    *,
    provider: str,
    head_tokens: int,
    messages: list[Message],
    last: Usage | None,
    last_ts: float | None,
    anchored: bool,
    now: float,
    units: list[int] | None = None,
) -> CacheOutlook:
    """The next request's cache: ``head_tokens`` is tools + system prompt; ``last`` the previous
    request's usage (logged at ``last_ts``); ``anchored`` says no replace came since it;
    ``units``: each message's ``message_bytes``, when the caller has them."""
    sizes = [tokens_for_bytes(n) for n in (units if units is not None else map(message_bytes, messages))]
    breakpoints = _breakpoints(provider, head_tokens, messages, sizes)
    if last is None or last_ts is None:
        read, reason = 0, "no request was sent in this session yet"
    elif now - last_ts > TTL_SECONDS:
        minutes = (now - last_ts) / 60
        read, reason = 0, f"the last request was {minutes:.0f} min ago: the 5-minute cache has expired"
    elif anchored:
        read, reason = last.prompt_total, "all of the previous request, as the provider measured it"
    else:
        read, reason = head_tokens, "a replace since the last request: only the system prompt and tools"
    if read < MIN_CACHEABLE and read:
        read, reason = 0, f"under the smallest cacheable prefix ({MIN_CACHEABLE:,} tokens)"
    invalidated = max(read - head_tokens, 0) if anchored else 0
    return CacheOutlook(breakpoints, read, reason, invalidated)


def _breakpoints(provider: str, head: int, messages: list[Message], sizes: list[int]) -> list[Breakpoint]:
    if provider == "openai":
        return [
            Breakpoint("the longest prefix seen before (automatic, from 1,024 tokens)", head + sum(sizes))
        ]
    if provider == "offline":
        return []
    points = [Breakpoint("tools + system prompt", head)]
    # The next request appends a prompt to the conversation: the turn before the last
    # assistant turn is where the previous request ended (``conversation_breakpoints``).
    roles = [m.role for m in messages]
    if roles and roles[-1] == "assistant":
        k = len(roles) - 1
        while k > 0 and roles[k - 1] == "assistant":
            k -= 1
        if k > 0:
            points.append(Breakpoint(f"message {k}, where the previous request ended", head + sum(sizes[:k])))
    points.append(Breakpoint("the next prompt (the whole request)", head + sum(sizes)))
    return points
