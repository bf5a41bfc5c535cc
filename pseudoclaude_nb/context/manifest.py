"""What a request contains, part by part, with token estimates: ``%context``'s data.

A pure function of the request's parts, so the same code describes the next request
and the last one actually sent.
"""

from __future__ import annotations

import json
from typing import Any

from ..mcp.tools import is_mcp_tool
from ..messages import Message
from ..prompt import PINS_SECTION
from .estimate import estimate_text, image_part_bytes, message_bytes, tokens_for_bytes


def message_parts(messages: list[Message]) -> dict[str, int]:
    parts = {
        "notebook": 0,
        "user_text": 0,
        "assistant_text": 0,
        "tool_calls": 0,
        "tool_results": 0,
        "spill_previews": 0,
        "images": 0,  # issue-14: image parts, their own part (shown when there are any)
    }
    for m in messages:
        pictures = sum(image_part_bytes(p.width, p.height) for p in m.parts)
        parts["images"] += pictures
        if m.tool_result is not None:
            key = "spill_previews" if m.is_spill_preview else "tool_results"
            parts[key] += message_bytes(m) - pictures
        elif m.role == "user":
            # The notebook activity block is its own part (found by the message's field).
            block = len(m.content[: m.notebook.chars].encode("utf-8")) if m.notebook else 0
            parts["notebook"] += block
            parts["user_text"] += message_bytes(m) - block - pictures
        else:
            text = len(m.role) + len(m.content.encode("utf-8"))
            parts["assistant_text"] += text
            parts["tool_calls"] += message_bytes(m) - text
    return {k: tokens_for_bytes(v) for k, v in parts.items()}


def manifest(
    *,
    sections: list[tuple[str, str]],
    messages: list[Message],
    tools: list[dict[str, Any]],
    context_window: int,
    threshold: int,
    estimated_tokens: int | None = None,
    anchor_tokens: int = 0,
    memory_index: str | None = None,
    extra: dict[str, Any] | None = None,
    pending_notebook: str | None = None,
) -> dict[str, Any]:
    """``pending_notebook`` is the activity block the next run would add (counted as notebook).

    The user's pins are a system section, shown as their own part ("pins").
    """
    pins_tokens = sum(estimate_text(text) for title, text in sections if title == PINS_SECTION)
    system: list[dict[str, Any]] = [
        {"title": title, "tokens": estimate_text(text)} for title, text in sections if title != PINS_SECTION
    ]
    # MCP servers' schemas are their own part: a well-known silent hog of the window.
    mcp_tools = [t for t in tools if is_mcp_tool(t["name"])]
    tool_tokens = _schema_tokens([t for t in tools if not is_mcp_tool(t["name"])])
    mcp_tokens = _schema_tokens(mcp_tools)
    parts = message_parts(messages)
    pending_tokens = estimate_text(pending_notebook) if pending_notebook else 0
    parts["notebook"] += pending_tokens
    memory_tokens = estimate_text(memory_index) if memory_index else 0
    computed = (
        sum(s["tokens"] for s in system)
        + pins_tokens
        + tool_tokens
        + mcp_tokens
        + sum(parts.values())
        + memory_tokens
    )
    data: dict[str, Any] = {
        "context_window": context_window,
        "estimated_tokens": estimated_tokens + pending_tokens if estimated_tokens is not None else computed,
        "anchor_tokens": anchor_tokens,
        "threshold": threshold,
        "message_count": len(messages),
        "image_count": sum(len(m.parts) for m in messages),
        "tools": [t["name"] for t in tools],
        "mcp_tools": [t["name"] for t in mcp_tools],
        "memory_included": memory_index is not None,
        "memory_index": memory_index,
        "parts": {
            "system": sum(s["tokens"] for s in system),
            "pins": pins_tokens,
            "memory": memory_tokens,
            "tool_schemas": tool_tokens,
            "mcp_tool_schemas": mcp_tokens,
            **parts,
        },
        "system_sections": system,
        "notebook_pending_tokens": pending_tokens,
    }
    data.update(extra or {})
    return data


def notebook_cells(block: Any) -> dict[str, Any]:
    """The next run's notebook cells, for ``%context`` (issue 29): each with its token estimate.

    ``block`` is the ``ActivityBlock`` the next run would send (or ``None``). The cells'
    estimates plus ``notebook_block_overhead`` (delimiters, header, the "not shown" line)
    add up to ``notebook_pending_tokens``; ``notebook_left_out`` cells did not fit the
    budget, ``notebook_skipped`` were kept out (``agent-skip``, ``--skip-cells``).
    """
    if block is None:
        return {"notebook_cells": [], "notebook_left_out": 0, "notebook_skipped": 0}
    cells = [
        {"label": c.label, "execution_count": c.execution_count, "tokens": estimate_text(c.text)}
        for c in (block.cells if block.text else ())
    ]
    total = estimate_text(block.text) if block.text else 0
    return {
        "notebook_cells": cells,
        "notebook_block_overhead": max(total - sum(c["tokens"] for c in cells), 0),
        "notebook_left_out": block.omitted,
        "notebook_skipped": block.skipped,
    }


def _schema_tokens(tools: list[dict[str, Any]]) -> int:
    return tokens_for_bytes(len(json.dumps(tools, ensure_ascii=False).encode("utf-8"))) if tools else 0
