"""What goes out to the Messages API: neutral messages as Anthropic turns (split from ``anthropic``).

A user turn holds its ``tool_result`` blocks first (images inside them), then text; an assistant
turn holds its thinking and compaction blocks first, exactly as they came, then text, then
``tool_use``. Cache breakpoints sit on the open tail's turns (``conversation_breakpoints``). A
compaction block goes back verbatim only where the API is asked to read it (``server``) and only
if Anthropic made it; elsewhere its summary goes as text. No requests here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import provider_blocks
from ..messages import Message, Reasoning
from . import anthropic_native as native
from .anthropic_stream import COMPACTION, THINKING

# What goes back before an assistant turn's text, in the order it came: thinking, and the
# server's compaction block.
SENT_BACK = (*THINKING, COMPACTION)
Images = Callable[[Message], tuple[list[dict[str, Any]], list[str]]]


def turn(group: list[Message], images: Images, *, server: bool = False) -> dict[str, Any]:
    """One turn (consecutive messages of one role) as a Messages-API turn; ``images`` gives a
    message's image blocks and the notes for those not sent."""
    role = group[0].role
    blocks: list[dict[str, Any]] = []
    if role == "user":
        # The API wants a turn's tool_result blocks before any text in it.
        for m in group:
            r = m.tool_result
            if r is None:
                continue
            pictures, notes = images(m)
            text = "\n".join([r.content, *notes])
            block: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": r.call_id,
                # Images go inside the result, beside its text (the documented form).
                "content": [text_block(text), *pictures] if pictures else text,
            }
            if r.is_error:
                block["is_error"] = True
            blocks.append(block)
        for m in group:
            if m.tool_result is not None:
                continue
            pictures, notes = images(m)
            text = "\n".join([m.content, *notes]) if notes else m.content
            if text.strip():
                blocks.append(text_block(text))
            blocks += pictures
        return {"role": "user", "content": blocks}
    for m in group:
        # Thinking first, unchanged: the API checks the signature of every block it
        # gets back, and requires the blocks before the tool_use they led to.
        # A compaction block likewise goes back verbatim, where it came (first).
        blocks += [sent_back(r, server) for r in m.reasoning if r.kind in SENT_BACK]
        if m.content.strip():
            blocks.append(text_block(m.content))
        blocks += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls
        ]
    return {"role": "assistant", "content": blocks}


def no_loop(_messages: list[Message]) -> set[str]:
    return set()  # a turn's form does not depend on the running tool loop here


def never_changes(_group: list[Message], _loop: set[str]) -> bool:
    return False  # thinking blocks go back in every turn, while they are in the history


def breakpoints(tail: list[list[dict[str, Any]]], mark: dict[str, str]) -> None:
    """Cache breakpoints on the open tail's turns (``conversation_breakpoints`` says which)."""
    turns = [turn[0] for turn in tail if turn]  # one Messages-API turn per group
    for at in conversation_breakpoints(turns):
        turns[at]["content"][-1]["cache_control"] = mark


def conversation_breakpoints(turns: list[dict[str, Any]]) -> list[int]:
    """The turns whose last block gets a ``cache_control`` breakpoint (with the system prompt's,
    at most 3 of the API's 4).

    The last turn's: the whole conversation is cached, so the next step pays full price only
    for what it adds. And the last stable turn's — the user turn that ended the previous
    request, where that request's breakpoint wrote the cache: the API looks for an earlier
    cache entry only up to 20 blocks before a breakpoint, and a step with many tool calls adds
    more blocks than that, which would make the next request write the whole prefix again.
    A breakpoint on that very block reads it back whatever the step added. Thinking blocks
    take no breakpoint.
    """
    marks = []
    stable = len(turns) - 3
    if stable >= 0 and turns[stable]["role"] == "user" and turns[-1]["role"] == "user":
        marks.append(stable)
    if turns:
        marks.append(len(turns) - 1)
    return [at for at in marks if turns[at]["content"] and turns[at]["content"][-1]["type"] not in SENT_BACK]


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def sent_back(r: Reasoning, server: bool) -> dict[str, Any]:
    if r.kind != COMPACTION:
        return _thinking_block(r)
    block = provider_blocks.loaded(r.data)  # a log's block within the bounds, else None
    if block is None:
        block = {"type": COMPACTION, "content": None}  # the documented no-op: a failed compaction
    if server and native.own_block(r):
        return block  # verbatim: the fields as the API returned them
    summary = block.get("content")
    text = (
        summary
        if isinstance(summary, str) and summary.strip()
        else "(the provider's compaction left no summary)"
    )
    return text_block(f"[summary of the earlier conversation, written by the provider's compaction]\n{text}")


def _thinking_block(r: Reasoning) -> dict[str, Any]:
    if r.kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": r.data or ""}
    return {"type": "thinking", "thinking": r.text, "signature": r.signature or ""}
