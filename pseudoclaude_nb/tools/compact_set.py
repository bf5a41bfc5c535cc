"""The compact tool set for small windows (``PseudoClaude.compact_tools``, issue 32).

With a 2,048-token window the full schemas alone were 1,824 real tokens. The compact set
keeps the file and shell tools (and rollover's and memory's, which a run needs when they
are there), each with the first sentence of its description and no per-argument
descriptions: the same tools and arguments, about a third of the tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from .registry import Tool, ToolRegistry

KEPT = (
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "grep",
    "bash",
    "read_memory",
    "new_context",
    "search_history",
)
DESCRIPTION_CHARS = 160
# Schemas above this share of the window get a one-time notice that the compact set exists.
TOOLS_SHARE_NOTICE = 0.25


@dataclass(frozen=True)
class CompactTool(Tool):
    """A tool with a short description and an argument schema without descriptions."""

    def input_schema(self) -> dict[str, Any]:
        return _without_descriptions(super().input_schema())


def _without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_descriptions(v) for k, v in node.items() if k not in ("description", "title")}
    if isinstance(node, list):
        return [_without_descriptions(v) for v in node]
    return node


def first_sentence(text: str, limit: int = DESCRIPTION_CHARS) -> str:
    text = " ".join(text.split())
    end = text.find(". ")
    short = text if end < 0 else text[: end + 1]
    return short if len(short) <= limit else short[: limit - 1].rstrip() + "…"


def compact(tools: ToolRegistry) -> ToolRegistry:
    """``tools`` cut to the compact set, in the same order."""
    kept = []
    for tool in tools:
        if tool.name not in KEPT:
            continue
        values = {f.name: getattr(tool, f.name) for f in fields(Tool)}
        values["description"] = first_sentence(tool.description)
        kept.append(CompactTool(**values))
    return ToolRegistry(kept)
