"""The Anthropic provider: the official ``anthropic`` SDK, streamed, with tools and prompt caching.

It owns the translation between neutral messages and the Messages API — merged turns,
``tool_use``/``tool_result`` blocks, two ``cache_control`` breakpoints — the reading of
raw stream events into neutral ones, and the mapping of SDK errors to one-line
``ProviderError``s. Retries are the SDK's own (429, 5xx, 529 and connection errors,
honouring ``retry-after``). It knows nothing of the turn loop, tools or compaction.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx2

from ..errors import ContextTooLong, ProviderError, StreamError
from ..messages import Message, ToolCall, Usage
from . import wire
from .base import (
    Request,
    Response,
    Stop,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
)
from .models import context_window_for, default_model

SERVICE = "Anthropic"
KEY_VAR, URL_VAR = "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"
DEFAULT_BASE_URL = "https://api.anthropic.com"
EPHEMERAL = {"type": "ephemeral"}
# Long answers stream for minutes; a dead host should fail in seconds. Not the SDK's
# default object, so ``complete()`` skips the SDK's 10-minute non-streaming guess.
TIMEOUT = httpx2.Timeout(600.0, connect=10.0)
THINKING = ("thinking", "redacted_thinking")
# The API's words for a prompt over the window (400), or a body over its size limit (413).
TOO_LONG = ("prompt is too long", "exceed context limit", "exceeds the context window")


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        *,
        model: str | None = None,
        context_window: int | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float | httpx2.Timeout | None = None,
    ) -> None:
        key = api_key or wire.env(KEY_VAR)
        if not key:
            raise wire.missing_key(SERVICE, KEY_VAR)  # before any request, and before any session
        self.model = model or default_model("anthropic")
        self.context_window = context_window or context_window_for("anthropic", self.model)
        self.base_url = (base_url or wire.env(URL_VAR) or DEFAULT_BASE_URL).rstrip("/")
        self.max_retries = max_retries
        self._key = key
        self._client = anthropic.Anthropic(
            api_key=key, base_url=self.base_url, max_retries=max_retries, timeout=timeout or TIMEOUT
        )
        # Thinking blocks of the running tool loop, by the id of a call they preceded: the
        # API wants them back, unchanged, with the tool results. The neutral message model
        # has no place for them, so only this provider object (one run) remembers them.
        self._thinking: dict[str, list[dict[str, Any]]] = {}

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r}, base_url={self.base_url!r})"

    # --- requests -------------------------------------------------------------------------

    def stream(self, request: Request) -> Iterator[StreamEvent]:
        reader = _Reader()
        with self._mapped_errors():
            events = self._client.messages.create(**self._params(request), stream=True)
            with events:
                for event in events:
                    yield from reader.feed(event)
        # Only a stream that said why it stopped ends with Stop; anything else makes the
        # runner's assembler raise StreamError and keep nothing of this response.
        if reader.stopped and reader.stop_reason:
            self._remember(reader)
            yield Stop(reader.stop_reason)

    def complete(self, request: Request) -> Response:
        with self._mapped_errors():
            message = self._client.messages.create(**self._params(request))
        text = "".join(b.text for b in message.content if b.type == "text")
        calls = [
            ToolCall(id=b.id, name=b.name, arguments=b.input if isinstance(b.input, dict) else {})
            for b in message.content
            if b.type == "tool_use"
        ]
        if not message.stop_reason:
            raise StreamError(f"{SERVICE} answered without a stop reason; nothing was kept — try again")
        return Response(
            text=text, tool_calls=calls, usage=_usage(message.usage), stop_reason=message.stop_reason
        )

    def _params(self, request: Request) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "messages": self.wire_messages(request.messages),
        }
        if request.system:
            # Tools, then system, then messages form the cached prefix: this breakpoint
            # caches tools and system prompt, which every step of a session repeats.
            params["system"] = [{"type": "text", "text": request.system, "cache_control": EPHEMERAL}]
        if request.tools:
            params["tools"] = request.tools
        return params

    # --- neutral messages -> Messages API --------------------------------------------------

    def wire_messages(self, messages: list[Message]) -> list[dict[str, Any]]:
        out = [self._turn(group) for group in wire.turns(messages)]
        # The second breakpoint: the whole conversation so far is cached, so the next step
        # pays full price only for what it adds.
        if out:
            last = out[-1]["content"][-1]
            if last["type"] not in THINKING:
                last["cache_control"] = EPHEMERAL
        return out

    def _turn(self, group: list[Message]) -> dict[str, Any]:
        role = group[0].role
        blocks: list[dict[str, Any]] = []
        if role == "user":
            results = [m.tool_result for m in group if m.tool_result is not None]
            # The API wants a turn's tool_result blocks before any text in it.
            for r in results:
                block: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": r.call_id,
                    "content": r.content,
                }
                if r.is_error:
                    block["is_error"] = True
                blocks.append(block)
            blocks += [_text(m.content) for m in group if m.tool_result is None and m.content.strip()]
            return {"role": "user", "content": blocks}
        for m in group:
            if m.tool_calls:
                blocks += self._thinking.get(m.tool_calls[0].id, [])
            if m.content.strip():
                blocks.append(_text(m.content))
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls
            ]
        return {"role": "assistant", "content": blocks}

    def _remember(self, reader: _Reader) -> None:
        if reader.thinking and reader.call_ids:
            self._thinking[reader.call_ids[0]] = reader.thinking

    # --- errors -------------------------------------------------------------------------------

    @contextmanager
    def _mapped_errors(self) -> Iterator[None]:
        try:
            yield
        except anthropic.APIStatusError as exc:
            raise self._status_error(exc) from exc
        except anthropic.APITimeoutError as exc:
            raise ProviderError(
                f"{SERVICE} at {self.base_url} did not answer in time (after {self.max_retries} retries): "
                "try again later"
            ) from exc
        except anthropic.APIConnectionError as exc:
            reason = wire.quote(exc.__cause__ or exc, self._key)
            raise wire.unreachable(SERVICE, self.base_url, URL_VAR, reason) from exc
        except httpx2.HTTPError as exc:
            # The SDK passes a connection dropped mid-body straight through.
            raise StreamError(
                f"the {SERVICE} response stream broke off ({type(exc).__name__}); nothing from it was "
                "kept — run %agent again to retry"
            ) from exc

    def _status_error(self, exc: anthropic.APIStatusError) -> ProviderError:
        status = exc.status_code
        kind, message = _error_body(exc.body)
        detail = wire.quote(f"{kind}: {message}" if message else kind or exc.message, self._key)
        if status == 200:
            # An ``event: error`` inside a started stream; the SDK does not retry these.
            code = {"overloaded_error": 529, "rate_limit_error": 429}.get(kind or "", 500)
            return StreamError(
                f"the {SERVICE} stream stopped with an error ({detail}); nothing from it was kept — "
                "try again later",
                status=code,
            )
        if status in (400, 413) and any(hint in message.lower() for hint in TOO_LONG):
            return ContextTooLong(f"{SERVICE}: {detail}", status=status)
        if status == 413:
            return ContextTooLong(f"{SERVICE}: the request is too large ({detail})", status=status)
        if status in (401, 403):
            return wire.key_rejected(SERVICE, KEY_VAR, status)
        if status == 404:
            return wire.model_missing(SERVICE, self.model, self.base_url, status, detail)
        if status in (408, 429) or status >= 500:
            return wire.busy(SERVICE, status, self.max_retries, detail)
        return wire.refused(SERVICE, status, detail)


class _Reader:
    """Raw Messages-API stream events in, neutral events out; keeps what must go back."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.thinking: list[dict[str, Any]] = []
        self.call_ids: list[str] = []
        self.usage = Usage()
        self.stop_reason: str | None = None
        self.stopped = False

    def feed(self, event: Any) -> Iterator[StreamEvent]:
        kind = event.type
        if kind == "message_start":
            self.usage = _usage(event.message.usage)
            yield UsageEvent(self.usage)
        elif kind == "content_block_start":
            yield from self._start(event.index, event.content_block)
        elif kind == "content_block_delta":
            yield from self._delta(event.index, event.delta)
        elif kind == "content_block_stop":
            block = self.blocks.get(event.index)
            if block is not None and block["type"] == "tool_use":
                yield ToolCallEnd(block["id"])
            elif block is not None and block["type"] in THINKING:
                self.thinking.append(block)
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self.usage = _delta_usage(self.usage, event.usage)
            yield UsageEvent(self.usage)
        elif kind == "message_stop":
            self.stopped = True

    def _start(self, index: int, block: Any) -> Iterator[StreamEvent]:
        if block.type == "tool_use":
            self.blocks[index] = {"type": "tool_use", "id": block.id}
            self.call_ids.append(block.id)
            yield ToolCallStart(id=block.id, name=block.name)
        elif block.type == "thinking":
            self.blocks[index] = {
                "type": "thinking",
                "thinking": block.thinking,
                "signature": block.signature,
            }
        elif block.type == "redacted_thinking":
            self.blocks[index] = {"type": "redacted_thinking", "data": block.data}
        elif block.type == "text":
            self.blocks[index] = {"type": "text"}
            if block.text:
                yield TextDelta(block.text)

    def _delta(self, index: int, delta: Any) -> Iterator[StreamEvent]:
        block = self.blocks.get(index)
        if delta.type == "text_delta":
            yield TextDelta(delta.text)
        elif delta.type == "input_json_delta" and block is not None and delta.partial_json:
            yield ToolCallDelta(id=block["id"], json=delta.partial_json)
        elif delta.type == "thinking_delta" and block is not None:
            block["thinking"] += delta.thinking
        elif delta.type == "signature_delta" and block is not None:
            block["signature"] += delta.signature


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _usage(u: Any) -> Usage:
    return Usage(
        input_tokens=u.input_tokens or 0,
        output_tokens=u.output_tokens or 0,
        cache_creation_input_tokens=u.cache_creation_input_tokens or 0,
        cache_read_input_tokens=u.cache_read_input_tokens or 0,
    )


def _delta_usage(before: Usage, u: Any) -> Usage:
    """message_start holds the input side; message_delta the cumulative output (and, lately, input)."""
    if u is None:
        return before

    def pick(new: int | None, old: int) -> int:
        return old if new is None else new

    return Usage(
        input_tokens=pick(u.input_tokens, before.input_tokens),
        output_tokens=pick(u.output_tokens, before.output_tokens),
        cache_creation_input_tokens=pick(u.cache_creation_input_tokens, before.cache_creation_input_tokens),
        cache_read_input_tokens=pick(u.cache_read_input_tokens, before.cache_read_input_tokens),
    )


def _error_body(body: object) -> tuple[str | None, str]:
    """(error type, message) from ``{"type": "error", "error": {"type": …, "message": …}}``."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return error.get("type"), str(error.get("message") or "")
    return None, ""
