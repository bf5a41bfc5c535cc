"""The OpenAI-compatible provider: ``/chat/completions`` over ``httpx``, streamed.

One wire format, many servers: OpenAI, Ollama, vLLM, llama.cpp. It owns the translation
of neutral messages (system first, ``role: "tool"`` results), the reading of ``data:``
chunks into neutral events — tool calls assembled from indexed deltas, or whole in one
chunk as Ollama sends them; usage in its own chunk or on the finish chunk; reasoning
(``reasoning_content`` / ``reasoning``) kept apart from the answer and passed back in a
tool loop, as DeepSeek's thinking mode requires; refusals — its own bounded retries for
429/5xx that honour ``retry-after`` and ``x-should-retry``, and the mapping of failures
to one-line ``ProviderError``s. Nothing here knows about the turn loop.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..errors import ConfigError, ContextTooLong, ProviderError, StreamError
from ..messages import Message, Reasoning, ToolCall, Usage
from . import wire
from .base import (
    ReasoningDelta,
    ReasoningEnd,
    Request,
    Response,
    Stop,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
    parse_arguments,
)
from .models import clamp_output, default_model, model_info

SERVICE = "the OpenAI-compatible endpoint"
KEY_VAR, URL_VAR = "OPENAI_API_KEY", "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
TIMEOUT = httpx.Timeout(600.0, connect=10.0)
RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
# A server asking for a longer pause than this gets an error instead: a notebook cell
# that sits silent for minutes looks hung.
MAX_RETRY_AFTER = 60.0
# finish_reason -> the neutral stop reasons the rest of the package logs.
STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
}
# How servers say "prompt over the window": OpenAI and vLLM codes/words, llama.cpp's type.
TOO_LONG_CODES = ("context_length_exceeded", "exceed_context_size_error")
TOO_LONG_WORDS = ("maximum context length", "context length", "context size", "too many tokens")
# Where OpenAI-compatible servers put a model's reasoning: DeepSeek and older vLLM use
# reasoning_content, OpenRouter, Ollama and newer vLLM reasoning. Passed back under its own name.
REASONING_FIELDS = ("reasoning_content", "reasoning")


class OpenAIProvider:
    name = "openai"

    def __init__(
        self,
        *,
        model: str | None = None,
        context_window: int | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        backoff: float = 0.5,
        timeout: float | httpx.Timeout | None = None,
        max_output_tokens: int | None = None,
        reasoning_effort: str = "",
        send_images: str = "auto",
    ) -> None:
        self.base_url = (base_url or wire.env(URL_VAR) or DEFAULT_BASE_URL).rstrip("/")
        host = (urlsplit(self.base_url).hostname or "").lower()
        self.is_openai = host == "api.openai.com"
        key = api_key or wire.env(KEY_VAR)
        if not key and self.is_openai:
            raise wire.missing_key("OpenAI", KEY_VAR)  # local servers (Ollama, llama.cpp) need none
        self.model = model or default_model("openai")
        self.info = model_info("openai", self.model)
        self.context_window = context_window or self.info.window
        self.max_output_tokens = max_output_tokens or self.info.output
        if reasoning_effort and self.info.known and self.info.thinking != "effort":
            raise ConfigError(
                f"model {self.model} takes no reasoning_effort: leave it empty "
                "(%config PseudoClaude.reasoning_effort = ''), or pick a reasoning model"
            )
        self.reasoning_effort = reasoning_effort
        self.send_images = wire.send_images_setting(send_images)
        self.max_retries = max_retries
        self.backoff = backoff
        self._key = key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(timeout=timeout or TIMEOUT, headers=headers)
        self._service = "OpenAI" if self.is_openai else SERVICE

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self.model!r}, base_url={self.base_url!r})"

    # --- requests -------------------------------------------------------------------------

    def stream(self, request: Request) -> Iterator[StreamEvent]:
        body = self._body(request) | {"stream": True, "stream_options": {"include_usage": True}}
        response = self._send(body)
        reader = _Reader()
        try:
            for line in response.iter_lines():
                yield from reader.feed(line, self)
        except httpx.HTTPError as exc:
            raise StreamError(
                f"the response stream from {self.base_url} broke off ({type(exc).__name__}); nothing "
                "from it was kept — run %agent again to retry"
            ) from exc
        finally:
            response.close()
        # No finish_reason, no Stop: the runner's assembler then keeps nothing of this response.
        yield from reader.finish()

    def complete(self, request: Request) -> Response:
        response = self._send(self._body(request) | {"stream": False})
        try:
            data = json.loads(response.read())
        except (httpx.HTTPError, ValueError) as exc:
            raise StreamError(f"{self._service} at {self.base_url} sent an unreadable answer: {exc}") from exc
        finally:
            response.close()
        choice = (data.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        reasoning = [
            Reasoning(kind=name, text=message[name])  # type: ignore[arg-type]
            for name in REASONING_FIELDS
            if isinstance(message.get(name), str) and message[name]
        ][:1]
        calls = []
        for tc in message.get("tool_calls") or []:
            fn = tc.get("function") or {}
            calls.append(
                ToolCall(id=tc.get("id") or _new_id(), name=fn.get("name", ""), arguments=_arguments(fn))
            )
        finish = choice.get("finish_reason")
        if not finish:
            raise StreamError(
                f"{self._service} answered without a finish_reason; nothing was kept — try again"
            )
        refusal = message.get("refusal")
        return Response(
            text=message.get("content") or refusal or "",
            tool_calls=calls,
            usage=_usage(data.get("usage")),
            stop_reason="refusal" if refusal else STOP_REASONS.get(finish, finish),
            reasoning=reasoning,
        )

    def _body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire_messages(request.system, request.messages, self._image_parts(request)),
        }
        # Chosen by model, not by host: OpenAI's reasoning models refuse max_tokens (also on
        # Azure); other servers may not know its successor. Never more than the model takes.
        key = "max_completion_tokens" if self.info.completion_tokens else "max_tokens"
        body[key] = clamp_output(request.max_tokens, self.max_output_tokens)
        if self.reasoning_effort and request.purpose == "agent":
            body["reasoning_effort"] = self.reasoning_effort
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t["name"],
                        "description": t.get("description", ""),
                        "parameters": t.get("input_schema") or {"type": "object", "properties": {}},
                    },
                }
                for t in request.tools
            ]
        return body

    def _image_parts(self, request: Request) -> ImageParts:
        """Each message's image parts as ``image_url`` data-URL parts, and notes for the rest."""

        def convert(m: Message) -> tuple[list[dict[str, Any]], list[str]]:
            sent, notes = wire.images_for(
                m,
                request.images,
                accepts=self.info.images,
                setting=self.send_images,
                service=self._service,
                model=self.model,
                limit=IMAGE_LIMIT,
            )
            parts = [
                {"type": "image_url", "image_url": {"url": f"data:{p.media_type};base64,{wire.b64(data)}"}}
                for p, data in sent
            ]
            return parts, notes

        return convert

    def _send(self, body: dict[str, Any]) -> httpx.Response:
        """POST with bounded retries; returns an open 2xx response, which the caller closes."""
        url = f"{self.base_url}/chat/completions"
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            try:
                response = self._client.send(self._client.build_request("POST", url, json=body), stream=True)
            except httpx.TimeoutException as exc:
                if not last:
                    self._pause(attempt, None)
                    continue
                raise ProviderError(
                    f"{self._service} at {self.base_url} did not answer in time "
                    f"(after {self.max_retries} retries): try again later"
                ) from exc
            except httpx.TransportError as exc:
                if not last:
                    self._pause(attempt, None)
                    continue
                reason = wire.quote(exc, self._key) or type(exc).__name__
                raise wire.unreachable(self._service, self.base_url, URL_VAR, reason) from exc
            if response.status_code < 300:
                return response
            try:
                response.read()
            except httpx.HTTPError:
                pass  # the status alone says enough
            finally:
                response.close()
            wait = retry_after(response.headers)
            # The server's own word wins, as the official SDKs honour it.
            should = response.headers.get("x-should-retry")
            retryable = should == "true" or (should != "false" and response.status_code in RETRY_STATUSES)
            retry = retryable and not last
            if retry and (wait is None or wait <= MAX_RETRY_AFTER):
                self._pause(attempt, wait)
                continue
            raise self._status_error(response, retries=attempt, wait=wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _pause(self, attempt: int, wait: float | None) -> None:
        if wait is None:
            # Exponential backoff with jitter, so many notebooks do not retry in lockstep.
            wait = self.backoff * (2**attempt) * (1 - 0.25 * random.random())
        time.sleep(max(0.0, wait))

    # --- errors -------------------------------------------------------------------------------

    def _status_error(self, response: httpx.Response, *, retries: int, wait: float | None) -> ProviderError:
        status = response.status_code
        try:
            payload = response.json()
        except (ValueError, httpx.StreamError):  # not JSON, or the body could not be read
            payload = None
        if status in (400, 413) and _too_long(payload):
            return ContextTooLong(
                f"{self._service}: {wire.quote(_message(payload), self._key)}", status=status
            )
        detail = wire.quote(_message(payload) or response.reason_phrase or "no details", self._key)
        if 300 <= status < 400:
            where = response.headers.get("location", "elsewhere")
            return ProviderError(
                f"{self.base_url} redirects ({status}) to {where}: set {URL_VAR} to the final URL",
                status=status,
            )
        if status in (401, 403):
            return wire.key_rejected(self._service, KEY_VAR, status)
        if status == 404:
            return wire.model_missing(self._service, self.model, self.base_url, status, detail)
        if status in RETRY_STATUSES:
            if wait is not None and wait > MAX_RETRY_AFTER:
                detail += f"; it asks to wait {wait:.0f} s"
            return wire.busy(self._service, status, retries, detail)
        return wire.refused(self._service, status, detail)

    def stream_error(self, payload: Any) -> ProviderError:
        """An error object sent as a ``data:`` chunk after the stream began."""
        text = wire.quote(_message(payload) or payload, self._key)
        if _too_long(payload):
            return ContextTooLong(f"{self._service}: {text}", status=400)
        return StreamError(
            f"{self._service} reported an error mid-stream ({text}); nothing from this response was "
            "kept — try again"
        )


class _Reader:
    """``data:`` lines in, neutral events out; Stop only once a finish_reason arrived."""

    def __init__(self) -> None:
        self.calls: dict[int, dict[str, Any]] = {}  # stream index -> {"id", "name", "started", "args"}
        self.order: list[dict[str, Any]] = []
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.done = False
        self.reasoning: dict[str, list[str]] = {}  # field name -> pieces
        self.refused = False

    def feed(self, line: str, provider: OpenAIProvider) -> Iterator[StreamEvent]:
        # SSE comments (": keep-alive"), event names and blank lines carry nothing here; after
        # [DONE] the rest of the body is read only so the connection can be reused.
        if not self.done and line.startswith("error:"):
            # Older llama.cpp servers: ``error: {"code": 400, "message": …, "type": …}``.
            raise provider.stream_error(_error_line(line[6:].strip()))
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
                f"{provider.base_url} sent a chunk that is not JSON ({wire.quote(payload)}); nothing "
                "from this response was kept"
            ) from None
        if chunk.get("error"):
            raise provider.stream_error(chunk)
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
            self.usage = _usage(chunk["usage"])

    def _tool_delta(self, position: int, tc: dict[str, Any]) -> Iterator[StreamEvent]:
        fn = tc.get("function") or {}
        index = tc.get("index", position)
        call = self.calls.get(index)
        new_id = tc.get("id")
        # A second whole call under an index already used (some Ollama versions number
        # every call 0) is a new call, not more arguments for the first.
        if call is None or (new_id and fn.get("name") and new_id != call["id"]):
            call = {"id": new_id or _new_id(), "name": "", "started": False, "args": []}
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


# issue-14: OpenAI takes images of up to 20 MB each (50 MB a request); other servers follow it.
IMAGE_LIMIT = 20 << 20
ImageParts = Callable[[Message], tuple[list[dict[str, Any]], list[str]]]


def wire_messages(
    system: str, messages: list[Message], images: ImageParts | None = None
) -> list[dict[str, Any]]:
    """Neutral messages as chat-completions messages: system first, results as ``tool``.

    A ``tool`` message holds text only, so the images of a step's results follow its tool
    messages in one user message of ``image_url`` parts (issue-14); a model that takes no
    images gets each image's text note in the tool message instead.
    """
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    loop_start = _current_turn(messages)
    for group in wire.turns(messages):
        if group[0].role == "assistant":
            text = "\n\n".join(m.content for m in group if m.content.strip())
            calls = [c for m in group for c in m.tool_calls]
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            # The reasoning of the running tool loop goes back (DeepSeek's thinking mode
            # refuses step 2 without it); that of earlier turns is not needed again.
            for m in group:
                if m.id in loop_start:
                    for r in m.reasoning:
                        if r.kind in REASONING_FIELDS and r.text:
                            entry[r.kind] = entry.get(r.kind, "") + r.text
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                    }
                    for c in calls
                ]
            out.append(entry)
            continue
        texts: list[str] = []
        pictures: list[dict[str, Any]] = []
        for m in group:
            parts, notes = images(m) if images is not None and m.parts else ([], [])
            if m.tool_result is not None:
                r = m.tool_result
                content = f"Error: {r.content}" if r.is_error else r.content
                content = "\n".join([content, *notes])
                out.append({"role": "tool", "tool_call_id": r.call_id, "content": content})
                if parts:
                    pictures.append({"type": "text", "text": f"Images shown by tool call {r.call_id}:"})
                    pictures += parts
            else:
                text = "\n".join([m.content, *notes]) if notes else m.content
                if text.strip():
                    texts.append(text)
                pictures += parts
        if pictures:
            # One user message after the tool messages (none may come between them and the
            # assistant's calls): the text first, then the images.
            lead = [{"type": "text", "text": "\n\n".join(texts)}] if texts else []
            out.append({"role": "user", "content": lead + pictures})
        elif texts:
            out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


def _current_turn(messages: list[Message]) -> set[str]:
    """Ids of the assistant messages after the last user text: the running turn's tool loop."""
    ids: set[str] = set()
    for m in reversed(messages):
        if m.role == "user" and m.tool_result is None and m.content.strip():
            break
        if m.role == "assistant":
            ids.add(m.id)
    return ids


def _error_line(text: str) -> dict[str, Any]:
    """An ``error:`` SSE line's payload as an error body: a JSON object, or plain words."""
    try:
        obj = json.loads(text)
    except ValueError:
        return {"error": {"message": text}}
    if isinstance(obj, dict) and "error" in obj:
        return obj
    return {"error": obj if isinstance(obj, dict) else {"message": str(obj)}}


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asks to wait: ``retry-after-ms``, ``retry-after`` seconds or date."""
    try:
        return float(headers["retry-after-ms"]) / 1000
    except (KeyError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    when = email.utils.parsedate_tz(value)
    return None if when is None else max(0.0, email.utils.mktime_tz(when) - time.time())


def _usage(u: dict[str, Any] | None) -> Usage:
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


def _arguments(fn: dict[str, Any]) -> dict[str, Any]:
    raw = fn.get("arguments")
    if isinstance(raw, dict):
        return raw
    return parse_arguments(raw or "{}", str(fn.get("name")))


def _message(payload: Any) -> str:
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict):
            return str(error.get("message") or "")
        if isinstance(error, str):
            return error  # Ollama: {"error": "model \"x\" not found"}
        return str(payload.get("message") or payload.get("detail") or "")
    return ""


def _too_long(payload: Any) -> bool:
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and (
        error.get("code") in TOO_LONG_CODES or error.get("type") in TOO_LONG_CODES
    ):
        return True
    text = _message(payload).lower()
    return any(words in text for words in TOO_LONG_WORDS)


def _new_id() -> str:
    # Ids must be unique within a session: spilled results are stored by call id.
    return f"call_{uuid.uuid4().hex[:24]}"
