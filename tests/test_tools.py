"""The registry and the permission gate: every model mistake becomes an error result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import Field

from pseudoclaude_nb.errors import ConfigError, ToolError
from pseudoclaude_nb.messages import ToolCall
from pseudoclaude_nb.tools import (
    Permissions,
    Tool,
    ToolArgs,
    ToolRegistry,
    build_tools,
    resolve_in_workspace,
)
from pseudoclaude_nb.tools.registry import NO_STDIN_REFUSAL


class EchoArgs(ToolArgs):
    text: str = Field(description="what to echo")
    times: int = 1


def _echo_registry(*, side_effect: bool = False, handler=None) -> ToolRegistry:
    return ToolRegistry(
        [
            Tool(
                name="echo",
                description="echo text",
                args=EchoArgs,
                handler=handler or (lambda a: a.text * a.times),
                side_effect=side_effect,
            )
        ]
    )


def _call(name: str, **arguments) -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=arguments)


class FakeAsk:
    """Answers permission prompts from a list and records them."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        return self.answers.pop(0)


# --- build_tools and schemas -----------------------------------------------------------


def test_build_tools_names_and_side_effects(tmp_path: Path) -> None:
    registry = build_tools(tmp_path)
    assert registry.names() == [
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "grep",
        "bash",
    ]
    side_effects = {t.name for t in registry if t.side_effect}
    assert side_effects == {"write_file", "edit_file", "bash"}


def test_run_python_only_with_an_executor(tmp_path: Path) -> None:
    seen: list[str] = []

    def executor(code: str) -> str:
        seen.append(code)
        return "42"

    registry = build_tools(tmp_path, python_executor=executor)
    assert "run_python" in registry
    assert registry.get("run_python").side_effect
    result = registry.run(_call("run_python", code="6*7"), Permissions("auto"))
    assert (result.content, result.is_error) == ("42", False)
    assert seen == ["6*7"]


def test_schemas_are_clean_object_schemas(tmp_path: Path) -> None:
    schemas = build_tools(tmp_path, python_executor=lambda c: "").schemas()
    by_name = {s["name"]: s for s in schemas}
    for schema in schemas:
        assert set(schema) == {"name", "description", "input_schema"}
        assert schema["description"]
        inp = schema["input_schema"]
        assert inp["type"] == "object"
        assert isinstance(inp["properties"], dict)
        assert isinstance(inp["required"], list)
        assert '"title"' not in json.dumps(inp)
    # Pinned argument names (SPEC §12 / §17).
    assert list(by_name["read_file"]["input_schema"]["properties"]) == ["path", "offset", "limit"]
    assert by_name["read_file"]["input_schema"]["required"] == ["path"]
    assert list(by_name["edit_file"]["input_schema"]["properties"]) == [
        "path",
        "old_string",
        "new_string",
        "replace_all",
    ]
    assert list(by_name["grep"]["input_schema"]["properties"]) == ["pattern", "path", "glob"]
    assert by_name["grep"]["input_schema"]["properties"]["glob"]["type"] == "string"
    assert by_name["list_files"]["input_schema"]["required"] == []
    assert list(by_name["bash"]["input_schema"]["properties"]) == ["command", "timeout"]
    assert list(by_name["run_python"]["input_schema"]["properties"]) == ["code"]


def test_a_field_named_title_survives_schema_cleaning() -> None:
    class TitledArgs(ToolArgs):
        title: str

    tool = Tool(name="t", description="d", args=TitledArgs, handler=lambda a: a.title)
    assert tool.input_schema()["properties"] == {"title": {"type": "string"}}


def test_subset_keeps_only_the_named_tools(tmp_path: Path) -> None:
    registry = build_tools(tmp_path)
    small = registry.subset(["grep", "read_file"])
    assert small.names() == ["grep", "read_file"]
    assert registry.names()[0] == "read_file" and len(registry) == 6
    with pytest.raises(KeyError, match="nope"):
        registry.subset(["nope"])


def test_duplicate_tool_names_are_rejected() -> None:
    registry = _echo_registry()
    with pytest.raises(ValueError, match="echo"):
        registry.add(registry.get("echo"))


def test_exports_are_importable() -> None:
    import pseudoclaude_nb.tools as tools

    for name in tools.__all__:
        assert hasattr(tools, name), name
    assert resolve_in_workspace is tools.resolve_in_workspace


# --- run: errors become results --------------------------------------------------------


def test_unknown_tool_names_the_available_tools() -> None:
    result = _echo_registry().run(_call("ech0", text="x"), Permissions("auto"))
    assert result.is_error and result.call_id == "c1"
    assert "ech0" in result.content and "echo" in result.content


def test_bad_arguments_list_every_problem() -> None:
    result = _echo_registry().run(_call("echo", times="many", colour="red"), Permissions("auto"))
    assert result.is_error
    assert "invalid arguments for echo" in result.content
    assert "text: Field required" in result.content
    assert "times:" in result.content
    assert "colour:" in result.content  # unknown argument names are errors, not ignored


def test_arguments_are_validated_and_coerced() -> None:
    result = _echo_registry().run(_call("echo", text="ab", times="3"), Permissions("auto"))
    assert (result.content, result.is_error) == ("ababab", False)


def test_handler_exception_becomes_an_error_result() -> None:
    def boom(args: EchoArgs) -> str:
        raise ValueError("bad thing")

    result = _echo_registry(handler=boom).run(_call("echo", text="x"), Permissions("auto"))
    assert result.is_error
    assert result.content == "ValueError: bad thing"


def test_tool_error_message_is_passed_through() -> None:
    def fail(args: EchoArgs) -> str:
        raise ToolError("old_string not found")

    result = _echo_registry(handler=fail).run(_call("echo", text="x"), Permissions("auto"))
    assert (result.content, result.is_error) == ("old_string not found", True)


def test_keyboard_interrupt_propagates() -> None:
    def interrupted(args: EchoArgs) -> str:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _echo_registry(handler=interrupted).run(_call("echo", text="x"), Permissions("auto"))


def test_empty_output_is_marked() -> None:
    result = _echo_registry().run(_call("echo", text=""), Permissions("auto"))
    assert (result.content, result.is_error) == ("(no output)", False)


# --- permissions -----------------------------------------------------------------------


def test_unknown_mode_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="read-only, ask, auto"):
        Permissions("yolo")  # type: ignore[arg-type]


def test_read_only_refuses_side_effects_and_says_how_to_allow(tmp_path: Path) -> None:
    registry = build_tools(tmp_path)
    perms = Permissions("read-only", ask=FakeAsk())
    result = registry.run(_call("write_file", path="a.txt", content="x"), perms)
    assert result.is_error
    assert "read-only" in result.content and "--mode" in result.content
    assert not (tmp_path / "a.txt").exists()
    # Reading stays allowed.
    (tmp_path / "b.txt").write_text("hello\n")
    assert not registry.run(_call("read_file", path="b.txt"), perms).is_error


def test_ask_yes_runs_and_no_refuses() -> None:
    ask = FakeAsk("y", "n", "YES ", "whatever")
    registry = _echo_registry(side_effect=True)
    perms = Permissions("ask", ask=ask)
    assert registry.run(_call("echo", text="1"), perms).content == "1"
    refused = registry.run(_call("echo", text="2"), perms)
    assert refused.is_error and "did not allow" in refused.content
    assert registry.run(_call("echo", text="3"), perms).content == "3"
    assert registry.run(_call("echo", text="4"), perms).is_error
    assert ask.prompts[0] == "allow echo(text='1')?\n[y/N, a = always allow echo]: "


def test_ask_always_remembers_the_tool_for_this_permissions_object() -> None:
    ask = FakeAsk("a")
    registry = _echo_registry(side_effect=True)
    perms = Permissions("ask", ask=ask)
    for i in range(3):
        assert registry.run(_call("echo", text=str(i)), perms).content == str(i)
    assert len(ask.prompts) == 1
    # A new Permissions object asks again.
    fresh = Permissions("ask", ask=FakeAsk("n"))
    assert registry.run(_call("echo", text="x"), fresh).is_error


def test_ask_does_not_prompt_for_read_only_tools(tmp_path: Path) -> None:
    ask = FakeAsk()
    (tmp_path / "f.txt").write_text("x\n")
    result = build_tools(tmp_path).run(_call("read_file", path="f.txt"), Permissions("ask", ask=ask))
    assert not result.is_error and ask.prompts == []


@pytest.mark.parametrize("exc", [EOFError, NotImplementedError, OSError, RuntimeError])
def test_ask_without_stdin_refuses_clearly(exc: type[Exception]) -> None:
    def no_stdin(prompt: str) -> str:
        raise exc("no stdin")

    result = _echo_registry(side_effect=True).run(_call("echo", text="x"), Permissions("ask", ask=no_stdin))
    assert result.is_error
    assert result.content == NO_STDIN_REFUSAL
    assert "--mode auto" in result.content


def test_ask_defaults_to_builtins_input_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # ipykernel replaces builtins.input per cell, so the default must be looked up late.
    perms = Permissions("ask")
    monkeypatch.setattr("builtins.input", lambda prompt: "y")
    assert _echo_registry(side_effect=True).run(_call("echo", text="ok"), perms).content == "ok"


def test_permission_prompt_shortens_huge_values() -> None:
    ask = FakeAsk("n")
    _echo_registry(side_effect=True).run(_call("echo", text="x" * 10_000), Permissions("ask", ask=ask))
    assert len(ask.prompts[0]) < 400
    assert "chars)" in ask.prompts[0]


def test_auto_never_asks() -> None:
    ask = FakeAsk()
    result = _echo_registry(side_effect=True).run(_call("echo", text="x"), Permissions("auto", ask=ask))
    assert result.content == "x" and ask.prompts == []
