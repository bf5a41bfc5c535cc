"""What comes back from an OpenAI-compatible server: ``data:`` chunks read into neutral events.

Tool calls are assembled from indexed deltas, or arrive whole in one chunk as Ollama sends
them; usage comes in its own chunk (OpenAI) or on the finish chunk (llama.cpp); reasoning
(``reasoning_content`` / ``reasoning``) is kept apart from the answer; a refusal is the
answer's text. The non-streamed answer is read with the same helpers.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import ProviderError, StreamError
from ..messages import Reasoning, Usage
from . import wire
from .base import (
    ReasoningDelta,
    ReasoningEnd,
    Stop,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
    parse_arguments,
)
from .openai_messages import REASONING_FIELDS

# finish_reason -> the neutral stop reasons the rest of the package logs.
STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}


class ChunkReader:
    """``data:`` lines in, neutral events out; Stop only once a finish_reason arrived.

    ``stream_error`` turns an error the server sent mid-stream into the provider's error
    (the provider knows its key, to keep it out of the message).
    """

    def __init__(self, base_url: str, stream_error: Callable[[Any], ProviderError]) -> None:
        self.base_url, self.stream_error = base_url, stream_error
        self.calls: dict[int, dict[str, Any]] = {}  # stream index -> {"id", "name", "started", "args"}
        self.order: list[dict[str, Any]] = []
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.done = False
        self.reasoning: dict[str, list[str]] = {}  # field name -> pieces
        self.refused = False

    def feed(self, line: str) -> Iterator[StreamEvent]:
        # SSE comments (": keep-alive"), event names and blank lines carry nothing here; after
        # [DONE] the rest of the body is read only so the connection can be reused.
        if not self.done and line.startswith("error:"):
            # Older llama.cpp servers: ``error: {"code": 400, "message": …, "type": …}``.
            raise self.stream_error(error_line(line[6:].strip()))
        if self.done or not line.startswith("data:"):
            return
        payload = line[5:].strip()
        if payload == "[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(payload)
        except ValueError:
            raise StreamError(
                f"{self.base_url} sent a chunk that is not JSON ({wire.quote(payload)}); nothing "
                "from this response was kept"
            ) from None
        if chunk.get("error"):
            raise self.stream_error(chunk)
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            for name in REASONING_FIELDS:
                piece = delta.get(name)
                if isinstance(piece, str) and piece:
                    self.reasoning.setdefault(name, []).append(piece)
                    yield ReasoningDelta(piece)
            if delta.get("content"):
                yield TextDelta(delta["content"])
            if isinstance(delta.get("refusal"), str) and delta["refusal"]:
                # The refusal is the answer: shown and kept as the assistant's text.
                self.refused = True
                yield TextDelta(delta["refusal"])
            for position, tc in enumerate(delta.get("tool_calls") or []):
                yield from self._tool_delta(position, tc)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        if chunk.get("usage"):
            # Its own chunk after the finish (OpenAI), or on the finish chunk (llama.cpp).
            self.usage = usage_of(chunk["usage"])

    def _tool_delta(self, position: int, tc: dict[str, Any]) -> Iterator[StreamEvent]:
        fn = tc.get("function") or {}
        index = tc.get("index", position)
        call = self.calls.get(index)
        new_id = tc.get("id")
        # A second whole call under an index already used (some Ollama versions number
        # every call 0) is a new call, not more arguments for the first.
        if call is None or (new_id and fn.get("name") and new_id != call["id"]):
            call = {"id": new_id or new_call_id(), "name": "", "started": False, "args": []}
            self.calls[index] = call
            self.order.append(call)
        if fn.get("name") and not call["name"]:
            call["name"] = fn["name"]  # some servers repeat the name in every delta
        arguments = fn.get("arguments")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments)  # some servers send the object, not its text
        if arguments:
            call["args"].append(arguments)
        if not call["started"] and call["name"]:
            call["started"] = True
            yield ToolCallStart(id=call["id"], name=call["name"])
        if call["started"] and call["args"]:
            yield ToolCallDelta(id=call["id"], json="".join(call["args"]))
            call["args"] = []

    def finish(self) -> Iterator[StreamEvent]:
        for call in self.order:
            if call["started"]:
                yield ToolCallEnd(id=call["id"])
        if self.usage is not None:
            yield UsageEvent(self.usage)
        for name, pieces in self.reasoning.items():
            yield ReasoningEnd(Reasoning(kind=name, text="".join(pieces)))  # type: ignore[arg-type]
        if self.finish_reason:
            reason = STOP_REASONS.get(self.finish_reason, self.finish_reason)
            yield Stop("refusal" if self.refused and reason == "end_turn" else reason)


def error_line(text: str) -> dict[str, Any]:
    """An ``error:`` SSE line's payload as an error body: a JSON object, or plain words."""
    try:
        obj = json.loads(text)
    except ValueError:
        return {"error": {"message": text}}
    if isinstance(obj, dict) and "error" in obj:
        return obj
    return {"error": obj if isinstance(obj, dict) else {"message": str(obj)}}


def usage_of(u: dict[str, Any] | None) -> Usage:
    if not u:
        return Usage()
    prompt = int(u.get("prompt_tokens") or 0)
    cached = int((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    # OpenAI counts cached tokens inside prompt_tokens; the neutral model keeps them apart,
    # so that prompt_total (input + cache) is the prompt's size, as with Anthropic.
    return Usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=int(u.get("completion_tokens") or 0),
        cache_read_input_tokens=cached,
    )


def call_arguments(fn: dict[str, Any]) -> dict[str, Any]:
    raw = fn.get("arguments")
    if isinstance(raw, dict):
        return raw
    return parse_arguments(raw or "{}", str(fn.get("name")))  # broken or too deep: StreamError


def new_call_id() -> str:
    # Ids must be unique within a session: spilled results are stored by call id.
    return f"call_{uuid.uuid4().hex[:24]}"
