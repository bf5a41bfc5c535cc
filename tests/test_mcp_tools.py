"""MCP tools as the agent's: names, provider-safe schemas, permissions, result text."""

from __future__ import annotations

import re

import mcp_types as types
import pytest

from pseudoclaude_nb.errors import ToolError
from pseudoclaude_nb.mcp.tools import (
    MAX_NAME,
    RemoteTool,
    make_tools,
    provider_schema,
    result_text,
    side_effect,
    tool_names,
)
from pseudoclaude_nb.messages import ToolCall
from pseudoclaude_nb.tools import Permissions, ToolRegistry


def remote(server: str, name: str, read_only: bool | None = None, schema: dict | None = None) -> RemoteTool:
    return RemoteTool(server, name, f"does {name}", schema or {"type": "object"}, read_only_hint=read_only)


def test_names_are_prefixed_safe_short_and_unique() -> None:
    tools = [
        remote("git", "git_status"),
        remote("my server", "do.thing"),
        remote("my_server", "do_thing"),  # collides with the one above once made safe
        remote("x" * 40, "y" * 40),
        remote("x" * 40, "y" * 41),
    ]
    names = tool_names(tools)
    assert names[("git", "git_status")] == "mcp__git__git_status"
    assert names[("my server", "do.thing")] == "mcp__my_server__do_thing"
    assert names[("my_server", "do_thing")] == "mcp__my_server__do_thing_2"
    assert len(set(names.values())) == len(tools)
    for name in names.values():
        assert (
            re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name) and len(name) <= MAX_NAME and name.startswith("mcp__")
        )
    assert tool_names(reversed(tools)) == names  # stable whatever order servers list them in


def test_schema_cleaned_for_providers() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "getArguments",
        "type": "object",
        "properties": {
            "title": {"title": "Title", "type": "string"},
            "n": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "anyOf": [{"required": ["title"]}, {"required": ["n"]}],
    }
    out = provider_schema(schema)
    assert out == {
        "type": "object",
        "properties": {"title": {"type": "string"}, "n": {"type": "integer"}},
        "required": [],
    }
    assert provider_schema(None) == {"type": "object", "properties": {}, "required": []}
    assert provider_schema({"type": "string"})["type"] == "object"


@pytest.mark.parametrize(
    ("hint", "trust", "effect"),
    [
        (True, "hints", False),
        (None, "hints", True),
        (False, "hints", True),
        (True, "ask", True),
        (None, "read-only", False),
        (None, "auto", True),
    ],
)
def test_side_effect_from_hint_and_trust(hint: bool | None, trust: str, effect: bool) -> None:
    assert side_effect(remote("s", "t", hint), trust) is effect  # type: ignore[arg-type]


def test_read_only_mode_follows_the_hints_through_the_registry() -> None:
    calls: list[tuple[str, dict]] = []

    def call(tool: RemoteTool, args: dict) -> str:
        calls.append((tool.name, args))
        return "ok"

    tools = make_tools([remote("s", "look", True), remote("s", "change", None)], lambda s: "hints", call)
    registry = ToolRegistry(tools)
    read_only = Permissions("read-only")
    looked = registry.run(ToolCall(id="1", name="mcp__s__look", arguments={"q": 1}), read_only)
    changed = registry.run(ToolCall(id="2", name="mcp__s__change", arguments={"path": "x"}), read_only)
    assert (looked.is_error, looked.content) == (False, "ok")
    assert (
        changed.is_error and "read-only" in changed.content and "mcp__s__change(path='x')" in changed.content
    )
    assert calls == [("look", {"q": 1})]


def test_auto_trust_is_preapproved_but_still_side_effecting() -> None:
    (tool,) = make_tools([remote("s", "change")], lambda s: "auto", lambda t, a: "done")
    assert tool.side_effect and tool.preapproved
    permissions = Permissions("ask", ask=lambda prompt: pytest.fail("asked"))
    permissions.always_allowed.add(tool.name)
    assert ToolRegistry([tool]).run(ToolCall(id="1", name=tool.name), permissions).content == "done"


def result(*content: object, is_error: bool = False, structured: dict | None = None) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), is_error=is_error, structured_content=structured)


def test_result_parts_become_text() -> None:
    text = result_text(
        result(
            types.TextContent(type="text", text="hello"),
            types.ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"),
            types.EmbeddedResource(
                type="resource", resource=types.TextResourceContents(uri="memo://1", text="memo body")
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(
                    uri="file:///a.bin", blob="AAAA", mime_type="application/x"
                ),
            ),
            types.ResourceLink(type="resource_link", uri="file:///big.csv", name="big.csv"),
        )
    )
    assert text.splitlines() == [
        "hello",
        "[image from the tool: image/png, 8 bytes; images are not passed to the model yet]",
        "[resource <memo://1>]",
        "memo body",
        "[resource <file:///a.bin>: application/x, 3 bytes; not shown]",
        "[resource link: big.csv <file:///big.csv>]",
    ]


def test_structured_only_result_is_json() -> None:
    assert result_text(result(structured={"a": 1})) == '{\n  "a": 1\n}'


def test_is_error_becomes_tool_error() -> None:
    with pytest.raises(ToolError, match="bad timezone"):
        result_text(result(types.TextContent(type="text", text="bad timezone"), is_error=True))
    with pytest.raises(ToolError, match="without a message"):
        result_text(result(is_error=True))
