"""What comes back from the Anthropic Messages API: raw stream events read into neutral ones,
and the usage they carry (cache writes by TTL included).

Thinking blocks are kept whole, with their signatures, so they can go back unchanged before
the ``tool_use`` they preceded. So is a server-side ``compaction`` block (issue 31,
``--strategy api``): every field as it came, as one ``Reasoning(kind="compaction")`` whose
``data`` is the block's JSON, to go back verbatim; the usage of the compaction iteration
(``usage.iterations``) is kept apart from the answer's. ``anthropic`` owns the requests; this
module only reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from .. import provider_blocks
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
COMPACTION: Final = "compaction"


class Reader:
    """Raw Messages-API stream events in, neutral events out; keeps what must go back."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.usage = Usage()
        self.stop_reason: str | None = None
        self.stopped = False
        self.message_id: str | None = None  # the answer's ``msg_…``: the next request's diagnostics
        # A compaction block past the bounds (``provider_blocks``): not kept; why, in one line.
        self.refused: str | None = None

    def feed(self, event: Any) -> Iterator[StreamEvent]:
        kind = event.type
        if kind == "message_start":
            # Usage is optional in what servers send (an SDK fixture has none).
            message = event.message
            self.message_id = getattr(message, "id", None)
            self.usage = usage_of(getattr(message, "usage", None)).model_copy(
                update=cache_diagnosis(getattr(message, "diagnostics", None))
            )
            yield UsageEvent(self.usage)
        elif kind == "content_block_start":
            yield from self._start(event.index, event.content_block)
        elif kind == "content_block_delta":
            yield from self._delta(event.index, event.delta)
        elif kind == "content_block_stop":
            block = self.blocks.get(event.index)
            if block is not None and block["type"] == "tool_use":
                yield ToolCallEnd(block["id"])
            elif block is not None and block["type"] == COMPACTION:
                try:
                    part = compaction_part(block["fields"])
                except provider_blocks.OutOfBounds as exc:
                    self.refused = str(exc)  # the answer's text and calls still come through
                else:
                    yield ReasoningEnd(part)
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
            edits = applied_edits(getattr(event, "context_management", None))
            if edits:
                self.usage = self.usage.model_copy(update=edits)
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
        elif block.type == COMPACTION:
            # The documented stream: the block starts (content null), one compaction_delta
            # carries the summary (and any encrypted content), the block stops.
            self.blocks[index] = {"type": COMPACTION, "fields": fields_of(block)}
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
        elif delta.type == "compaction_delta" and block is not None and block["type"] == COMPACTION:
            # Each field the delta carries replaces the block's (the SDK's own accumulator does so).
            for name, value in fields_of(delta).items():
                if name != "type":
                    block["fields"][name] = value
        elif delta.type == "signature_delta" and block is not None and block["type"] == COMPACTION:
            block["fields"]["signature"] = (block["fields"].get("signature") or "") + delta.signature
        elif delta.type == "signature_delta" and block is not None:
            block["signature"] += delta.signature


def fields_of(obj: Any) -> dict[str, Any]:
    """An SDK object's fields as the server sent them (none it did not), in their order."""
    if isinstance(obj, dict):
        return dict(obj)
    to_dict = getattr(obj, "to_dict", None)
    if to_dict is not None:
        return dict(to_dict())
    return {k: v for k, v in vars(obj).items() if not k.startswith("_")}


def compaction_part(fields: dict[str, Any]) -> Reasoning:
    """A compaction block, kept verbatim: its JSON text is what goes back (``anthropic._turn``);
    ``provider_blocks.OutOfBounds`` past the bounds every provider's blocks are kept within."""
    return Reasoning(kind=COMPACTION, data=provider_blocks.kept_json(fields))


def reasoning_of(block: Any) -> Reasoning | None:
    if block.type == COMPACTION:
        try:
            return compaction_part(fields_of(block))
        except provider_blocks.OutOfBounds:
            return None  # a summary or memory request: no context management asked, nothing kept
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
        **(_compaction_usage(u) or {}),
    )


# A compaction iteration's counts (the SDK's ``BetaCompactionIterationUsage``) -> Usage's fields.
_ITERATION = {
    "input_tokens": "compaction_input_tokens",
    "cache_creation_input_tokens": "compaction_cache_creation_input_tokens",
    "cache_read_input_tokens": "compaction_cache_read_input_tokens",
    "output_tokens": "compaction_output_tokens",
}


def _compaction_usage(u: Any) -> dict[str, Any] | None:
    """The usage of the compaction iterations of a request (``usage.iterations`` entries of type
    ``compaction``: not part of the top-level counts, billed besides); None when the server
    sent no iterations. Its cache writes and reads are kept apart, to be priced at their own
    rates (issue 43)."""
    iterations = getattr(u, "iterations", None)
    if not isinstance(iterations, list):
        return None
    counts: dict[str, Any] = dict.fromkeys(_ITERATION.values(), 0)
    for item in iterations:
        if _field(item, "type") != COMPACTION:
            continue
        for name, field in _ITERATION.items():
            counts[field] += int(_field(item, name) or 0)
    return counts


def applied_edits(management: Any) -> dict[str, int]:
    """What context editing cleared (``context_management.applied_edits``): tool uses and input
    tokens, summed over the edits (the SDK's ``BetaClearToolUses20250919EditResponse`` and
    ``BetaClearThinking20251015EditResponse``); {} when nothing was applied."""
    edits = _field(management, "applied_edits") if management is not None else None
    if not isinstance(edits, list) or not edits:
        return {}
    uses = tokens = 0
    for edit in edits:
        uses += int(_field(edit, "cleared_tool_uses") or 0)
        tokens += int(_field(edit, "cleared_input_tokens") or 0)
    return {"cleared_tool_uses": uses, "cleared_input_tokens": tokens}


def cache_diagnosis(diagnostics: Any) -> dict[str, Any]:
    """The API's cache diagnosis (``diagnostics.cache_miss_reason``, beta cache-diagnosis): its
    type and the input tokens it says a matching prefix would have read; {} when there is none
    (no diagnostics asked, no divergence, or the diagnosis still pending)."""
    reason = _field(diagnostics, "cache_miss_reason") if diagnostics is not None else None
    kind = _field(reason, "type") if reason is not None else None
    if not isinstance(kind, str) or not kind:
        return {}
    return {
        "cache_miss_reason": kind[:64],
        "cache_missed_input_tokens": int(_field(reason, "cache_missed_input_tokens") or 0),
    }


def _field(item: Any, name: str) -> Any:
    # An iteration is a dict (a field the SDK's model does not know) or an SDK object.
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


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
        **(_compaction_usage(u) or {field: getattr(before, field) for field in _ITERATION.values()}),
        **_notes_of(before),
    )


def _notes_of(u: Usage) -> dict[str, Any]:
    """What a usage carries besides its counts (edits, diagnosis): kept through a delta."""
    return {
        "cleared_tool_uses": u.cleared_tool_uses,
        "cleared_input_tokens": u.cleared_input_tokens,
        "cache_miss_reason": u.cache_miss_reason,
        "cache_missed_input_tokens": u.cache_missed_input_tokens,
    }
