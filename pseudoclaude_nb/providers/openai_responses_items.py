"""What goes out to the OpenAI Responses API: neutral messages as input items (issue 43).

The Responses API reads a flat list of items, not turns: a user message, an assistant message,
a ``function_call`` (its ``call_id``, name and arguments as JSON text) and its
``function_call_output`` (text, or text and ``input_image`` parts: images go back inside the
result, as the documented output list allows), a ``reasoning`` item and a ``compaction`` item
exactly as they came (their encrypted content is what carries reasoning and compacted state
across stateless requests). A compaction part another provider made goes as its readable summary,
or not at all when it has none. The shapes follow the OpenAI Python SDK's types
(``ResponseInputItemParam``: ``EasyInputMessageParam``, ``ResponseFunctionToolCallParam``,
``FunctionCallOutput``, ``ResponseReasoningItemParam``, ``ResponseCompactionItemParam``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

from ..messages import ORIGIN_OPENAI, Message, Reasoning

COMPACTION = "compaction"
REASONING_ITEM = "reasoning_item"
ImageParts = Callable[[Message], tuple[list[dict[str, Any]], list[str]]]


def tool(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool in the Responses shape. ``strict`` is said to be false: the API's default is strict
    mode, whose schema rules (every property required, no extra keys) our tools do not follow."""
    return {
        "type": "function",
        "name": schema["name"],
        "description": schema.get("description", ""),
        "parameters": schema.get("input_schema") or {"type": "object", "properties": {}},
        "strict": False,
    }


def items(messages: list[Message], images: ImageParts | None = None) -> list[dict[str, Any]]:
    """Every message's input items, in order."""
    out: list[dict[str, Any]] = []
    for m in messages:
        out += message_items(m, images)
    return out


def group_items(group: list[Message], images: ImageParts | None) -> list[dict[str, Any]]:
    """A turn's items (``EncodedHistory`` converts the history a turn at a time)."""
    return items(group, images)


def message_items(m: Message, images: ImageParts | None = None) -> list[dict[str, Any]]:
    if m.role == "assistant":
        return _assistant(m)
    parts, notes = images(m) if images is not None and m.parts else ([], [])
    if m.tool_result is not None:
        r = m.tool_result
        text = "\n".join([f"Error: {r.content}" if r.is_error else r.content, *notes])
        output: str | list[dict[str, Any]] = [{"type": "input_text", "text": text}, *parts] if parts else text
        return [{"type": "function_call_output", "call_id": r.call_id, "output": output}]
    text = "\n".join([m.content, *notes]) if notes else m.content
    if parts:
        lead = [{"type": "input_text", "text": text}] if text.strip() else []
        return [{"type": "message", "role": "user", "content": lead + parts}]
    if not text.strip():
        return []
    return [{"type": "message", "role": "user", "content": text}]


def _assistant(m: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in m.reasoning:  # in the order they came: a compaction item first, then reasoning
        item = sent_back(r)
        if item is not None:
            out.append(item)
    if m.content.strip():
        out.append({"type": "message", "role": "assistant", "content": m.content})
    out += [
        {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": json.dumps(c.arguments)}
        for c in m.tool_calls
    ]
    return out


def sent_back(r: Reasoning) -> dict[str, Any] | None:
    """A kept part as the item that goes back: OpenAI's own reasoning and compaction items
    verbatim; another provider's compaction as its summary text; anything else not at all."""
    if r.kind == REASONING_ITEM or (r.kind == COMPACTION and r.origin == ORIGIN_OPENAI):
        try:
            item = orjson.loads(r.data or "")
        except orjson.JSONDecodeError:
            return None
        return item if isinstance(item, dict) else None
    if r.kind == COMPACTION:
        summary = foreign_summary(r)
        if summary:
            return {"type": "message", "role": "assistant", "content": summary}
    return None


def foreign_summary(r: Reasoning) -> str:
    """The readable summary of a compaction part another provider made ('' when it has none)."""
    try:
        block = orjson.loads(r.data or "{}")
    except orjson.JSONDecodeError:
        return ""
    content = block.get("content") if isinstance(block, dict) else None
    if not isinstance(content, str) or not content.strip():
        return ""
    return f"[summary of the earlier conversation, written by the provider's compaction]\n{content}"
