"""The OpenAI-compatible provider: ``/chat/completions`` over ``httpx``, streamed.

One wire format, many servers: OpenAI, Ollama, vLLM, llama.cpp. This module owns the
request body, its own bounded retries for 429/5xx that honour ``retry-after`` and
``x-should-retry``, and the mapping of failures to one-line ``ProviderError``s. The
translation is split by direction: ``openai_messages`` turns neutral messages into
chat-completions messages, ``openai_stream`` reads ``data:`` chunks back into neutral
events. Nothing here knows about the turn loop.
"""

from __future__ import annotations

import email.utils
import json
import random
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..errors import ConfigError, ContextTooLong, ProviderError, StreamError
from ..messages import Message, Reasoning, ToolCall
from . import clients, wire
from .base import Request, Response, StreamEvent
from .models import clamp_output, default_model, model_info

# The translation both ways lives in openai_messages (out) and openai_stream (back); these
# names are re-exported because they were importable from here before the split.
from .openai_messages import IMAGE_LIMIT, REASONING_FIELDS, ImageParts, wire_messages
from .openai_stream import STOP_REASONS, ChunkReader, call_arguments, new_call_id, usage_of
from .window import Learned, cached, probe, prompt_in_error, remember, window_in_error
from .wire_prefix import Body, EncodedHistory

SERVICE = "the OpenAI-compatible endpoint"
# reasoning_effort as the OpenAI API documents it (gpt-5.x: none and xhigh; o-series: low to high).
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
KEY_VAR, URL_VAR = "OPENAI_API_KEY", "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
TIMEOUT = httpx.Timeout(600.0, connect=10.0)
JSON = {"Content-Type": "application/json"}
RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))
# A server asking for a longer pause than this gets an error instead: a notebook cell
# that sits silent for minutes looks hung.
MAX_RETRY_AFTER = 60.0
# How servers say "prompt over the window": OpenAI and vLLM codes/words, llama.cpp's type.
TOO_LONG_CODES = ("context_length_exceeded", "exceed_context_size_error")
TOO_LONG_WORDS = ("maximum context length", "context length", "context size", "too many tokens")


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
        key, url = wire.endpoint(KEY_VAR, URL_VAR, api_key, base_url)
        self.base_url = (url or DEFAULT_BASE_URL).rstrip("/")
        host = (urlsplit(self.base_url).hostname or "").lower()
        self.is_openai = host == "api.openai.com"
        if not key and self.is_openai:
            raise wire.missing_key("OpenAI", KEY_VAR)  # local servers (Ollama, llama.cpp) need none
        self.model = model or default_model("openai")
        self.info = model_info("openai", self.model)
        self.context_window = context_window or self.info.window
        # Where the window came from, for %context; a local server is asked (learn_window).
        self.window_stated = bool(context_window)
        self.window_source = (
            "--context-window"
            if context_window
            else ("the model table" if self.info.known else "the default for an unknown model")
        )
        self.supports_tools: bool | None = None  # llama.cpp /props says, when asked
        self.max_output_tokens = max_output_tokens or self.info.output
        if reasoning_effort and reasoning_effort.lower() not in EFFORTS:
            raise ConfigError(
                f"--effort {reasoning_effort!r} is not a reasoning_effort the OpenAI API documents; "
                f"use one of {', '.join(EFFORTS)} (or leave it empty)"
            )
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
        timeout = timeout or TIMEOUT
        # One client per configuration, reused by every run (a new one costs 0.3–0.6 s).
        self._client_key = ("openai", self.base_url, key, repr(timeout))
        base_url = self.base_url
        self._make_client = lambda: httpx.Client(
            timeout=timeout, headers=headers, verify=wire.tls_for(base_url)
        )
        self._service = "OpenAI" if self.is_openai else SERVICE
        # issue 34: each step encodes only the new messages, also in the next %agent run
        self._encoded = EncodedHistory.shared((self.base_url, self.model, self.send_images))

    @property
    def _client(self) -> httpx.Client:
        return clients.shared(self._client_key, self._make_client)

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self.model!r}, base_url={self.base_url!r})"

    def learn_window(self) -> Learned | None:
        """Ask the server for its window once per base URL and model (cached); adopt it.

        An explicit ``--context-window`` wins and OpenAI's own API is not asked (its
        models are in the table). None when nothing was asked.
        """
        if self.window_stated or self.is_openai:
            return None
        learned = cached(self.base_url, self.model)
        if learned is None:
            learned = probe(self._client, self.base_url, self.model)
            if learned is None:
                return None  # nobody listened: ask again next time
            remember(self.base_url, self.model, learned)
        self.adopt_window(learned)
        return learned

    def adopt_window(self, learned: Learned) -> None:
        if learned.window and not self.window_stated:
            self.context_window, self.window_source = learned.window, learned.source
        if learned.supports_tools is not None:
            self.supports_tools = learned.supports_tools

    # --- requests -------------------------------------------------------------------------

    def stream(self, request: Request) -> Iterator[StreamEvent]:
        body = self._body(request) | {"stream": True, "stream_options": {"include_usage": True}}
        response = self._send(body)
        reader = ChunkReader(self.base_url, self.stream_error)
        for line in self.lines(response, "response stream"):
            yield from reader.feed(line)
        # No finish_reason, no Stop: the runner's assembler then keeps nothing of this response.
        yield from reader.finish()

    def lines(self, response: httpx.Response, what: str) -> Iterator[str]:
        """A streamed answer's lines, then the response closed; a body that breaks off is a
        ``StreamError`` (the Responses API's stream reads through here too)."""
        try:
            yield from response.iter_lines()
        except httpx.HTTPError as exc:
            raise StreamError(
                f"the {what} from {self.base_url} broke off ({type(exc).__name__}); nothing "
                "from it was kept — run %agent again to retry"
            ) from exc
        finally:
            response.close()

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
                ToolCall(
                    id=tc.get("id") or new_call_id(), name=fn.get("name", ""), arguments=call_arguments(fn)
                )
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
            usage=usage_of(data.get("usage")),
            stop_reason="refusal" if refusal else STOP_REASONS.get(finish, finish),
            reasoning=reasoning,
        )

    def _body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire_messages(
                request.system,
                request.messages,
                self._image_parts(request),
                self._encoded.using(request.images),
            ),
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

    def _send(self, body: dict[str, Any], path: str = "/chat/completions") -> httpx.Response:
        """POST to ``path`` with bounded retries; returns an open 2xx response, which the caller
        closes. The Responses API (``openai_responses``) sends through here too."""
        url = f"{self.base_url}{path}"
        for attempt in range(self.max_retries + 1):
            last = attempt == self.max_retries
            try:
                # In pieces with their length (not chunked): the body is sent as it is encoded.
                content = Body(body)
                headers = JSON | {"Content-Length": str(len(content))}
                request = self._client.build_request("POST", url, content=content, headers=headers)
                response = self._client.send(request, stream=True)
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
        try:
            payload = response.json()
        except (ValueError, httpx.StreamError):  # not JSON, or the body could not be read
            payload = None
        error = self._mapped(response, payload, retries=retries, wait=wait)
        body = payload.get("error") if isinstance(payload, dict) else None
        if isinstance(body, dict):
            code, param = body.get("code"), body.get("param")
            error.code = code if isinstance(code, str) else None
            error.param = param if isinstance(param, str) else None
        return error

    def _mapped(
        self, response: httpx.Response, payload: Any, *, retries: int, wait: float | None
    ) -> ProviderError:
        status = response.status_code
        if status in (400, 413) and _too_long(payload):
            return ContextTooLong(
                f"{self._service}: {wire.quote(_message(payload), self._key)}",
                status=status,
                window=window_in_error(payload),
                prompt=prompt_in_error(payload),
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
            return ContextTooLong(
                f"{self._service}: {text}",
                status=400,
                window=window_in_error(payload),
                prompt=prompt_in_error(payload),
            )
        return StreamError(
            f"{self._service} reported an error mid-stream ({text}); nothing from this response was "
            "kept — try again"
        )


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


def api_for(setting: str, chat: OpenAIProvider) -> str:
    """``openai_api`` resolved: ``auto`` is the Responses API on api.openai.com, chat elsewhere.

    Here, not in ``openai_responses``: a chat-completions run decides without importing the
    Responses provider (issue 47: its first request waits for no module it does not use)."""
    if setting in ("responses", "chat"):
        return setting
    return "responses" if chat.is_openai else "chat"


__all__ = [
    "ChunkReader",
    "DEFAULT_BASE_URL",
    "IMAGE_LIMIT",
    "ImageParts",
    "MAX_RETRY_AFTER",
    "OpenAIProvider",
    "REASONING_FIELDS",
    "RETRY_STATUSES",
    "STOP_REASONS",
    "api_for",
    "retry_after",
    "wire_messages",
]
