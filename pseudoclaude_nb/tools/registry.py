"""Tools, the permission gate, and the registry that runs a ``ToolCall`` into a ``ToolResult``.

``ToolRegistry.run`` never raises for anything a model can cause (unknown tool, bad
arguments, refusal, a failing handler, a handler calling ``sys.exit()``): each becomes an
error *result* the model can read, so a tool failure never ends the run.
``KeyboardInterrupt`` is the exception: it propagates, and the runner turns it into
"interrupted by user" results.

``run`` is where a tool's output becomes what the conversation (and so the log) holds:
lone surrogates (file names that are not UTF-8, text from outside) are escaped there, with
a note line saying so (``escaped_text``), so no result can make the log unwritable.
"""

from __future__ import annotations

import builtins
import functools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from ..errors import ConfigError, ToolError
from ..messages import ToolCall, ToolResult
from ..textsafe import escape_surrogates

if TYPE_CHECKING:
    from ..hooks import RunHooks

# Hears a permission prompt go out (``None``) and its answer (allowed or not).
Tell = Callable[[bool | None], None]


def _silent(allowed: bool | None) -> None:
    """No run listens (a tool run outside a run, in a test or a magic)."""


PermissionMode = Literal["read-only", "ask", "auto"]
PERMISSION_MODES: tuple[str, ...] = get_args(PermissionMode)

NO_STDIN_REFUSAL = (
    "refused: permission mode 'ask' needs an answer but this kernel has no stdin; "
    "rerun with --mode auto to allow tools, or --mode read-only"
)

# Longest rendering of one argument value in the permission prompt; file contents and code
# can be huge, and the user only needs enough to recognise the call.
_PROMPT_VALUE_CHARS = 200


class ToolArgs(BaseModel):
    """Base for tool argument models: unknown argument names are errors, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class ToolOutput:
    """What a handler may return instead of text: the text plus what the code displayed.

    ``images`` are ``(bytes, media type)`` pairs (issue-14); the runner stores them in the
    session and the result message refers to the files.
    """

    text: str
    images: tuple[tuple[bytes, str], ...] = ()


@dataclass(frozen=True)
class Tool:
    """One tool: its name and description for the model, its argument model and its handler.

    ``side_effect`` tools (writing files, running code) need a yes in mode ``ask`` and are
    refused in mode ``read-only``.
    """

    name: str
    description: str
    args: type[BaseModel]
    handler: Callable[[Any], str | ToolOutput]
    side_effect: bool = False
    # What mode ``ask`` shows besides the call (the document tools: the cell before and after).
    preview: Callable[[Any], str] | None = None

    def input_schema(self) -> dict[str, Any]:
        # Built from pydantic once per argument model (~2 ms for a full tool set each step
        # otherwise); each caller gets its own copy.
        return orjson.loads(_schema_bytes(self.args))

    def schema(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema(),
        }


@functools.lru_cache(maxsize=1024)
def _schema_bytes(args: type[BaseModel]) -> bytes:
    return orjson.dumps(clean_schema(args.model_json_schema()))


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema a model reads easily: no pydantic titles, ``X | None`` shown as ``X``.

    The top level always has ``type``, ``properties`` and ``required`` because some providers
    reject an object schema without them.
    """
    out = _clean_node(schema)
    out.setdefault("type", "object")
    out.setdefault("properties", {})
    out.setdefault("required", [])
    return out


def _clean_node(node: Any) -> Any:
    if isinstance(node, list):
        return [_clean_node(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key in ("properties", "$defs"):
            # Keys of these maps are field names, not schema keywords: keep a field called "title".
            out[key] = {name: _clean_node(sub) for name, sub in value.items()}
        else:
            out[key] = _clean_node(value)
    any_of = out.get("anyOf")
    if isinstance(any_of, list) and len(any_of) == 2 and {"type": "null"} in any_of:
        # Optional arguments already have a default; "null" only adds noise for the model.
        (other,) = [s for s in any_of if s != {"type": "null"}]
        del out["anyOf"]
        out = {**other, **out}
    return out


def _value_brief(value: Any) -> str:
    if isinstance(value, str) and "\n" in value.rstrip("\n"):
        # File content or code: its size here, its text in the prompt's preview, never \n-escaped.
        n = len(value.splitlines())  # as read_file counts them: a final newline ends a line, adds none
        return f"<{n:,} line{'s' if n != 1 else ''}, {len(value):,} chars>"
    text = repr(value)
    if len(text) > _PROMPT_VALUE_CHARS:
        text = text[:_PROMPT_VALUE_CHARS] + f"… ({len(text)} chars)"
    return text


def describe_call(name: str, args: BaseModel) -> str:
    """``bash(command='ls')``: the call as the user sees it in a permission prompt."""
    parts = [f"{key}={_value_brief(value)}" for key, value in args.model_dump(exclude_unset=True).items()]
    return f"{name}({', '.join(parts)})"


def permission_prompt(
    name: str, args: BaseModel, lines: int = 12, width: int = 160, preview: str | None = None
) -> str:
    """The question for mode ``ask``: the call, the tool's ``preview`` (or else the first lines
    of any multi-line value as text), and the answers (no answer is no)."""
    out = [f"allow {describe_call(name, args)}?"]
    shown = args.model_dump(exclude_unset=True).items() if not preview else ()
    out += [f"  {line}" for line in (preview or "").splitlines()]
    for key, value in shown:
        if isinstance(value, str) and "\n" in value.rstrip("\n"):
            body = value.splitlines()
            out.append(f"  {key}:")
            out += [f"  │ {line[:width]}" for line in body[:lines]]
            if len(body) > lines:
                more = len(body) - lines
                out.append(f"  … ({more:,} more line{'s' if more != 1 else ''})")
    out.append(f"[y/N, a = always allow {name}]: ")
    return "\n".join(out)


class Permissions:
    """Decides whether a side-effecting tool call may run, by mode.

    ``ask`` is called with the prompt and returns the answer; by default it is whatever
    ``builtins.input`` is *at call time*, because ipykernel swaps in its own ``input`` for
    each cell it executes.
    """

    def __init__(
        self, mode: str = "ask", ask: Callable[[str], str] | None = None, *, tour: str | None = None
    ) -> None:
        if mode not in PERMISSION_MODES:
            raise ConfigError(f"unknown permission mode {mode!r}; use one of {', '.join(PERMISSION_MODES)}")
        self.mode: PermissionMode = cast(PermissionMode, mode)  # one of PERMISSION_MODES, checked above
        self._ask = ask
        self.always_allowed: set[str] = set()
        self.waited = 0.0  # seconds spent waiting for answers: the user's time, not the tool's
        # Side-effecting calls let through and refused: a run whose every change was refused
        # must not end looking like a success (the end line says so).
        self.allowed = 0
        self.refused = 0
        # A provider that plays a tour (the demo) asks once for all of it in mode ``ask``: one
        # question, not one per call; the answer holds for the run (issue 44).
        self.tour = tour
        self._tour_answer: str | None = None  # None: not asked yet; "" allowed; else the refusal

    def refusal(self, tool: Tool, args: BaseModel, tell: Tell | None = None) -> str | None:
        """Return ``None`` when the call may run, else the refusal message for the model.

        ``tell`` hears when a prompt goes out (``None``) and when it is answered (allowed or
        not): the run's hook for this call, so the tool line can say it waits for the user."""
        if not tool.side_effect:
            return None
        why = self._refusal(tool, args, tell or _silent)
        if why is None:
            self.allowed += 1
        else:
            self.refused += 1
        return why

    def _refusal(self, tool: Tool, args: BaseModel, tell: Tell) -> str | None:
        if self.mode == "auto":
            return None
        call = describe_call(tool.name, args)
        if self.mode == "read-only":
            return (
                f"refused: {call} changes files or runs code, and the permission mode is "
                "'read-only'; rerun with --mode ask or --mode auto to allow it"
            )
        if tool.name in self.always_allowed:
            return None
        if self.tour is not None:
            return self._tour_refusal(call, tell)
        ask = self._ask if self._ask is not None else builtins.input
        tell(None)
        asked = time.monotonic()
        try:
            answer = ask(permission_prompt(tool.name, args, preview=_preview(tool, args)))
        except (EOFError, NotImplementedError, OSError, RuntimeError):
            # NotImplementedError covers IPython's StdinNotImplementedError (no stdin frontend).
            tell(False)
            return NO_STDIN_REFUSAL
        finally:
            self.waited += time.monotonic() - asked
        answer = (answer or "").strip().lower()
        if answer in ("a", "always"):
            self.always_allowed.add(tool.name)
        allowed = answer in ("a", "always", "y", "yes")
        tell(allowed)
        return None if allowed else f"refused: the user did not allow {call}; ask the user how to proceed"

    def _tour_refusal(self, call: str, tell: Tell) -> str | None:
        """Mode ``ask`` with a tour: the first change asks for the whole tour, later ones
        follow that answer (no answer, or no stdin, is no)."""
        if self._tour_answer is None:
            ask = self._ask if self._ask is not None else builtins.input
            tell(None)
            asked = time.monotonic()
            try:
                answer = ask(f"{self.tour}\nallow all of it for this run? [y/N]: ")
            except (EOFError, NotImplementedError, OSError, RuntimeError):
                answer = None
            finally:
                self.waited += time.monotonic() - asked
            allowed = (answer or "").strip().lower() in ("y", "yes", "a", "always")
            tell(allowed)
            if answer is None:
                self._tour_answer = (
                    "refused: permission mode 'ask' needs an answer but this kernel has no stdin"
                )
            else:
                self._tour_answer = "" if allowed else "refused: the user did not allow the tour"
        if not self._tour_answer:
            return None
        return f"{self._tour_answer} ({call}); rerun with --mode auto to allow it"


def _preview(tool: Tool, args: BaseModel) -> str | None:
    if tool.preview is None:
        return None
    try:
        return tool.preview(args)
    except Exception:  # noqa: BLE001 - a preview that fails leaves the plain question
        return None


class ToolRegistry:
    """The tools offered to the model, by name, in the order they were added."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def names(self) -> list[str]:
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.schema() for tool in self._tools.values()]

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        """A new registry with only ``names`` (in that order); an unknown name is a ``KeyError``."""
        wanted = list(names)
        unknown = [n for n in wanted if n not in self._tools]
        if unknown:
            raise KeyError(f"unknown tools {unknown}; available: {', '.join(self._tools)}")
        return ToolRegistry(self._tools[n] for n in wanted)

    def run(self, call: ToolCall, permissions: Permissions, hooks: RunHooks | None = None) -> ToolResult:
        """Run one call; every failure short of an interrupt becomes an error result.

        ``hooks`` (the run's) hear about the call's permission prompt.

        The result's text has its lone surrogates escaped, with a note (``escaped_text``).
        """

        def error(content: str) -> ToolResult:
            return ToolResult(call_id=call.id, content=escaped_text(content), is_error=True)

        tool = self._tools.get(call.name)
        if tool is None:
            available = ", ".join(self._tools) or "(none)"
            return error(f"unknown tool {call.name!r}; available tools: {available}")
        try:
            args = tool.args.model_validate(call.arguments)
        except ValidationError as exc:
            return error(f"invalid arguments for {tool.name}: {_validation_problems(exc)}")
        tell = functools.partial(hooks.on_permission, call) if hooks is not None else None
        refused = permissions.refusal(tool, args, tell)
        if refused is not None:
            return error(refused)
        try:
            content = tool.handler(args)
        except ToolError as exc:
            # ToolError messages are written for the model already.
            return error(str(exc) or type(exc).__name__)
        except KeyboardInterrupt:
            raise  # Ctrl-C: the runner closes the call as interrupted and stops the run
        except Exception as exc:  # noqa: BLE001 - any tool failure is a result, not a crash
            message = str(exc)
            return error(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)
        except BaseException as exc:  # noqa: BLE001 - sys.exit() in a tool must not end %agent
            message = str(exc)
            return error(
                f"{type(exc).__name__}{': ' + message if message else ''} (raised by {tool.name}; "
                "the run goes on without it)"
            )
        images: tuple[tuple[bytes, str], ...] = ()
        if isinstance(content, ToolOutput):
            images = content.images
            content = content.text
        result = ToolResult(call_id=call.id, content=escaped_text(content) if content else "(no output)")
        return result.with_images(images) if images else result


# The note line after a result whose lone surrogates were escaped. File names from the OS
# carry undecodable bytes, always shown \xNN; other text may hold any surrogate (\uNNNN).
ESCAPE_NOTE = "(note: {what} not valid UTF-8; shown with \\xNN escapes)"
TEXT_ESCAPE_NOTE = "(note: some of this text was not valid UTF-8; shown with \\xNN or \\uNNNN escapes)"


def escaped_text(text: str) -> str:
    """``text`` as the conversation may hold it: lone surrogates escaped (``\\udce9`` is shown
    ``\\xe9``, the byte it stands for), and then a last line saying so. A tool that knows
    what they were (file names) escapes them itself and says so more precisely."""
    text, changed = escape_surrogates(text)
    if not changed:
        return text
    return text + "\n" + TEXT_ESCAPE_NOTE


def _validation_problems(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return "; ".join(problems)
