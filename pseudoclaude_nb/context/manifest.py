"""What a request contains, part by part, with token estimates: ``%context``'s data.

``manifest`` is a pure function of the request's parts, so the same code describes the next
request and the last one actually sent. It returns a ``Manifest``: a frozen dataclass the
magic reads by attribute; ``as_dict`` is its JSON (``%context --json``), the same keys as
before it was a dataclass (what only a session, a strategy or a sent request has is left
out when it is not there).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from ..mcp.tools import is_mcp_tool
from ..messages import Message
from ..prompt import PINS_SECTION
from .estimate import estimate_text, image_part_bytes, message_bytes, tokens_for_bytes


def message_parts(messages: list[Message], units: list[int] | None = None) -> dict[str, int]:
    """The messages' tokens by part; ``units``: each message's ``message_bytes``, when the caller
    has them (``%context`` counts them once for this and the cache outlook)."""
    sizes = units if units is not None else [message_bytes(m) for m in messages]
    parts = {
        "notebook": 0,
        "user_text": 0,
        "assistant_text": 0,
        "tool_calls": 0,
        "tool_results": 0,
        "spill_previews": 0,
        "images": 0,  # issue-14: image parts, their own part (shown when there are any)
    }
    for m, size in zip(messages, sizes, strict=True):
        pictures = sum(image_part_bytes(p.width, p.height) for p in m.parts) if m.parts else 0
        parts["images"] += pictures
        if m.tool_result is not None:
            key = "spill_previews" if m.is_spill_preview else "tool_results"
            parts[key] += size - pictures
        elif m.role == "user":
            # The notebook activity block is its own part (found by the message's field).
            block = len(m.content[: m.notebook.chars].encode("utf-8")) if m.notebook else 0
            parts["notebook"] += block
            parts["user_text"] += size - block - pictures
        else:
            text = len(m.role) + len(m.content.encode("utf-8"))
            parts["assistant_text"] += text
            parts["tool_calls"] += size - text
    return {k: tokens_for_bytes(v) for k, v in parts.items()}


Marks = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Manifest:
    context_window: int
    estimated_tokens: int
    anchor_tokens: int
    threshold: int
    message_count: int
    image_count: int
    tools: list[str]
    mcp_tools: list[str]
    memory_included: bool
    memory_index: str | None
    parts: dict[str, int]
    system_sections: list[dict[str, Any]]  # {"title", "tokens"} each, in prompt order
    notebook_pending_tokens: int
    # The next request's (``%context``): where the window came from, the strategy and its lines.
    window_source: str | None = None
    strategy: str | None = None
    marks: Marks = ()  # the strategy's lines (Layer 2, or rollover's three limits)
    strategy_view: dict[str, Any] = field(default_factory=dict)  # Strategy.describe(view)
    session_id: str | None = None
    memory_policy: str | None = None
    user_tools: list[str] = field(default_factory=list)
    notebook_pending_cells: int = 0
    notebook_cells: list[dict[str, Any]] = field(default_factory=list)
    notebook_block_overhead: int | None = None
    notebook_left_out: int = 0
    notebook_skipped: int = 0
    # Provider variables a workspace .env gives the package's providers (never os.environ):
    # name -> the .env's path (issue 41).
    from_dotenv: dict[str, str] = field(default_factory=dict)
    # A session's: the breaker, what the context layer did, cost and cache (issue 31).
    breaker: str | None = None
    breaker_failures: int | None = None
    spills: int | None = None
    compactions: int | None = None
    cost: dict[str, Any] | None = None
    cache: dict[str, Any] | None = None
    cache_lines: list[str] | None = None
    # The last request sent (``%context --last``): who it went to.
    provider: str | None = None
    model: str | None = None
    next_request: bool = True  # False: the last request actually sent

    def lines(self) -> Marks:
        """The strategy's lines, or the Layer 2 line when none were given (a sent request)."""
        return self.marks or (("Layer 2", self.threshold),)

    def cache_lost(self) -> int:
        """The cached conversation tokens a replace now would invalidate (issue 31); 0 if unknown."""
        return int((self.cache or {}).get("invalidated_by_replace") or 0)

    def as_dict(self) -> dict[str, Any]:
        """The JSON of ``%context --json``."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("marks", "strategy_view", "next_request"):
                continue
            if f.name in _NEXT_ONLY and not self.next_request:
                continue
            if f.name in _WHEN_SET and value is None:
                continue
            out[f.name] = value
        out.update(self.strategy_view)
        return out


# Keys only the next request's manifest has, and keys shown only when they have a value.
_NEXT_ONLY = frozenset(
    {
        "window_source",
        "strategy",
        "session_id",
        "memory_policy",
        "user_tools",
        "notebook_pending_cells",
        "notebook_cells",
        "notebook_left_out",
        "notebook_skipped",
        "from_dotenv",
    }
)
_WHEN_SET = frozenset(
    {
        "notebook_block_overhead",
        "breaker",
        "breaker_failures",
        "spills",
        "compactions",
        "cost",
        "cache",
        "cache_lines",
        "provider",
        "model",
    }
)


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
    pending_notebook: str | None = None,
    units: list[int] | None = None,
) -> Manifest:
    """``pending_notebook`` is the activity block the next run would add (counted as notebook).

    The user's pins are a system section, shown as their own part ("pins").
    """
    head = head_parts(sections=sections, tools=tools, memory_index=memory_index)
    system = head.pop("system_sections")
    pins_tokens, memory_tokens = head["pins"], head["memory"]
    tool_tokens, mcp_tokens = head["tool_schemas"], head["mcp_tool_schemas"]
    mcp_tools = [t for t in tools if is_mcp_tool(t["name"])]
    parts = message_parts(messages, units)
    pending_tokens = estimate_text(pending_notebook) if pending_notebook else 0
    parts["notebook"] += pending_tokens
    computed = (
        sum(s["tokens"] for s in system)
        + pins_tokens
        + tool_tokens
        + mcp_tokens
        + sum(parts.values())
        + memory_tokens
    )
    return Manifest(
        context_window=context_window,
        estimated_tokens=estimated_tokens + pending_tokens if estimated_tokens is not None else computed,
        anchor_tokens=anchor_tokens,
        threshold=threshold,
        message_count=len(messages),
        image_count=sum(len(m.parts) for m in messages),
        tools=[t["name"] for t in tools],
        mcp_tools=[t["name"] for t in mcp_tools],
        memory_included=memory_index is not None,
        memory_index=memory_index,
        parts={
            "system": sum(s["tokens"] for s in system),
            "pins": pins_tokens,
            "memory": memory_tokens,
            "tool_schemas": tool_tokens,
            "mcp_tool_schemas": mcp_tokens,
            **parts,
        },
        system_sections=system,
        notebook_pending_tokens=pending_tokens,
    )


def head_parts(
    *, sections: list[tuple[str, str]], tools: list[dict[str, Any]], memory_index: str | None
) -> dict[str, Any]:
    """What a request carries besides its messages, in tokens: the system prompt (and each of
    its sections, ``system_sections``), the pins, the memory index and the tool schemas. It
    costs what those cost, whatever the conversation's length (``%context --at``'s NOW figures)."""
    system = [
        {"title": title, "tokens": estimate_text(text)} for title, text in sections if title != PINS_SECTION
    ]
    # MCP servers' schemas are their own part: a well-known silent hog of the window.
    mcp_tools = [t for t in tools if is_mcp_tool(t["name"])]
    return {
        "system": sum(s["tokens"] for s in system),
        "system_sections": system,
        "pins": sum(estimate_text(text) for title, text in sections if title == PINS_SECTION),
        "memory": estimate_text(memory_index) if memory_index else 0,
        "tool_schemas": _schema_tokens([t for t in tools if not is_mcp_tool(t["name"])]),
        "mcp_tool_schemas": _schema_tokens(mcp_tools),
    }


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
