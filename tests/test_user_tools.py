"""``@tool``: the user's functions as tools, schema from hints and docstring, validated calls."""

from __future__ import annotations

from typing import Literal

import pytest

from pseudoclaude_nb import tool
from pseudoclaude_nb.messages import ToolCall
from pseudoclaude_nb.tools import Permissions
from pseudoclaude_nb.tools import user as user_tools
from pseudoclaude_nb.tools.registry import ToolRegistry


@pytest.fixture(autouse=True)
def _empty_registry():
    user_tools.clear()
    yield
    user_tools.clear()


def _registry() -> ToolRegistry:
    return ToolRegistry(t.as_tool() for t in user_tools.user_tools())


def _call(tool_name: str, mode: str = "auto", ask=None, **arguments) -> tuple[str, bool]:
    call = ToolCall(id="c1", name=tool_name, arguments=arguments)
    result = _registry().run(call, Permissions(mode, ask=ask))
    return result.content, result.is_error


def test_schema_comes_from_hints_and_docstring() -> None:
    @tool
    def growth(values: list[float], period: Literal["month", "year"] = "month") -> float:
        """Growth rate of a series between its first and last value.

        Args:
            values: the series, oldest first.
            period: how to label the rate.
        """
        return values[-1] / values[0] - 1

    (registered,) = user_tools.user_tools()
    schema = registered.as_tool().schema()
    assert schema["name"] == "growth"
    assert schema["description"] == "Growth rate of a series between its first and last value."
    props = schema["input_schema"]["properties"]
    assert props["values"] == {
        "type": "array",
        "items": {"type": "number"},
        "description": "the series, oldest first.",
    }
    assert props["period"]["enum"] == ["month", "year"] and props["period"]["default"] == "month"
    assert schema["input_schema"]["required"] == ["values"]
    assert growth([1.0, 2.0]) == 1.0  # the function itself is unchanged


def test_arguments_are_validated_before_the_call() -> None:
    calls = []

    @tool(read_only=True)
    def scale(x: int, factor: float = 2.0) -> float:
        calls.append(x)
        return x * factor

    assert _call("scale", x=3) == ("6.0", False)
    text, is_error = _call("scale", x="three")
    assert is_error and "invalid arguments for scale" in text and "x" in text
    text, is_error = _call("scale", x=1, extra=2)
    assert is_error and "extra" in text
    assert calls == [3]


def test_return_values_become_text_and_exceptions_error_results() -> None:
    @tool(read_only=True, name="stats", description="Summary statistics.")
    def summary(values: list[int]) -> dict:
        if not values:
            raise ValueError("no values to summarise")
        return {"n": len(values), "mean": sum(values) / len(values)}

    assert _call("stats", values=[1, 2, 3]) == ("{'n': 3, 'mean': 2.0}", False)
    text, is_error = _call("stats", values=[])
    assert is_error and "stats raised ValueError: no values to summarise" in text
    assert "raise ValueError" in text  # the last frames, with the failing line


def test_side_effecting_unless_read_only() -> None:
    @tool
    def save(name: str) -> str:
        return f"saved {name}"

    @tool(read_only=True)
    def peek(name: str) -> str:
        return f"peeked {name}"

    assert "refused" in _call("save", mode="read-only", name="a")[0]
    assert _call("peek", mode="read-only", name="a") == ("peeked a", False)
    asked = []
    assert _call("save", mode="ask", ask=lambda q: asked.append(q) or "y", name="b") == ("saved b", False)
    assert asked and asked[0].startswith("allow save(name='b')")


def test_redefining_re_registers_and_names_are_checked() -> None:
    @tool
    def f(x: int) -> int:
        return x

    @tool  # a notebook cell run again
    def f(x: int, y: int = 0) -> int:
        return x + y

    (only,) = user_tools.user_tools()
    assert "y" in only.args.model_fields
    with pytest.raises(ValueError, match="one of the agent's own tools"):
        tool(lambda path: path, name="read_file")
    with pytest.raises(ValueError, match="must be letters"):
        tool(lambda: 1, name="bad name")


def test_long_results_are_capped() -> None:
    @tool(read_only=True)
    def huge() -> list:
        return list(range(1_000_000))

    text, is_error = _call("huge")
    assert not is_error and len(text) < user_tools.RESULT_CAP + 100 and text.endswith("characters]")


def test_docstring_styles() -> None:
    summary, params = user_tools.parse_docstring(
        "Do it.\n\n:param a: first\n:param int b: second\n:returns: nothing"
    )
    assert summary == "Do it." and params == {"a": "first", "b": "second"}
    summary, params = user_tools.parse_docstring(
        "Numpy style.\n\nParameters\n----------\nx : int\n    the x\n    value\n\nReturns\n-------\nint"
    )
    assert params == {"x": "the x value"}
