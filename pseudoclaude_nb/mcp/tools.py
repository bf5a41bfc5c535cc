"""MCP tools as the agent's own: names, schemas, permissions and results.

A server tool becomes a ``Tool`` named ``mcp__<server>__<tool>`` (made safe for every
provider: ``[A-Za-z0-9_-]``, at most 64 characters, unique), offering the server's JSON
schema cleaned of what providers reject and the server's description. It goes through
``ToolRegistry.run`` like any tool, so permissions, error results and Layer 1 apply
unchanged. This module knows no transport: the ``call`` it is given does the talking.

What a server sends is bounded here (a server may be hostile or broken): a tool whose input
schema is over ``MAX_SCHEMA_BYTES`` serialised or ``MAX_SCHEMA_DEPTH`` deep is left out with a
line naming it (``screen``), a description is cut at ``MAX_DESCRIPTION``, a result over
``MAX_RESULT_BYTES`` is an error result giving its size, and lone surrogates in a result are
escaped (``textsafe``) with a note saying so.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..errors import ToolError
from ..textsafe import escape_surrogates
from ..tools.registry import Tool, ToolOutput, clean_schema
from .config import Trust

PREFIX = "mcp__"
MAX_NAME = 64  # OpenAI's limit on function names, the tighter of the providers'
# Keywords a provider rejects at the top of a tool's input schema (it must be a plain object).
_TOP_LEVEL_DROPPED = ("$schema", "$id", "anyOf", "oneOf", "allOf", "not", "enum", "const")
# Caps on what a server sends. A real tool's schema is a few KiB (mcp-server-git's largest is
# under 2 KiB); every schema is sent with every request, so one 10 MB schema would fill the
# window many times over. 8 MiB of result text is ~2M tokens: more than any window, already
# spilled by Layer 1; anything bigger is a runaway.
MAX_SCHEMA_BYTES = 64 << 10
MAX_SCHEMA_DEPTH = 32
MAX_DESCRIPTION = 4_000  # characters
MAX_RESULT_BYTES = 8 << 20
SURROGATE_NOTE = (
    "[note: the tool's result held invalid Unicode (lone surrogates); they are written as \\uXXXX]"
)


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


def schema_depth(value: Any, limit: int) -> int:
    """How deep ``value`` nests (iteratively: a hostile schema must not exhaust the stack),
    counting no further than ``limit + 1``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, (dict, list)):
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children)
    return deepest


def screen(tools: Iterable[RemoteTool]) -> tuple[list[RemoteTool], list[str]]:
    """The tools fit to offer (descriptions cut to ``MAX_DESCRIPTION``), and one line for each
    left out, naming it and why."""
    kept: list[RemoteTool] = []
    left_out: list[str] = []
    for tool in tools:
        name = escape_surrogates(tool.name)[0]
        depth = schema_depth(tool.input_schema, MAX_SCHEMA_DEPTH)
        if depth > MAX_SCHEMA_DEPTH:
            left_out.append(
                f"tool {name!r} is left out: its input schema nests deeper than {MAX_SCHEMA_DEPTH} levels"
            )
            continue
        size = len(json.dumps(tool.input_schema, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if size > MAX_SCHEMA_BYTES:
            left_out.append(
                f"tool {name!r} is left out: its input schema is {size:,} bytes, over the cap of "
                f"{MAX_SCHEMA_BYTES:,}"
            )
            continue
        description = escape_surrogates(tool.description)[0]
        if len(description) > MAX_DESCRIPTION:
            description = description[:MAX_DESCRIPTION] + " … [description cut]"
        kept.append(replace(tool, description=description))
    return kept, left_out


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
    text = _bounded("\n".join(p for p in parts if p))
    if result.is_error:
        raise ToolError(text or "the MCP tool reported an error without a message")
    return text


def _bounded(text: str, extra: int = 0) -> str:
    """``text`` if it is under the cap (with ``extra`` image bytes), its surrogates escaped;
    else the ``ToolError`` that says how big it was."""
    size = len(text.encode("utf-8", "surrogatepass")) + extra
    if size > MAX_RESULT_BYTES:
        raise ToolError(
            f"the MCP tool's result was {size:,} bytes, over the cap of {MAX_RESULT_BYTES:,}; it was "
            "dropped. Ask for less (a narrower query, a page, a limit argument)"
        )
    text, escaped = escape_surrogates(text)
    return f"{text}\n{SURROGATE_NOTE}" if escaped else text


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
                texts.append(
                    f"[image from the tool: {block.mime_type}, {len(raw):,} bytes; shown as an image]"
                )
                continue
        texts.append(_part_text(block))
    if not pictures:
        return result_text(result)
    text = _bounded("\n".join(t for t in texts if t), sum(len(raw) for raw, _ in pictures))
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
