"""MCP tools as the agent's own: names, schemas, permissions and results.

A server tool becomes a ``Tool`` named ``mcp__<server>__<tool>`` (made safe for every
provider: ``[A-Za-z0-9_-]``, at most 64 characters, unique), offering the server's JSON
schema cleaned of what providers reject and the server's description. It goes through
``ToolRegistry.run`` like any tool, so permissions, error results and Layer 1 apply
unchanged. This module knows no transport: the ``call`` it is given does the talking.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..errors import ToolError
from ..tools.registry import Tool, ToolOutput, clean_schema
from .config import Trust

PREFIX = "mcp__"
MAX_NAME = 64  # OpenAI's limit on function names, the tighter of the providers'
# Keywords a provider rejects at the top of a tool's input schema (it must be a plain object).
_TOP_LEVEL_DROPPED = ("$schema", "$id", "anyOf", "oneOf", "allOf", "not", "enum", "const")


def is_mcp_tool(name: str) -> bool:
    """Whether a tool name is an MCP tool's (the ``mcp__`` prefix is pinned, SPEC §18)."""
    return name.startswith(PREFIX)


class McpArgs(BaseModel):
    """Arguments go to the server as they are: the server validates them against its schema."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class RemoteTool:
    """One tool as its server lists it (what ``%mcp`` shows and names are made from)."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None


@dataclass(frozen=True)
class McpTool(Tool):
    """A ``Tool`` whose schema is the server's, not a pydantic model's."""

    server: str = ""
    remote_name: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    # Allowed without asking in mode "ask" (the server's trust is "auto").
    preapproved: bool = False

    def input_schema(self) -> dict[str, Any]:
        return self.parameters


def safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", text) or "_"


def tool_names(tools: Iterable[RemoteTool]) -> dict[tuple[str, str], str]:
    """``(server, tool) -> mcp__server__tool``, safe and unique, stable for the same tools."""
    out: dict[tuple[str, str], str] = {}
    taken: set[str] = set()
    for tool in sorted(tools, key=lambda t: (t.server, t.name)):
        base = f"{PREFIX}{safe(tool.server)}__{safe(tool.name)}"
        if len(base) > MAX_NAME:
            digest = hashlib.sha1(f"{tool.server}\0{tool.name}".encode()).hexdigest()[:8]
            base = f"{base[: MAX_NAME - 9]}_{digest}"
        name, n = base, 2
        while name in taken:
            suffix = f"_{n}"
            name, n = base[: MAX_NAME - len(suffix)] + suffix, n + 1
        taken.add(name)
        out[(tool.server, tool.name)] = name
    return out


def provider_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    """The server's schema as every provider accepts it: an object with properties/required."""
    if not isinstance(schema, dict):
        schema = {}
    top = {k: v for k, v in schema.items() if k not in _TOP_LEVEL_DROPPED}
    if top.get("type") != "object":
        top["type"] = "object"
    if not isinstance(top.get("properties"), dict):
        top["properties"] = {}
    required = top.get("required")
    if not isinstance(required, list):
        top["required"] = []
    return clean_schema(top)


def side_effect(tool: RemoteTool, trust: Trust) -> bool:
    """Read-only only when the server says so (``readOnlyHint``) or is trusted to be."""
    if trust == "read-only":
        return False
    if trust in ("ask", "auto"):
        return True
    return tool.read_only_hint is not True


def make_tools(
    remote: Iterable[RemoteTool],
    trust: Callable[[str], Trust],
    call: Callable[[RemoteTool, dict[str, Any]], str | ToolOutput],
) -> list[McpTool]:
    remote = list(remote)
    names = tool_names(remote)
    out = []
    for tool in remote:
        server_trust = trust(tool.server)
        effect = side_effect(tool, server_trust)

        def handler(args: BaseModel, _tool: RemoteTool = tool) -> str | ToolOutput:
            return call(_tool, args.model_dump())

        out.append(
            McpTool(
                name=names[(tool.server, tool.name)],
                description=tool.description or f"{tool.name} (MCP server {tool.server})",
                args=McpArgs,
                handler=handler,
                side_effect=effect,
                server=tool.server,
                remote_name=tool.name,
                parameters=provider_schema(tool.input_schema),
                preapproved=effect and server_trust == "auto",
            )
        )
    out.sort(key=lambda t: t.name)
    return out


# --- results ---------------------------------------------------------------------------------


def image_note(media_type: str, data: str) -> str:
    """The text an image part becomes. The seam for image parts (SPEC §18 "Images"): when
    messages carry images, this is where a tool result's image is handed over instead."""
    size = _decoded_size(data)
    return f"[image from the tool: {media_type}, {size:,} bytes; images are not passed to the model yet]"


def result_text(result: Any) -> str:
    """A ``CallToolResult`` as the text of a tool result; ``isError`` raises ``ToolError``."""
    parts = [_part_text(block) for block in result.content or []]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=2))
    text = "\n".join(p for p in parts if p)
    if result.is_error:
        raise ToolError(text or "the MCP tool reported an error without a message")
    return text


# issue-14: image blocks of these types reach the model as images (the rest stay notes).
PASSED_IMAGES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def result_output(result: Any) -> str | ToolOutput:
    """Like ``result_text``, but the result's raster images go along as images (issue-14)."""
    pictures: list[tuple[bytes, str]] = []
    texts: list[str] = []
    for block in result.content or []:
        if getattr(block, "type", "") == "image" and block.mime_type in PASSED_IMAGES:
            try:
                raw = base64.b64decode(block.data, validate=False)
            except (ValueError, TypeError):
                raw = b""
            if raw:
                pictures.append((raw, block.mime_type))
                texts.append(f"[image from the tool: {block.mime_type}, {len(raw):,} bytes; shown as an image]")
                continue
        texts.append(_part_text(block))
    if not pictures:
        return result_text(result)
    text = "\n".join(t for t in texts if t)
    if result.is_error:
        raise ToolError(text or "the MCP tool reported an error without a message")
    return ToolOutput(text, tuple(pictures))


def _part_text(block: Any) -> str:
    kind = getattr(block, "type", "")
    if kind == "text":
        return block.text
    if kind == "image":
        return image_note(block.mime_type, block.data)
    if kind == "audio":
        return f"[audio from the tool: {block.mime_type}, {_decoded_size(block.data):,} bytes; not shown]"
    if kind == "resource_link":
        return f"[resource link: {block.name} <{block.uri}>]"
    if kind == "resource":
        res = block.resource
        text = getattr(res, "text", None)
        if text is not None:
            return f"[resource <{res.uri}>]\n{text}"
        blob = getattr(res, "blob", "") or ""
        return (
            f"[resource <{res.uri}>: {res.mime_type or 'binary'}, {_decoded_size(blob):,} bytes; not shown]"
        )
    return f"[{kind or 'unknown'} content from the tool; not shown]"


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (ValueError, TypeError):
        return len(data)
