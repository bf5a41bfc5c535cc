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

from dataclasses import dataclass, field
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
    provider_said: list[str] = field(default_factory=list)  # issue 43: diagnosis, applied edits

    def lines(self) -> list[str]:
        out = [f"cache: next request reads ~{self.expected_read:,} tokens from the cache ({self.reason})"]
        out += [f"  {line}" for line in self.provider_said]
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
            "provider_said": self.provider_said,
        }


def expected_read(
    *,
    head_tokens: int,
    last: Usage | None,
    last_ts: float | None,
    anchored: bool,
    now: float,
    ttl: int = TTL_SECONDS,
    head_changed: bool = False,
) -> tuple[int, str]:
    """(tokens of the next request expected to be read from the cache, why): all of the previous
    request while nothing moved the cached prefix; only the system prompt and tools after a
    replace; nothing once the entry's lifetime (``ttl`` seconds) is over or the system prompt or
    tools changed (issue 43, ``head_changed``). Cheap: the cache guard asks it before every request."""
    if last is None or last_ts is None:
        read, reason = 0, "no request was sent in this session yet"
    elif now - last_ts > ttl:
        minutes = (now - last_ts) / 60
        life = "1-hour" if ttl >= 3600 else f"{ttl // 60}-minute"
        read, reason = 0, f"the last request was {minutes:.0f} min ago: the {life} cache has expired"
    elif head_changed:
        read, reason = 0, "the system prompt or the tools changed since the last request"
    elif anchored:
        read, reason = last.prompt_total, "all of the previous request, as the provider measured it"
    else:
        read, reason = head_tokens, "a replace since the last request: only the system prompt and tools"
    if read < MIN_CACHEABLE and read:
        read, reason = 0, f"under the smallest cacheable prefix ({MIN_CACHEABLE:,} tokens)"
    return read, reason


def outlook(
    *,
    provider: str,
    head_tokens: int,
    messages: list[Message],
    last: Usage | None,
    last_ts: float | None,
    anchored: bool,
    now: float,
    ttl: int = TTL_SECONDS,
    units: list[int] | None = None,
) -> CacheOutlook:
    """The next request's cache: ``head_tokens`` is tools + system prompt; ``last`` the previous
    request's usage (logged at ``last_ts``); ``anchored`` says no replace came since it;
    ``units``: each message's ``message_bytes``, when the caller has them."""
    sizes = [tokens_for_bytes(n) for n in (units if units is not None else map(message_bytes, messages))]
    breakpoints = _breakpoints(provider, head_tokens, messages, sizes)
    read, reason = expected_read(
        head_tokens=head_tokens, last=last, last_ts=last_ts, anchored=anchored, now=now, ttl=ttl
    )
    invalidated = max(read - head_tokens, 0) if anchored else 0
    return CacheOutlook(breakpoints, read, reason, invalidated, said(last))


def said(last: Usage | None) -> list[str]:
    """What the provider said about the last request's prompt (issue 43): the cache diagnosis,
    when the API gave one, and what context editing cleared."""
    if last is None:
        return []
    out = []
    if last.cache_miss_reason:
        why = last.cache_miss_reason.replace("_", " ")
        missed = (
            f" (~{last.cache_missed_input_tokens:,} tokens it could have read)"
            if last.cache_missed_input_tokens
            else ""
        )
        out.append(f"cache miss on the last request: {why}{missed}, as the provider diagnosed it")
    if last.cleared_tool_uses or last.cleared_input_tokens:
        out.append(
            f"context editing cleared {last.cleared_tool_uses} old tool result"
            f"{'s' if last.cleared_tool_uses != 1 else ''} (~{last.cleared_input_tokens:,} tokens) "
            "from the last request"
        )
    return out


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
