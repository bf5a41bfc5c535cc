"""The user's own functions as tools: ``from pseudoclaude_nb import tool`` (SPEC §18).

``@tool`` or ``@tool(read_only=True, name=None, description=None)`` registers a function
for this process's agent (one kernel is one process). The argument schema is a pydantic
model built from the signature's type hints, with descriptions from the docstring, so a
call is validated before the function runs and a bad call is an error result the model
can read. The return value becomes the result text (non-strings by ``repr``, capped; the
result then goes through Layer 1 like any other); an exception becomes an error result
with its last frames. A function not marked ``read_only`` is side-effecting: it asks in
``ask`` mode and is refused in ``read-only``. Defining the function again re-registers it.
"""

from __future__ import annotations

import inspect
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import Field, create_model

from ..errors import ToolError
from .registry import Tool, ToolArgs

RESULT_CAP = 1_000_000  # characters of a repr; Layer 1 spills what exceeds spill_bytes
# The package's own tool names (SPEC §12, §18): a user function may not shadow one.
RESERVED = frozenset(
    {
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "grep",
        "bash",
        "run_python",
        "read_memory",
        "new_context",
        "search_history",
        "read_cells",
        "inspect_variable",
        "propose_cell",
    }
)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,63}$")

_registry: dict[str, UserTool] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class UserTool:
    name: str
    description: str
    function: Callable[..., Any]
    args: type[ToolArgs]
    read_only: bool

    def as_tool(self) -> Tool:
        return Tool(
            name=self.name,
            description=self.description,
            args=self.args,
            handler=self._call,
            side_effect=not self.read_only,
        )

    def _call(self, args: ToolArgs) -> str:
        values = {field: getattr(args, field) for field in type(args).model_fields}
        try:
            value = self.function(**values)
        except Exception as exc:  # noqa: BLE001 - the model reads what went wrong
            from ..notebook.record import error_info

            info = error_info(exc, label=_frame_label, frames=3)
            raise ToolError(f"{self.name} raised " + info.render()) from exc
        if value is None:
            return "(returned None)"
        text = value if isinstance(value, str) else repr(value)
        if len(text) > RESULT_CAP:
            text = text[:RESULT_CAP] + f"\n… [cut at {RESULT_CAP:,} of {len(text):,} characters]"
        return text


def _frame_label(filename: str) -> str | None:
    # Frames inside this module are the call machinery, not the user's code.
    return None if filename == __file__ else filename.rsplit("/", 1)[-1]


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    read_only: bool = False,
    name: str | None = None,
    description: str | None = None,
) -> Any:
    """Register ``fn`` as a tool the agent can call; returns ``fn`` unchanged.

    ``@tool`` uses the function's name and docstring; ``@tool(read_only=True)`` marks a
    function that changes nothing (allowed in ``read-only`` mode, never asked about).
    """

    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        user_tool = make_user_tool(function, read_only=read_only, name=name, description=description)
        with _lock:
            _registry[user_tool.name] = user_tool
        return function

    return register(fn) if fn is not None else register


def make_user_tool(
    function: Callable[..., Any],
    *,
    read_only: bool = False,
    name: str | None = None,
    description: str | None = None,
) -> UserTool:
    if not callable(function):
        raise TypeError(f"@tool needs a function, not {type(function).__name__}")
    tool_name = name or getattr(function, "__name__", "")
    if not _NAME.match(tool_name):
        raise ValueError(
            f"tool name {tool_name!r} must be letters, digits, '_' or '-' (at most 64); pass name=..."
        )
    if tool_name in RESERVED:
        raise ValueError(f"{tool_name!r} is one of the agent's own tools; pass @tool(name=...) to rename it")
    doc = inspect.getdoc(function) or ""
    summary, params = parse_docstring(doc)
    text = description or summary or f"The user's function {tool_name}."
    return UserTool(tool_name, text, function, args_model(function, tool_name, params), read_only)


def args_model(function: Callable[..., Any], tool_name: str, docs: dict[str, str]) -> type[ToolArgs]:
    """A pydantic model of ``function``'s parameters (extra arguments forbidden)."""
    signature = inspect.signature(function)
    try:
        hints = get_type_hints(function)
    except Exception:  # noqa: BLE001 - unresolvable string annotations: fall back to Any
        hints = {}
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue  # not expressible in a schema; the call passes named arguments only
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"@tool: parameter {param.name!r} of {tool_name} is positional-only")
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, Field(default, description=docs.get(param.name)))
    try:
        model = create_model(f"{tool_name}_args", __base__=ToolArgs, **fields)
        model.model_json_schema()
    except Exception as exc:  # noqa: BLE001 - say which hint is the problem
        raise TypeError(
            f"@tool: cannot build a JSON schema for {tool_name}'s parameters ({exc}); use JSON-friendly "
            "type hints (str, int, float, bool, list, dict, Literal, pydantic models)"
        ) from exc
    return model


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params)\s*:?\s*$", re.IGNORECASE)
_GOOGLE_PARAM = re.compile(r"^\s+\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")
_NUMPY_PARAM = re.compile(r"^(\w+)\s*:\s*.*$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(first paragraph, {parameter: description}) from Google, NumPy or Sphinx style."""
    lines = doc.splitlines()
    summary_lines: list[str] = []
    for line in lines:
        if not line.strip() or _SECTION.match(line.strip()) or line.strip().startswith(":param"):
            break
        summary_lines.append(line.strip())
    params: dict[str, str] = {}
    in_section = False
    current: str | None = None
    numpy_style = False
    for i, line in enumerate(lines):
        sphinx = _SPHINX_PARAM.match(line)
        if sphinx:
            params[sphinx.group(1)] = sphinx.group(2).strip()
            current = sphinx.group(1)
            continue
        if _SECTION.match(line.strip()):
            in_section, current = True, None
            numpy_style = i + 1 < len(lines) and set(lines[i + 1].strip()) == {"-"}
            continue
        if not in_section:
            continue
        if numpy_style:
            if set(line.strip()) == {"-"}:
                continue
            match = _NUMPY_PARAM.match(line)
            if match and not line.startswith(" "):
                current = match.group(1)
                params[current] = ""
            elif line.strip() and current:
                params[current] = (params[current] + " " + line.strip()).strip()
            elif not line.strip() and params:
                in_section = False
            continue
        match = _GOOGLE_PARAM.match(line)
        if (
            match
            and line.startswith(" ")
            and (current is None or _indent(line) <= _indent_of(lines, current))
        ):
            current = match.group(1)
            params[current] = match.group(2).strip()
        elif line.strip() and current and line.startswith(" "):
            params[current] = (params[current] + " " + line.strip()).strip()
        elif line.strip() and not line.startswith(" "):
            in_section, current = False, None
    return " ".join(summary_lines), params


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _indent_of(lines: list[str], name: str) -> int:
    for line in lines:
        match = _GOOGLE_PARAM.match(line)
        if match and match.group(1) == name:
            return _indent(line)
    return 0


def user_tools() -> list[UserTool]:
    """The functions registered in this process, in registration order."""
    with _lock:
        return list(_registry.values())


def unregister(name: str) -> bool:
    with _lock:
        return _registry.pop(name, None) is not None


def clear() -> None:
    with _lock:
        _registry.clear()
