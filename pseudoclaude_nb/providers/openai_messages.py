"""What goes out to an OpenAI-compatible server: neutral messages as chat-completions messages.

System first, each tool result as a ``role: "tool"`` message, the running tool loop's
reasoning passed back under the field it came in (DeepSeek's thinking mode refuses step 2
without it), and images as ``image_url`` data-URL parts after the tool messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..messages import Message
from . import wire
from .openai_responses_items import foreign_summary
from .wire_prefix import EncodedHistory

# Where OpenAI-compatible servers put a model's reasoning: DeepSeek and older vLLM use
# reasoning_content, OpenRouter, Ollama and newer vLLM reasoning. Passed back under its own name.
REASONING_FIELDS = ("reasoning_content", "reasoning")

# issue-14: OpenAI takes images of up to 20 MB each (50 MB a request); other servers follow it.
IMAGE_LIMIT = 20 << 20
ImageParts = Callable[[Message], tuple[list[dict[str, Any]], list[str]]]


def wire_messages(
    system: str,
    messages: list[Message],
    images: ImageParts | None = None,
    encoded: EncodedHistory | None = None,
) -> list[dict[str, Any]]:
    """Neutral messages as chat-completions messages: system first, results as ``tool``.

    A ``tool`` message holds text only, so the images of a step's results follow its tool
    messages in one user message of ``image_url`` parts (issue-14); a model that takes no
    images gets each image's text note in the tool message instead. With ``encoded`` (the
    provider's), the turns of the history's unchanged prefix are reused, converted and
    encoded once (``wire_prefix``): the list returned then carries its JSON.
    """
    head: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []

    def convert(group: list[Message], loop_start: set[str]) -> list[dict[str, Any]]:
        return _turn(group, loop_start, images)

    if encoded is not None:
        return encoded.messages(head, messages, convert, _current_turn, _changes_with_the_loop)
    loop_start = _current_turn(messages)
    out = head
    for group in wire.turns(messages):
        out += convert(group, loop_start)
    return out


def _changes_with_the_loop(group: list[Message], loop_start: set[str]) -> bool:
    """Whether this turn's wire form changes once its tool loop is over (its reasoning is dropped)."""
    return any(m.id in loop_start and m.reasoning for m in group)


def _turn(group: list[Message], loop_start: set[str], images: ImageParts | None) -> list[dict[str, Any]]:
    """One turn (consecutive messages of one role) as its chat-completions messages."""
    out: list[dict[str, Any]] = []
    if group[0].role == "assistant":
        # A provider's compaction goes as its readable summary, first (an opaque item as nothing).
        summaries = [
            s for m in group for r in m.reasoning if r.kind == "compaction" and (s := foreign_summary(r))
        ]
        text = "\n\n".join([*summaries, *(m.content for m in group if m.content.strip())])
        calls = [c for m in group for c in m.tool_calls]
        if not text and not calls:
            return out  # an opaque compaction item alone: nothing chat completions can read
        entry: dict[str, Any] = {"role": "assistant", "content": text or None}
        # The reasoning of the running tool loop goes back (DeepSeek's thinking mode
        # refuses step 2 without it); that of earlier turns is not needed again.
        for m in group:
            if m.id in loop_start:
                for r in m.reasoning:
                    if r.kind in REASONING_FIELDS and r.text:
                        entry[r.kind] = entry.get(r.kind, "") + r.text
        if calls:
            entry["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for c in calls
            ]
        out.append(entry)
        return out
    texts: list[str] = []
    pictures: list[dict[str, Any]] = []
    for m in group:
        parts, notes = images(m) if images is not None and m.parts else ([], [])
        if m.tool_result is not None:
            result = m.tool_result
            content = f"Error: {result.content}" if result.is_error else result.content
            content = "\n".join([content, *notes])
            out.append({"role": "tool", "tool_call_id": result.call_id, "content": content})
            if parts:
                pictures.append({"type": "text", "text": f"Images shown by tool call {result.call_id}:"})
                pictures += parts
        else:
            text = "\n".join([m.content, *notes]) if notes else m.content
            if text.strip():
                texts.append(text)
            pictures += parts
    if pictures:
        # One user message after the tool messages (none may come between them and the
        # assistant's calls): the text first, then the images.
        lead = [{"type": "text", "text": "\n\n".join(texts)}] if texts else []
        out.append({"role": "user", "content": lead + pictures})
    elif texts:
        out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


def _current_turn(messages: list[Message]) -> set[str]:
    """Ids of the assistant messages after the last user text: the running turn's tool loop."""
    ids: set[str] = set()
    for m in reversed(messages):
        if m.role == "user" and m.tool_result is None and m.content.strip():
            break
        if m.role == "assistant":
            ids.add(m.id)
    return ids
