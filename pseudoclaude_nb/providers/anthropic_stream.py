"""What comes back from the Anthropic Messages API: raw stream events read into neutral ones,
and the usage they carry (cache writes by TTL included).

Thinking blocks are kept whole, with their signatures, so they can go back unchanged before
the ``tool_use`` they preceded. ``anthropic`` owns the requests; this module only reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..messages import Reasoning, Usage
from .base import (
    ReasoningDelta,
    ReasoningEnd,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)

THINKING = ("thinking", "redacted_thinking")


class Reader:
    """Raw Messages-API stream events in, neutral events out; keeps what must go back."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.usage = Usage()
        self.stop_reason: str | None = None
        self.stopped = False

    def feed(self, event: Any) -> Iterator[StreamEvent]:
        kind = event.type
        if kind == "message_start":
            # Usage is optional in what servers send (an SDK fixture has none).
            self.usage = usage_of(getattr(event.message, "usage", None))
            yield UsageEvent(self.usage)
        elif kind == "content_block_start":
            yield from self._start(event.index, event.content_block)
        elif kind == "content_block_delta":
            yield from self._delta(event.index, event.delta)
        elif kind == "content_block_stop":
            block = self.blocks.get(event.index)
            if block is not None and block["type"] == "tool_use":
                yield ToolCallEnd(block["id"])
            elif block is not None and block["type"] in THINKING:
                yield ReasoningEnd(
                    Reasoning(
                        kind=block["type"],
                        text=block.get("thinking", ""),
                        signature=block.get("signature"),
                        data=block.get("data"),
                    )
                )
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self.usage = delta_usage(self.usage, getattr(event, "usage", None))
            yield UsageEvent(self.usage)
        elif kind == "message_stop":
            self.stopped = True

    def _start(self, index: int, block: Any) -> Iterator[StreamEvent]:
        if block.type == "tool_use":
            self.blocks[index] = {"type": "tool_use", "id": block.id}
            yield ToolCallStart(id=block.id, name=block.name)
        elif block.type == "thinking":
            # The docs' own stream starts a thinking block with no signature field at all.
            thinking = getattr(block, "thinking", None) or ""
            self.blocks[index] = {
                "type": "thinking",
                "thinking": thinking,
                "signature": getattr(block, "signature", None) or "",
            }
            if thinking:
                yield ReasoningDelta(thinking)
        elif block.type == "redacted_thinking":
            self.blocks[index] = {"type": "redacted_thinking", "data": getattr(block, "data", None) or ""}
        elif block.type == "text":
            self.blocks[index] = {"type": "text"}
            if block.text:
                yield TextDelta(block.text)

    def _delta(self, index: int, delta: Any) -> Iterator[StreamEvent]:
        block = self.blocks.get(index)
        if delta.type == "text_delta":
            yield TextDelta(delta.text)
        elif delta.type == "input_json_delta" and block is not None and delta.partial_json:
            yield ToolCallDelta(id=block["id"], json=delta.partial_json)
        elif delta.type == "thinking_delta" and block is not None:
            block["thinking"] += delta.thinking
            yield ReasoningDelta(delta.thinking)
        elif delta.type == "signature_delta" and block is not None:
            block["signature"] += delta.signature


def reasoning_of(block: Any) -> Reasoning | None:
    if block.type == "thinking":
        return Reasoning(
            kind="thinking",
            text=getattr(block, "thinking", None) or "",
            signature=getattr(block, "signature", None) or "",
        )
    if block.type == "redacted_thinking":
        return Reasoning(kind="redacted_thinking", data=getattr(block, "data", None) or "")
    return None


def usage_of(u: Any) -> Usage:
    """Every field optional: a server may leave out usage, or any part of it."""

    def get(name: str) -> int:
        return int(getattr(u, name, None) or 0)

    return Usage(
        input_tokens=get("input_tokens"),
        output_tokens=get("output_tokens"),
        cache_creation_input_tokens=get("cache_creation_input_tokens"),
        cache_read_input_tokens=get("cache_read_input_tokens"),
        cache_creation_1h_input_tokens=_hour_writes(u) or 0,
    )


def _hour_writes(u: Any) -> int | None:
    """The 1-hour part of the cache writes: ``usage.cache_creation.ephemeral_1h_input_tokens``
    (the breakdown by TTL; None when the server sent none)."""
    split = getattr(u, "cache_creation", None)
    if isinstance(split, dict):  # a server's extra field the SDK's model does not know
        value = split.get("ephemeral_1h_input_tokens")
    else:
        value = getattr(split, "ephemeral_1h_input_tokens", None)
    return None if value is None else int(value)


def delta_usage(before: Usage, u: Any) -> Usage:
    """message_start holds the input side; message_delta the cumulative output (and, lately, input)."""
    if u is None:
        return before

    def pick(name: str, old: int) -> int:
        new = getattr(u, name, None)
        return old if new is None else int(new)

    return Usage(
        input_tokens=pick("input_tokens", before.input_tokens),
        output_tokens=pick("output_tokens", before.output_tokens),
        cache_creation_input_tokens=pick("cache_creation_input_tokens", before.cache_creation_input_tokens),
        cache_read_input_tokens=pick("cache_read_input_tokens", before.cache_read_input_tokens),
        cache_creation_1h_input_tokens=(
            before.cache_creation_1h_input_tokens if (hour := _hour_writes(u)) is None else hour
        ),
    )
