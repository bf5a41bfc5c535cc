"""The scripted provider: plays a JSON script, offline and deterministic.

Used by tests, the teaching notebooks and the demo. Each agent request consumes one
turn, each summary request one of ``summaries``, each memory update one item of
``memory_ops``. Running out, or a malformed script, is a loud ``ScriptError`` that names
the script and the problem — never a silent default answer.

A turn may also carry ``reasoning`` (streamed as thinking before the answer, kept with the
message, never shown as the answer) and a ``stop_reason``: ``"max_tokens"`` (a text turn
is cut there; a turn with tool calls ends inside its last call, whose arguments never
arrive whole) or ``"refusal"`` (the text is the refusal). ``max_output_tokens`` at the top
level is the scripted model's output cap (default: the agent's request cap, so a cut tool
call is not retried); a larger one lets the run retry a cut step once, with the next turn.
``summary_seconds`` holds every summary request that long before it answers, so a person
watching sees the gauge say "compacting…" (a scripted summary is otherwise instant);
``PSEUDOCLAUDE_DEMO_PACE=0`` turns it off with the rest of the pacing (tests, recorded outputs).

Server-side compaction, emulated (issue 31, ``--strategy api``): with ``server_context`` set,
an agent request behaves as the Anthropic documentation describes the ``compact_20260112``
edit. The provider reads the request from its last compaction block on (it drops what comes
before one); when that input reaches the trigger, it compacts: the answer begins with a
``compaction`` block whose summary is the script's next ``summaries`` entry (else a short
digest of what it replaces: the first request, files touched, the last words), the answer's
usage counts the compacted context (the block plus system prompt and tools), and the
compaction's own request goes under the usage's ``compaction_*`` counts, as the API bills
``usage.iterations``. No minimum trigger, no encrypted content, no tool-result clearing.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..context.estimate import estimate_request, estimate_text, message_bytes, tokens_for_bytes
from ..errors import ContextTooLong, ScriptError
from ..messages import Message, Reasoning, ToolCall, Usage
from .base import (
    ReasoningDelta,
    ReasoningEnd,
    Request,
    Response,
    ServerContext,
    Stop,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
    collect,
)


class ScriptCall(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


ScriptedFault = Literal["context_too_long"]


class ScriptFault(BaseModel):
    """A scripted failure instead of an answer (the provider raises it)."""

    model_config = ConfigDict(extra="forbid")
    error: ScriptedFault


class ScriptTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = ""
    tool_calls: list[ScriptCall] = Field(default_factory=list)
    usage: Usage | None = None
    error: ScriptedFault | None = None  # e.g. "context_too_long": the request is refused
    reasoning: str = ""  # the model's thinking before the answer
    stop_reason: Literal["max_tokens", "refusal"] | None = None  # else end_turn / tool_use


class Script(BaseModel):
    model_config = ConfigDict(extra="ignore")  # room for "description" and comments
    model: str = "scripted"
    context_window: int = Field(default=200_000, gt=0)
    max_output_tokens: int = Field(default=0, ge=0)  # 0: the agent's default request cap
    summary_seconds: float = Field(default=0.0, ge=0, le=60)  # how long a summary request takes
    turns: list[ScriptTurn]
    summaries: list[str | ScriptFault] = Field(default_factory=list)
    memory_ops: list[list[dict[str, Any]]] = Field(default_factory=list)


def load_script(source: dict[str, Any] | str | Path) -> tuple[Script, str]:
    """Parse a script from a dict or a JSON file; returns it with a name for messages."""
    if isinstance(source, dict):
        name, data = "<inline script>", source
    else:
        name = str(source)
        try:
            data = json.loads(Path(source).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ScriptError(f"script {name} does not exist; check --script PATH") from None
        except OSError as exc:
            raise ScriptError(f"script {name} cannot be read: {exc.strerror or exc}") from exc
        except ValueError as exc:
            raise ScriptError(f"script {name} is not valid JSON: {exc}") from exc
    try:
        return Script.model_validate(data), name
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'top level'}: {err['msg']}" for err in exc.errors()[:5]
        )
        raise ScriptError(f"script {name} is malformed: {problems}") from None


# The prefixes counted by the latest requests of any scripted provider: (messages, first, last, bytes).
_RECENT: list[tuple[int, Message | None, Message | None, int]] = []
_KEEP = 4
# (system prompt, tool schema bytes) already sent: their cache breakpoint would read them.
_HEADS: set[tuple[str, int]] = set()
MIN_CACHEABLE = 1024  # Anthropic's smallest cacheable prompt for most models, tokens
# Told of every scripted provider made. The test suite sets it to check that each script was
# played to its end (tests/conftest.py); None elsewhere, so nothing is kept outside tests.
on_created: Callable[[ScriptedProvider], None] | None = None


def reset_cache() -> None:
    """Forget every prefix any scripted provider has sent: the next request starts cold.

    The simulated cache is shared by the process's scripted providers (as a real one is by
    the requests of one key); the strategy lab empties it before each arm, so no arm reads
    what an earlier one wrote."""
    _RECENT.clear()
    _HEADS.clear()


class ScriptedProvider:
    def __init__(
        self,
        script: dict[str, Any] | str | Path,
        *,
        name: str = "scripted",
        model: str | None = None,
        context_window: int | None = None,
        pace: float = 0.0,
    ) -> None:
        self.script, self.source = load_script(script)
        self.name = name
        self.model = model or self.script.model
        self.context_window = context_window or self.script.context_window
        self.max_output_tokens = self.script.max_output_tokens or Request.max_tokens
        self.pace = pace  # seconds between text chunks, so a demo visibly streams
        self.turns_used = 0
        self.summaries_used = 0
        self.memory_ops_used = 0
        self.requests: list[Request] = []  # everything asked, for tests and %context --last
        # Anchor + delta: (messages counted, first and last of them, their bytes) of the last
        # agent request, so each step estimates only what was added (see _input_tokens).
        self._counted: tuple[int, Message | None, Message | None, int] = (0, None, None, 0)
        self._cached = 0  # of the last request counted: its tokens a cache would have read
        # --strategy api sets it before each agent request: the emulated server compaction.
        self.server_context: ServerContext | None = None
        if on_created is not None:
            on_created(self)

    @property
    def answers_memory(self) -> bool:
        """Whether a memory update may be asked (``AnswersMemory``): only when the script has some."""
        return bool(self.script.memory_ops)

    @property
    def remaining_turns(self) -> int:
        return len(self.script.turns) - self.turns_used

    def unplayed(self) -> dict[str, int]:
        """What the script holds that no request asked for, by field; empty once played to its end."""
        left = {
            "turns": len(self.script.turns) - self.turns_used,
            "summaries": len(self.script.summaries) - self.summaries_used,
            "memory_ops": len(self.script.memory_ops) - self.memory_ops_used,
        }
        return {field: n for field, n in left.items() if n > 0}

    def stream(self, request: Request) -> Iterator[StreamEvent]:
        if request.purpose != "agent":
            yield from replay_events(self.complete(request))
            return
        turn, index = self._take_turn(request)
        if turn.error:
            _raise(turn.error, self.source)
        calls = [
            ToolCall(id=c.id or _call_id(request, index, k), name=c.name, arguments=c.arguments)
            for k, c in enumerate(turn.tool_calls)
        ]
        compaction = self._server_compaction(request)
        usage = turn.usage or self._cached_usage(request, turn.text + turn.reasoning, calls)
        reasoning = [Reasoning(kind="reasoning", text=turn.reasoning)] if turn.reasoning else []
        if compaction is not None:
            block, compacted = compaction
            reasoning.insert(0, block)
            usage = turn.usage or compacted + estimated_usage(request, turn.text + turn.reasoning, calls, 0)
        response = Response(
            text=turn.text,
            tool_calls=calls,
            usage=usage,
            stop_reason=turn.stop_reason or ("tool_use" if calls else "end_turn"),
            reasoning=reasoning,
        )
        for event in replay_events(response):
            if self.pace and isinstance(event, TextDelta):
                time.sleep(self.pace)
            yield event

    def _server_compaction(self, request: Request) -> tuple[Reasoning, Usage] | None:
        """The emulated ``compact_20260112`` edit (see the module docstring): the compaction block
        this request's answer begins with and the usage it leaves (compacted context as input,
        the compaction's own request as ``compaction_*``), or None below the trigger."""
        ctx = self.server_context
        if ctx is None:
            return None
        messages = request.messages
        start = next(
            (
                i
                for i in range(len(messages) - 1, -1, -1)
                if any(r.kind == "compaction" for r in messages[i].reasoning)
            ),
            0,
        )
        read = messages[start:]  # what the server reads: it drops what precedes a compaction block
        total = estimate_request(request.system, read, request.tools)
        if total < ctx.trigger:
            return None
        if self.summaries_used < len(self.script.summaries):
            item = self._item(self.script.summaries, self.summaries_used, "summaries", "summary")
            self.summaries_used += 1
            summary = item if isinstance(item, str) else digest(read)
        else:
            summary = digest(read)
        block = Reasoning(kind="compaction", data=json.dumps({"type": "compaction", "content": summary}))
        head = estimate_request(request.system, [], request.tools)
        summary_tokens = estimate_text(summary)
        usage = Usage(
            input_tokens=head + summary_tokens,
            compaction_input_tokens=total,
            compaction_output_tokens=summary_tokens,
        )
        return block, usage

    def _cached_usage(self, request: Request, text: str, calls: list[ToolCall]) -> Usage:
        """``estimated_usage``, split the way a caching provider reports it (issue 31).

        Like Anthropic with this package's breakpoints: the prefix the previous request sent
        (system prompt, tools and the messages it had) is a cache read, the rest is written
        to the cache; the first request of a system prompt writes it all; a prompt under the
        smallest cacheable size (1,024 tokens) is plain input. The total is the estimate's,
        so anchors and the window see the same numbers as before.
        """
        total = self._input_tokens(request)
        cached = self._cached
        usage = estimated_usage(request, text, calls, total)
        if total < MIN_CACHEABLE:
            return usage
        return Usage(
            output_tokens=usage.output_tokens,
            cache_read_input_tokens=cached,
            cache_creation_input_tokens=total - cached,
        )

    def _input_tokens(self, request: Request) -> int:
        """``estimate_request`` of an agent request, walking only the messages added since the last.

        The same figure (the estimate sums bytes, then rounds): the earlier messages' bytes
        are kept with the first and last of them, which identify the prefix (messages are
        frozen); a replace changes them and the request is counted in full.
        """
        msgs = request.messages
        n, total = 0, 0
        # This provider's last request, or one of an earlier run's provider (a run makes its own
        # provider; the conversation's messages are the same objects from run to run).
        for count, first, last, counted in (self._counted, *_RECENT):
            if n < count <= len(msgs) and msgs[0] is first and msgs[count - 1] is last:
                n, total = count, counted
        prefix = total
        total += sum(message_bytes(m) for m in msgs[n:])
        self._counted = (len(msgs), msgs[0] if msgs else None, msgs[-1] if msgs else None, total)
        _RECENT.insert(0, self._counted)
        del _RECENT[_KEEP:]
        schema_bytes = (
            len(json.dumps(request.tools, ensure_ascii=False).encode("utf-8")) if request.tools else 0
        )
        head = estimate_text(request.system) + tokens_for_bytes(schema_bytes)
        full = tokens_for_bytes(total) + head
        # The system prompt and tools are cached once any request has sent them; the messages
        # only as far as the previous request's prefix reaches (a replace starts them over).
        key = (request.system, schema_bytes)
        cached = (head if key in _HEADS else 0) + (tokens_for_bytes(prefix) if n else 0)
        _HEADS.add(key)
        self._cached = min(cached, full)  # the part a caching provider would read (_cached_usage)
        return full

    def complete(self, request: Request) -> Response:
        if request.purpose == "agent":
            return collect(self.stream(request))
        self.requests.append(request)
        if request.purpose == "summary":
            if self.script.summary_seconds and paced():
                time.sleep(self.script.summary_seconds)
            items, used = self.script.summaries, self.summaries_used
            self.summaries_used += 1
            item = self._item(items, used, "summaries", "summary")
            if isinstance(item, ScriptFault):
                _raise(item.error, self.source)
            text = item
        else:
            items_ops, used = self.script.memory_ops, self.memory_ops_used
            self.memory_ops_used += 1
            text = json.dumps(self._item(items_ops, used, "memory_ops", "memory update"))
        return Response(text=text, usage=estimated_usage(request, text, []), stop_reason="end_turn")

    def _take_turn(self, request: Request) -> tuple[ScriptTurn, int]:
        self.requests.append(request)
        index = self.turns_used
        turn = self._item(self.script.turns, index, "turns", "agent request")
        self.turns_used += 1
        return turn, index

    def _item(self, items: list[Any], index: int, field: str, what: str) -> Any:
        if index >= len(items):
            raise ScriptError(
                f"script {self.source} ran out: {what} #{index + 1} needs {field}[{index}], "
                f"but the script has {len(items)}. Add entries to {field!r}, or start over "
                "with %agent --new"
            )
        return items[index]


def paced() -> bool:
    """Whether scripted runs pause for a watching person: ``PSEUDOCLAUDE_DEMO_PACE=0`` says no."""
    try:
        return float(os.environ.get("PSEUDOCLAUDE_DEMO_PACE") or 1) > 0
    except ValueError:
        return True


def _raise(fault: str, source: str) -> NoReturn:
    if fault == "context_too_long":
        raise ContextTooLong(
            f"prompt is too long for the model's context window (scripted by {source})", status=400
        )
    raise ScriptError(f"script {source}: unknown fault {fault!r}")


def _call_id(request: Request, turn: int, k: int) -> str:
    # Deterministic for a given request, yet unique within a session: spill files are
    # named by call id, so a reused id would reuse another call's spilled result.
    anchor = request.messages[-1].id if request.messages else ""
    digest = hashlib.sha1(f"{anchor}:{turn}:{k}".encode()).hexdigest()[:12]
    return f"call_{digest}"


def digest(messages: list[Message]) -> str:
    """A short summary of ``messages`` for the emulated compaction when the script has none:
    the first request (it usually holds the constraints), the files touched, the last words."""
    first = next((m.prompt_text for m in messages if m.role == "user" and m.tool_result is None), "")
    files = sorted(
        {
            str(c.arguments["path"])
            for m in messages
            for c in m.tool_calls
            if isinstance(c.arguments.get("path"), str)
        }
    )
    last = next((m.content for m in reversed(messages) if m.role == "assistant" and m.content.strip()), "")
    lines = [
        f"Summary of the conversation so far ({len(messages)} messages, compacted by the provider).",
        f"The request: {first[:600]}" if first else "",
        f"Files touched: {', '.join(files)}" if files else "",
        f"Last said: {last[:300]}" if last else "",
    ]
    return "\n".join(line for line in lines if line)


def estimated_usage(
    request: Request, text: str, calls: list[ToolCall], input_tokens: int | None = None
) -> Usage:
    """What a real provider would report, from the estimator, so anchors behave the same."""
    out = len(text.encode("utf-8", "surrogatepass")) + sum(  # a script may hold lone surrogates
        len(c.name) + len(json.dumps(c.arguments).encode("utf-8")) for c in calls
    )
    return Usage(
        input_tokens=(
            input_tokens
            if input_tokens is not None
            else estimate_request(request.system, request.messages, request.tools)
        ),
        output_tokens=tokens_for_bytes(out),
    )


def replay_events(response: Response) -> Iterator[StreamEvent]:
    """Stream a response the way a wire provider would: thinking, small text chunks, then calls.

    With ``max_tokens`` the last call breaks off inside its arguments, as a real cut does.
    """
    for part in response.reasoning:
        if part.kind == "compaction":  # a block that arrives whole, never shown as thinking
            yield ReasoningEnd(part)
            continue
        words = part.text.split(" ")
        for i in range(0, len(words), 4):
            chunk = " ".join(words[i : i + 4])
            yield ReasoningDelta(chunk if i + 4 >= len(words) else chunk + " ")
        yield ReasoningEnd(part)
    words = response.text.split(" ") if response.text else []
    for i in range(0, len(words), 4):
        chunk = " ".join(words[i : i + 4])
        yield TextDelta(chunk if i + 4 >= len(words) else chunk + " ")
    for k, call in enumerate(response.tool_calls):
        yield ToolCallStart(id=call.id, name=call.name)
        arguments = json.dumps(call.arguments)
        if response.stop_reason == "max_tokens" and k == len(response.tool_calls) - 1:
            yield ToolCallDelta(id=call.id, json=arguments[: max(1, len(arguments) // 2)])
            break
        yield ToolCallDelta(id=call.id, json=arguments)
        yield ToolCallEnd(id=call.id)
    yield UsageEvent(response.usage)
    yield Stop(response.stop_reason or "end_turn")
