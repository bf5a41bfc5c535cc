"""The user's own functions as tools: ``from pseudoclaude_nb import tool`` (SPEC §18).

``@tool`` or ``@tool(read_only=True, name=None, description=None)`` registers a function
for this process's agent (one kernel is one process). The argument schema is a pydantic
model built from the signature's type hints, with descriptions from the docstring, so a
call is validated before the function runs and a bad call is an error result the model
can read. The return value becomes the result text (a str cut at ``RESULT_CAP``, anything
else by a repr that stops at it, ``bounded_repr``; the result then goes through Layer 1 like
any other); an exception becomes an error result with its last frames — ``SystemExit`` and
other ``BaseException`` subclasses too, only ``KeyboardInterrupt`` stops the run. A function not
marked ``read_only`` is side-effecting: it asks in ``ask`` mode and is refused in
``read-only``. Defining the function again re-registers it. Names in the MCP namespace
(``mcp__…``) and the agent's own tool names are refused.
"""

from __future__ import annotations

import inspect
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any, get_type_hints

from pydantic import Field, create_model

from ..errors import ToolError
from ..redact import redacted_head
from .registry import Tool, ToolArgs

# Characters of a result, applied before any copy or repr (a 500 MB return value must not
# cost gigabytes). Layer 1 keeps the whole result in a spill file the model reads with
# read_file/grep (only a 2,000-byte preview enters the context), so the cap need only keep
# that file useful: 16 MiB, under bash's 20 MiB output cap. The cut costs twice the cap at
# its peak; the whole run (spill: redacted, encoded, hashed; the index) about 6x (measured).
RESULT_CAP = 16 << 20
# The MCP servers' tools are named mcp__<server>__<tool> (SPEC §18): a user function there
# could pass for a server's tool in a listing or a permission prompt.
MCP_PREFIX = "mcp__"
# A repr is for reading: past a million characters nobody does, and building it costs a
# Python step per item. A function can return a str (json.dumps, to_csv) to pass more.
REPR_CAP = 1_000_000
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
        except KeyboardInterrupt:
            raise  # the user's Ctrl-C stops the run, as for any tool
        except BaseException as exc:  # noqa: BLE001 - sys.exit() too: the model reads what went wrong
            from ..notebook.record import error_info

            info = error_info(exc, label=_frame_label, frames=3)
            raise ToolError(f"{self.name} raised " + info.render()) from exc
        if value is None:
            return "(returned None)"
        if isinstance(value, str):
            if len(value) <= RESULT_CAP:
                return value
            # An ASCII note: "…" would make an ASCII head a 2-byte-per-character string, twice the memory.
            return (
                redacted_head(value, RESULT_CAP) + f"\n[cut at {RESULT_CAP:,} of {len(value):,} characters]"
            )
        return bounded_repr(value, REPR_CAP)


# --- a repr that stops at a limit -------------------------------------------------------------

_CONTAINERS: dict[type, tuple[str, str]] = {
    list: ("[", "]"),
    tuple: ("(", ")"),
    set: ("{", "}"),
    frozenset: ("frozenset({", "})"),
    dict: ("{", "}"),
}
_SLICED = (str, bytes, bytearray)
_SCALARS = frozenset({int, float, bool, complex, type(None)})


def bounded_repr(value: Any, limit: int) -> str:
    """``repr(value)``, built piece by piece and stopped once ``limit`` characters are out.

    Lists, tuples, sets, dicts, strings and bytes (exact types) are walked here, so a
    500 MB ``bytes`` or a list of a billion items costs about ``limit`` characters, never
    their full repr; within the limit the text is the built-in ``repr``. Other objects use
    their own ``__repr__`` (cut after): numpy and pandas bound theirs already.
    """
    chunks: list[str] = []
    parts: list[str] = []
    size = 0
    for piece in _repr_pieces(value, limit):
        parts.append(piece)
        size += len(piece)
        if len(parts) >= 4096:  # small pieces cost ~50 bytes each as objects: join them as we go
            chunks.append("".join(parts))
            parts.clear()
        if size > limit:
            break
    chunks.append("".join(parts))
    text = "".join(chunks)
    if size <= limit:
        return text
    return redacted_head(text, limit) + f"\n[repr of a {type(value).__name__} cut at {limit:,} characters]"


def _repr_pieces(value: Any, limit: int) -> Iterator[str]:
    """The pieces of ``repr(value)`` in order, depth-first without recursion."""
    open_ids: set[int] = set()  # containers being walked: a list inside itself is [...]
    stack: list[Iterator[Any]] = [iter((value,))]  # each open container's remaining work
    while stack:
        item: Any = next(stack[-1], _END)
        if item is _END:
            stack.pop()
            continue
        kind = type(item)
        if kind is _Text:
            yield item.text
        elif kind is _Close:
            open_ids.discard(item.ident)
            yield item.text
        elif kind in _CONTAINERS:
            if id(item) in open_ids:
                yield "[...]" if kind is list else "{...}"
            elif not item:
                yield _EMPTY[kind]
            else:
                start, close = _CONTAINERS[kind]
                open_ids.add(id(item))
                yield start
                stack.append(
                    _members(
                        item, kind, _Close(id(item), ",)" if kind is tuple and len(item) == 1 else close)
                    )
                )
        elif kind in _SLICED:
            # Sliced past the limit first: only what can be shown is ever copied.
            yield repr(item[: limit + 1]) if len(item) > limit else repr(item)
        else:
            yield repr(item)


def _members(obj: Any, kind: type, close: _Close) -> Iterator[Any]:
    """A container's work: its items (a dict's as key, ": ", value) with separators, then its close.

    Runs of small scalars are rendered by the built-in ``repr`` a batch at a time: item by
    item, a list of a million ints took seconds.
    """
    first = True
    members = iter(obj.items() if kind is dict else obj)
    while batch := list(islice(members, 512)):
        flat = batch if kind is not dict else [x for pair in batch for x in pair]
        if _SCALARS.issuperset(map(type, flat)) or all(map(_small, flat)):
            text = (
                ", ".join(f"{k!r}: {v!r}" for k, v in batch) if kind is dict else ", ".join(map(repr, batch))
            )
            yield _Text(text if first else ", " + text)
            first = False
            continue
        for member in batch:
            if not first:
                yield _COMMA
            first = False
            if kind is dict:
                yield member[0]
                yield _COLON
                yield member[1]
            else:
                yield member
    yield close


def _small(value: Any) -> bool:
    """Whether the built-in ``repr`` of ``value`` is short and cheap: a scalar, a short
    string, or a short flat list or tuple of those (rows like ``[1, 'a']``)."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind in _SLICED:
        return len(value) <= 256
    if kind is list or kind is tuple:
        return len(value) <= 16 and all(
            type(m) in _SCALARS or (type(m) in _SLICED and len(m) <= 256) for m in value
        )
    return False


@dataclass(frozen=True, slots=True)
class _Text:
    text: str


@dataclass(frozen=True, slots=True)
class _Close:
    ident: int
    text: str


_COMMA, _COLON = _Text(", "), _Text(": ")
_EMPTY: dict[type, str] = {list: "[]", tuple: "()", set: "set()", frozenset: "frozenset()", dict: "{}"}
_END = object()


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
    tool_name = name if name else getattr(function, "__name__", "")
    if not _NAME.match(tool_name):
        raise ValueError(
            f"tool name {tool_name!r} must be letters, digits, '_' or '-' (at most 64); pass name=..."
        )
    if tool_name in RESERVED:
        raise ValueError(f"{tool_name!r} is one of the agent's own tools; pass @tool(name=...) to rename it")
    if tool_name.lower().startswith(MCP_PREFIX):
        raise ValueError(
            f"tool name {tool_name!r} starts with {MCP_PREFIX!r}, the namespace of MCP servers' tools; "
            "pass @tool(name=...) with another name"
        )
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
