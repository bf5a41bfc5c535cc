"""The provider interface: a request in, a stream of neutral events out.

Providers only translate between the neutral message model and one wire protocol; the
turn loop, tools and compaction live in the runner. ``StreamAssembler`` turns events
into a ``Response`` and refuses a stream that never said why it stopped, so a cut
stream can never put a half-received tool call into the conversation. A ``Request`` carries
at most ``MAX_IMAGES`` image parts, the newest: both wire providers send what it holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ..errors import StreamError
from ..messages import ImagePart, Message, Reasoning, ToolCall, Usage
from ..nesting import MAX_ARGUMENT_DEPTH, text_nesting, value_depth

if TYPE_CHECKING:
    from .window import Learned

Purpose = Literal["agent", "summary", "memory"]
# issue-14: reads an image part's bytes from the session's own copy at request time; raises
# (session.images.ImageError, OSError) when the file is missing or altered.
ImageSource = Callable[[ImagePart], bytes]
# Images one request carries, the newest; older ones go as their text notes. Anthropic refuses
# more than 100 and, past 20, any side over 2,000 px; each image costs up to ~1,600 tokens and
# its upload on every request while it stays in the window.
MAX_IMAGES = 20


@dataclass(frozen=True)
class Request:
    system: str
    messages: list[Message]
    tools: list[dict[str, Any]] = field(default_factory=list)
    # What the caller asks for; the provider clamps it to the model's output cap.
    max_tokens: int = 8192
    purpose: Purpose = "agent"
    images: ImageSource | None = None  # issue-14: None sends every image part as its text note
    # issue 43: the conversation this request continues (the session and the strategy): a
    # provider that keeps state on its side (OpenAI's stored responses) starts over when it changes.
    thread: str | None = None


def cap_images(messages: list[Message], limit: int | None = None) -> list[Message]:
    """``messages`` with only the newest ``limit`` (``MAX_IMAGES``) image parts; each older one
    becomes its text note in its message (the tool result's text for a result). Unchanged
    messages are kept as is."""
    limit = MAX_IMAGES if limit is None else limit
    if sum(len(m.parts) for m in messages) <= limit:
        return messages
    out: list[Message] = []
    room = max(limit, 0)
    for m in reversed(messages):
        if len(m.parts) <= room:
            room -= len(m.parts)
            out.append(m)
            continue
        cut = len(m.parts) - room
        kept, dropped = m.parts[cut:], m.parts[:cut]
        room = 0
        why = f"left out of this request (only the newest {limit} images are sent); show or read it again to see it"
        notes = "\n".join(p.note(why) for p in dropped)
        if m.tool_result is not None:
            r = m.tool_result
            result = r.model_copy(update={"content": f"{r.content}\n{notes}"})
            out.append(m.model_copy(update={"tool_result": result, "parts": kept}))
        else:
            text = f"{m.content}\n{notes}" if m.content else notes
            out.append(m.model_copy(update={"content": text, "parts": kept}))
    out.reverse()
    return out


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallStart:
    id: str
    name: str


@dataclass(frozen=True)
class ToolCallDelta:
    id: str
    json: str  # a fragment of the arguments' JSON text


@dataclass(frozen=True)
class ToolCallEnd:
    id: str


@dataclass(frozen=True)
class UsageEvent:
    usage: Usage  # the latest full figure; a later event replaces an earlier one


@dataclass(frozen=True)
class ReasoningDelta:
    text: str  # the model's thinking as it streams: shown collapsed, never as the answer


@dataclass(frozen=True)
class ReasoningEnd:
    part: Reasoning  # one whole block, as it must go back (signature, redacted data)


@dataclass(frozen=True)
class Stop:
    reason: str  # end_turn | tool_use | max_tokens | refusal | compaction (a pause) | ...


@dataclass(frozen=True)
class ProviderNote:
    """Something the provider did that the person must hear (issue 43): a fallback to another
    endpoint or to the full input, an event it did not know, a part it did not keep. The runner
    shows it as a notice; it is no part of the answer."""

    text: str
    level: str = "warning"


StreamEvent = (
    TextDelta
    | ToolCallStart
    | ToolCallDelta
    | ToolCallEnd
    | UsageEvent
    | ReasoningDelta
    | ReasoningEnd
    | Stop
    | ProviderNote
)


@dataclass
class Response:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    reasoning: list[Reasoning] = field(default_factory=list)
    # Tool calls the output cap (or a refusal) cut off: never run, never in the conversation.
    cut_calls: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # ``ProviderNote``s of a non-streamed answer


@dataclass(frozen=True)
class ServerContext:
    """What ``--strategy api`` asks of a provider that manages the context itself (issue 31).

    Neutral: each provider puts it in its own words (Anthropic: ``context_management`` edits;
    the scripted provider emulates the documented behaviour). It applies to agent requests
    only, never to a summary or memory request.
    """

    trigger: int  # input tokens from which the provider compacts what came before
    instructions: str | None = None  # replaces the provider's own summarizing prompt
    # Old tool results cleared by the provider (Anthropic context editing) from this many
    # input tokens on; 0: never. ``keep_tool_uses`` newest tool uses stay.
    clear_tool_results: int = 0
    keep_tool_uses: int = 3
    # issue 43: stop right after the provider's compaction (Anthropic ``pause_after_compaction``)
    # so that the person confirms it before the run goes on (``confirm_compaction``).
    pause: bool = False
    # False: no compaction asked at all (the person rejected one earlier in this run).
    compact: bool = True


@runtime_checkable
class ManagesContext(Protocol):
    """A provider that can manage the context server-side: the strategy sets ``server_context``
    before each agent request (None: the provider does nothing of the kind)."""

    server_context: ServerContext | None


# --- capabilities: what a provider can do beyond ``Provider``, declared by its members and
# checked with ``isinstance`` (never probed with ``getattr``): a new provider has a capability
# by having the members, and mypy checks that the members have the right types.


@runtime_checkable
class HasEndpoint(Protocol):
    """A provider that sends to a server at ``base_url`` (which a workspace's ``.env`` may have
    chosen: ``envtrust.workspace_endpoint``)."""

    base_url: str


@runtime_checkable
class LearnsWindow(Protocol):
    """A provider whose server can say its own window (an OpenAI-compatible server, issue 32):
    ``learn_window`` asks once per server and model (cached) and adopts the answer;
    ``adopt_window`` takes a window a context-length error named."""

    base_url: str
    model: str
    context_window: int
    window_source: str  # where the window came from, for %context
    is_openai: bool  # OpenAI's own API (a hosted model), not a local server

    def learn_window(self) -> Learned | None: ...

    def adopt_window(self, learned: Learned) -> None: ...


@runtime_checkable
class AnswersMemory(Protocol):
    """A provider that may have no memory update to give: a scripted one whose script has no
    ``memory_ops`` (asking would only fail with "the script ran out"). A provider without this
    capability is always asked."""

    @property
    def answers_memory(self) -> bool: ...


@dataclass(frozen=True)
class Compaction:
    """What a provider's on-demand compaction of some messages gave (issue 43): the messages that
    stand for them from now on (the provider's block or item, verbatim, and for OpenAI the user
    messages it keeps), the readable summary (or a line saying the item is opaque), the usage of
    the compaction request, and ``error`` when it gave nothing to use."""

    messages: list[Message]
    summary: str
    usage: Usage
    error: str | None = None


@runtime_checkable
class CompactsOnDemand(Protocol):
    """A provider that compacts a conversation when asked (Anthropic ``compaction: summarize``,
    OpenAI ``/responses/compact``): ``%compact`` under ``--strategy api`` uses it."""

    def compact_on_demand(self, request: Request) -> Compaction: ...


@runtime_checkable
class GivesTour(Protocol):
    """A provider that plays a fixed tour (the demo, issue 44): mode ``ask`` puts ``tour`` to
    the person once for the whole tour (``Permissions(tour=...)``) instead of once per change."""

    tour: str


@runtime_checkable
class RefusesBlocks(Protocol):
    """A provider that refuses a block past ``provider_blocks``' bounds (issue 41): it keeps the
    answer the block came with and says why in ``refused_block`` (None: it kept every block),
    which the context host takes once the answer is in the log, and stops the run with."""

    refused_block: str | None


@runtime_checkable
class Provider(Protocol):
    name: str
    model: str
    context_window: int
    max_output_tokens: int  # the model's output cap (or the max_output_tokens override)

    def stream(self, request: Request) -> Iterator[StreamEvent]: ...

    def complete(self, request: Request) -> Response: ...


class StreamAssembler:
    """Collects stream events into a ``Response``."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[str, tuple[str, list[str]]] = {}
        self._usage = Usage()
        self._stop: str | None = None
        self._reasoning: list[Reasoning] = []

    @property
    def text(self) -> str:
        return "".join(self._text)

    @property
    def usage(self) -> Usage:
        """The latest usage the stream reported (what was paid for, whatever becomes of it)."""
        return self._usage

    def feed(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self._text.append(event.text)
        elif isinstance(event, ToolCallStart):
            self._calls[event.id] = (event.name, [])
        elif isinstance(event, ToolCallDelta):
            self._calls[event.id][1].append(event.json)
        elif isinstance(event, UsageEvent):
            self._usage = event.usage
        elif isinstance(event, ReasoningEnd):
            self._reasoning.append(event.part)
        elif isinstance(event, Stop):
            self._stop = event.reason

    def finish(self) -> Response:
        if self._stop is None:
            raise StreamError(
                "the response stream ended without a stop reason (connection cut?); "
                "nothing from it was kept — run %agent again to retry"
            )
        if self._stop == "refusal" and self._calls:
            # After a refusal no call is meant: none may run or enter the conversation.
            return Response(
                text=self.text,
                usage=self._usage,
                stop_reason=self._stop,
                reasoning=self._reasoning,
                cut_calls=[name for name, _ in self._calls.values()],
            )
        if self._stop == "max_tokens" and self._calls:
            # The output cap cuts the answer's *last* piece: calls before it arrived whole
            # (issue 32: four complete calls, then "length"). A call is kept when its
            # arguments are one whole JSON object; the rest were cut and never run. The
            # runner checks the kept ones against their tools' schemas.
            kept, cut = [], []
            for call_id, (name, parts) in self._calls.items():
                arguments = whole_arguments("".join(parts))
                if arguments is None:
                    cut.append(name)
                else:
                    kept.append(ToolCall(id=call_id, name=name, arguments=arguments))
            return Response(
                text=self.text,
                tool_calls=kept,
                usage=self._usage,
                stop_reason=self._stop,
                reasoning=self._reasoning,
                cut_calls=cut,
            )
        calls = []
        for call_id, (name, parts) in self._calls.items():
            arguments = parse_arguments("".join(parts), f"{name} ({call_id})")
            calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
        return Response(
            text=self.text,
            tool_calls=calls,
            usage=self._usage,
            stop_reason=self._stop,
            reasoning=self._reasoning,
        )


def whole_arguments(raw: str) -> dict[str, Any] | None:
    """A tool call's arguments when their text is one whole JSON object, else None (cut).

    Empty text is ``{}``, as in ``parse_arguments``; whether that is enough is the tool
    schema's say. Too deep a nesting counts as cut: it is never run.
    """
    raw = raw.strip() or "{}"
    try:
        arguments = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(arguments, dict) or value_depth(arguments, MAX_ARGUMENT_DEPTH) > MAX_ARGUMENT_DEPTH:
        return None
    return arguments


def parse_arguments(raw: str, call: str) -> dict[str, Any]:
    """A tool call's arguments JSON as a dict (a non-object becomes ``{"value": …}``).

    Broken JSON, or JSON nested deeper than ``MAX_ARGUMENT_DEPTH``, is a ``StreamError``:
    nothing from the response is kept. ``json`` stops past the interpreter's recursion limit
    with a ``RecursionError`` (caught); what it parses is measured in a loop.
    """
    raw = raw.strip() or "{}"
    try:
        arguments = json.loads(raw)
    except RecursionError:
        arguments, depth = None, text_nesting(raw)
    except ValueError as exc:
        raise StreamError(
            f"tool call {call} arrived with broken arguments JSON: {exc}; "
            "nothing from this response was kept — run %agent again to retry"
        ) from exc
    else:
        depth = value_depth(arguments, MAX_ARGUMENT_DEPTH)
        if depth > MAX_ARGUMENT_DEPTH:
            depth = value_depth(arguments)  # the whole walk only for the message
    if depth > MAX_ARGUMENT_DEPTH:
        raise StreamError(
            f"tool call {call} arrived with arguments nested {depth:,} levels deep (the limit is "
            f"{MAX_ARGUMENT_DEPTH}); nothing from this response was kept — run %agent again to retry"
        )
    return arguments if isinstance(arguments, dict) else {"value": arguments}


def collect(events: Iterator[StreamEvent]) -> Response:
    assembler = StreamAssembler()
    for event in events:
        assembler.feed(event)
    return assembler.finish()
