"""The Anthropic provider: the official ``anthropic`` SDK, streamed, with tools and prompt caching.

It owns the requests: the translation between neutral messages and the Messages API — merged
turns, ``tool_use``/``tool_result`` blocks, the ``cache_control`` breakpoints
(``conversation_breakpoints``), the encoded prefix reused across steps — extended thinking
(``thinking_budget``), the output cap clamped to the model's, and the mapping of SDK errors to
one-line ``ProviderError``s. Reading what comes back is ``anthropic_stream``'s. Retries are the
SDK's own (429, 5xx, 529 and connection errors, honouring ``retry-after``). It knows nothing of
the turn loop, tools or compaction — but for the server's own (issue 31, ``--strategy api``):
with ``server_context`` set, agent requests carry ``context_management`` edits and their beta
headers, and a ``compaction`` block of the history goes back exactly as it came. Anthropic's
own features (issue 43: on-demand compaction, ``pause_after_compaction``, the cache TTL, the cache
diagnosis) are worded in ``anthropic_native``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx2
from anthropic.types import Message as ApiMessage
from anthropic.types import RawMessageStreamEvent

from ..errors import ConfigError, ContextTooLong, ProviderError, StreamError
from ..messages import Message, ToolCall
from . import anthropic_messages as messages_api
from . import anthropic_native as native
from . import clients, wire
from .anthropic_messages import conversation_breakpoints as conversation_breakpoints  # tests import it here
from .anthropic_native import context_edits
from .anthropic_stream import (
    Reader,
    applied_edits,
    cache_diagnosis,
    fields_of,
    reasoning_of,
    usage_of,
)
from .base import Compaction, ImageSource, ProviderNote, Request, Response, ServerContext, Stop, StreamEvent
from .models import clamp_output, default_model, model_info
from .window import prompt_in_error, window_in_error
from .wire_prefix import Body, EncodedHistory

SERVICE = "Anthropic"
KEY_VAR, URL_VAR = "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"
DEFAULT_BASE_URL = "https://api.anthropic.com"
EPHEMERAL = native.cache_control("5m")  # the 5-minute marker (``cache_ttl`` chooses per provider)
# Long answers stream for minutes; a dead host should fail in seconds. Not the SDK's
# default object, so ``complete()`` skips the SDK's 10-minute non-streaming guess.
TIMEOUT = httpx2.Timeout(600.0, connect=10.0)
# The API's words for a prompt over the window (400), or a body over its size limit (413).
TOO_LONG = ("prompt is too long", "exceed context limit", "exceeds the context window")
# The API's floor for a manual thinking budget; the budget must also stay below max_tokens.
MIN_THINKING_BUDGET = 1024
# Manual-budget models think between tool calls only with this beta (adaptive ones always do).
INTERLEAVED_BETA = "interleaved-thinking-2025-05-14"


# issue-14: the API refuses an image whose base64 text is over 5 MB (3.75 MB of bytes) or
# whose side is over 8,000 pixels.
IMAGE_LIMIT = (5 << 20) * 3 // 4
IMAGE_MAX_SIDE = 8000
MANY_IMAGES, MANY_IMAGES_MAX_SIDE = 20, 2000


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
        max_output_tokens: int | None = None,
        thinking_budget: int = 0,
        send_images: str = "auto",
        cache_ttl: str = "5m",
    ) -> None:
        key, url = wire.endpoint(KEY_VAR, URL_VAR, api_key, base_url)
        if not key:
            raise wire.missing_key(SERVICE, KEY_VAR)  # before any request, and before any session
        self.model = model or default_model("anthropic")
        self.info = model_info("anthropic", self.model)
        self.context_window = context_window or self.info.window
        self.max_output_tokens = max_output_tokens or self.info.output
        if thinking_budget and thinking_budget < MIN_THINKING_BUDGET:
            raise ConfigError(
                f"a thinking budget must be at least {MIN_THINKING_BUDGET} tokens (or 0 for off); "
                f"got {thinking_budget}"
            )
        if thinking_budget and self.info.known and self.info.thinking is None:
            raise ConfigError(
                f"model {self.model} has no extended thinking: leave --thinking out (or "
                "PseudoClaude.thinking_budget = 0), or pick a model that thinks (Claude 3.7 or later)"
            )
        self.thinking_budget = thinking_budget
        self.send_images = wire.send_images_setting(send_images)
        try:  # issue 43: every breakpoint's lifetime, 5 minutes (the API's default) or an hour
            self.cache_control = native.cache_control(cache_ttl)
        except ValueError as exc:
            raise ConfigError(f"{exc}: %config PseudoClaude.cache_ttl = '5m' or '1h'") from None
        self.cache_ttl = cache_ttl
        # Set by --strategy api before each agent request (``ManagesContext``); None: not asked.
        self.server_context: ServerContext | None = None
        # Why the last answer's compaction block was not kept (``provider_blocks``), else None.
        self.refused_block: str | None = None
        self.base_url = (url or DEFAULT_BASE_URL).rstrip("/")
        self.max_retries = max_retries
        self._key = key
        timeout = timeout or TIMEOUT
        # One SDK client per configuration, reused by every run (a new one costs 0.3–0.6 s).
        self._client_key = ("anthropic", self.base_url, key, max_retries, repr(timeout))
        self._make_client = lambda: anthropic.Anthropic(
            api_key=key, base_url=self.base_url, max_retries=max_retries, timeout=timeout
        )
        # issue 34: each step converts and encodes only the new turns, also in the next %agent run
        history = ("anthropic", self.base_url, self.model, self.send_images, cache_ttl)
        self._answers = ("anthropic", self.base_url, self.model)  # the cache diagnosis's chain
        self._encoded = EncodedHistory.shared(history)
        # issue 31: turns as --strategy api sends them (compaction blocks verbatim) are another form.
        self._encoded_server = EncodedHistory.shared((*history, "server-context"))

    @property
    def _client(self) -> anthropic.Anthropic:
        return clients.shared(self._client_key, self._make_client)

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self.model!r}, base_url={self.base_url!r})"

    # --- requests -------------------------------------------------------------------------

    def stream(self, request: Request) -> Iterator[StreamEvent]:
        reader = Reader()
        self.refused_block = None
        with self._mapped_errors():
            events = self._create(request, stream=True)
            with events:
                try:
                    for event in events:
                        yield from reader.feed(event)
                except anthropic.APITimeoutError:
                    raise
                except anthropic.APIConnectionError as exc:
                    # The server answered and the body broke off: SDK 2.17 wraps this in a
                    # connection error, which would wrongly say the server cannot be reached.
                    raise _broke_off(exc.__cause__ or exc) from exc
        # issue 41: a compaction block past the bounds is not kept; the answer is, and the api
        # strategy stops the run with this once the answer is in the conversation.
        if reader.refused is not None:
            self.refused_block = (
                f"{reader.refused}: refused; the answer it came with is kept, the block is not. "
                "The provider will read the whole history again on the next request (and may compact "
                "again); run %agent to go on, or use --strategy compact"
            )
        # Only a stream that said why it stopped ends with Stop; anything else makes the
        # runner's assembler raise StreamError and keep nothing of this response.
        if reader.stopped and reader.stop_reason:
            if request.purpose == "agent":
                native.Diagnosis.answered(self._answers, reader.message_id)
            cleared = native.cleared_line(reader.usage)
            if cleared:
                yield ProviderNote(cleared, "info")
            yield Stop(reader.stop_reason)

    def complete(self, request: Request) -> Response:
        with self._mapped_errors():
            message = self._create(request, stream=False)
        if request.purpose == "agent" and message.stop_reason:
            native.Diagnosis.answered(self._answers, getattr(message, "id", None))
        text = "".join(b.text for b in message.content if b.type == "text")
        reasoning = [r for r in map(reasoning_of, message.content) if r is not None]
        calls = [
            ToolCall(id=b.id, name=b.name, arguments=b.input if isinstance(b.input, dict) else {})
            for b in message.content
            if b.type == "tool_use"
        ]
        if not message.stop_reason:
            raise StreamError(f"{SERVICE} answered without a stop reason; nothing was kept — try again")
        said = applied_edits(getattr(message, "context_management", None))
        said |= cache_diagnosis(getattr(message, "diagnostics", None))
        return Response(
            text=text,
            tool_calls=calls,
            usage=usage_of(getattr(message, "usage", None)).model_copy(update=said),
            stop_reason=message.stop_reason,
            reasoning=reasoning,
        )

    def compact_on_demand(self, request: Request) -> Compaction:
        """On-demand compaction (issue 43, ``%compact`` under ``--strategy api``): ``request``'s
        messages summarized by the API into one signed ``compaction`` block (stop reason
        ``compaction``), which stands for them from now on; nothing is sampled after it."""
        params = native.on_demand_params(self._params(request))
        headers = params.pop("extra_headers", None) or {}
        betas = [b for b in headers.get("anthropic-beta", "").split(",") if b]
        params["extra_headers"] = {"anthropic-beta": ",".join([*betas, native.ON_DEMAND_BETA])}
        with self._mapped_errors():
            message = self._create(request, stream=False, params=params)
        usage = usage_of(getattr(message, "usage", None))
        if message.stop_reason not in ("compaction", "end_turn"):
            why = f"the compaction request stopped with {message.stop_reason!r}, not with its block"
            return Compaction(messages=[], summary="", usage=usage, error=why)
        return native.on_demand_compaction(list(message.content), usage, fields_of)

    def _create(self, request: Request, *, stream: bool, params: dict[str, Any] | None = None) -> Any:
        """POST /v1/messages through the SDK (its retries, errors and stream reading) with the
        body as ``wire_prefix`` encodes it: ``messages.create`` would copy, check and encode
        the whole history again on every step (~0.8 s at 10,000 messages)."""
        params = self._params(request) if params is None else params
        headers = params.pop("extra_headers", None) or {}
        content = Body(params | {"stream": True} if stream else params)
        return self._client.post(
            "/v1/messages",
            cast_to=ApiMessage,
            content=content,
            # Its length, not chunked: the body is sent in pieces as it is encoded.
            options={"headers": {**headers, "Content-Length": str(len(content))}},
            stream=stream,
            stream_cls=anthropic.Stream[RawMessageStreamEvent],
        )

    def _params(self, request: Request) -> dict[str, Any]:
        thinking, max_tokens = self._thinking_for(request)
        server = self.server_context is not None and request.purpose == "agent"
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": self.wire_messages(request.messages, request.images, server=server),
        }
        betas: list[str] = []
        if thinking is not None:
            # Temperature stays unset: the API allows no other value with thinking.
            params["thinking"] = thinking
            if thinking["type"] == "enabled" and request.tools:
                betas.append(INTERLEAVED_BETA)
        if server and self.server_context is not None:
            # An on-demand block and a compaction edit never go together (the API refuses it;
            # the SDK's tool runner checks the same): with one in the history, the api strategy
            # compacts on demand at its line instead.
            edits, needed = context_edits(
                self.server_context, compact=not native.holds_on_demand(request.messages)
            )
            if edits:
                params["context_management"] = {"edits": edits}
            betas += needed
            if native.holds_on_demand(request.messages):
                betas.append(native.ON_DEMAND_BETA)  # every request that carries the block
        if request.purpose == "agent":
            # issue 43: the API says why the prompt cache missed, against the previous answer.
            params["diagnostics"] = {"previous_message_id": native.Diagnosis.previous(self._answers)}
            betas.append(native.DIAGNOSIS_BETA)
        if betas:
            params["extra_headers"] = {"anthropic-beta": ",".join(betas)}
        mark = self.cache_control
        if request.system:
            # Tools, then system, then messages form the cached prefix: this breakpoint
            # caches tools and system prompt, which every step of a session repeats.
            params["system"] = [{"type": "text", "text": request.system, "cache_control": mark}]
        if request.tools:
            params["tools"] = request.tools
            if not request.system:
                # No system prompt to carry the first breakpoint: the last tool definition does,
                # so the tool schemas are still cached (tools come first in the prefix).
                params["tools"] = [*request.tools[:-1], {**request.tools[-1], "cache_control": mark}]
        return params

    def _thinking_for(self, request: Request) -> tuple[dict[str, Any] | None, int]:
        """(thinking config or None, max_tokens): the budget comes on top of the answer's room,
        and both fit the model's output cap (the API: 1,024 <= budget_tokens < max_tokens)."""
        plain = clamp_output(request.max_tokens, self.max_output_tokens)
        if request.purpose != "agent" or not self.thinking_budget:
            return None, plain
        total = clamp_output(request.max_tokens + self.thinking_budget, self.max_output_tokens)
        if self.info.thinking == "adaptive":
            return {"type": "adaptive"}, total
        # Over the cap, the answer keeps at least half of it and thinking gets the rest.
        budget = min(self.thinking_budget, total - min(request.max_tokens, total // 2))
        if budget < MIN_THINKING_BUDGET:
            return None, plain
        return {"type": "enabled", "budget_tokens": budget}, total

    # --- neutral messages -> Messages API --------------------------------------------------

    def wire_messages(
        self, messages: list[Message], images: ImageSource | None = None, *, server: bool = False
    ) -> list[dict[str, Any]]:
        """The Messages-API turns of ``messages``; those of the unchanged prefix (every turn but
        the last, while the history only grows) are reused from the last request, encoded.

        ``server``: a request with ``context_management`` (--strategy api), where a compaction
        block goes back as it came; elsewhere (a summary request, another strategy) the API is
        not asked to read one and gets its summary as text."""
        # More than 20 images in one request: the API refuses any side over 2,000 px. (The
        # prefix is kept only while there are at most 20: then the side never changes.) Counted
        # at the first turn with images: counting every message's cost ~5 ms a step at 10,000.
        side = 0

        def convert(group: list[Message], _loop: set[str]) -> list[dict[str, Any]]:
            nonlocal side
            if not side and any(m.parts for m in group):
                many = sum(len(m.parts) for m in messages) > MANY_IMAGES
                side = MANY_IMAGES_MAX_SIDE if many else IMAGE_MAX_SIDE
            return [self._turn(group, images, side or IMAGE_MAX_SIDE, server=server)]

        encoded = self._encoded_server if server else self._encoded
        mark = self.cache_control

        def breakpoints(tail: list[list[dict[str, Any]]]) -> None:
            messages_api.breakpoints(tail, mark)

        return encoded.using(images).messages(
            [], messages, convert, messages_api.no_loop, messages_api.never_changes, last=breakpoints
        )

    def _images(
        self, m: Message, source: ImageSource | None, side: int = 0
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """A message's image parts as ``image`` blocks (base64 source), and notes for the rest."""
        if not m.parts:
            return [], []
        sent, notes = wire.images_for(
            m,
            source,
            accepts=self.info.images,
            setting=self.send_images,
            service=SERVICE,
            model=self.model,
            limit=IMAGE_LIMIT,
            max_side=side or IMAGE_MAX_SIDE,
        )
        blocks = [
            {
                "type": "image",
                "source": {"type": "base64", "media_type": p.media_type, "data": wire.b64(data)},
            }
            for p, data in sent
        ]
        return blocks, notes

    def _turn(
        self, group: list[Message], images: ImageSource | None = None, side: int = 0, *, server: bool = False
    ) -> dict[str, Any]:
        return messages_api.turn(group, lambda m: self._images(m, images, side), server=server)

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
            # SDKs before 2.15 pass a connection dropped mid-body straight through.
            raise _broke_off(exc) from exc

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
            return ContextTooLong(
                f"{SERVICE}: {detail}",
                status=status,
                window=window_in_error(message),
                prompt=prompt_in_error(message),
            )
        if status == 413:
            return ContextTooLong(f"{SERVICE}: the request is too large ({detail})", status=status)
        if status in (401, 403):
            return wire.key_rejected(SERVICE, KEY_VAR, status)
        if status == 404:
            return wire.model_missing(SERVICE, self.model, self.base_url, status, detail)
        if status in (408, 429) or status >= 500:
            return wire.busy(SERVICE, status, _retries_taken(exc, self.max_retries), detail)
        return wire.refused(SERVICE, status, detail)


def _broke_off(exc: BaseException) -> StreamError:
    return StreamError(
        f"the {SERVICE} response stream broke off ({type(exc).__name__}); nothing from it was "
        "kept — run %agent again to retry"
    )


def _retries_taken(exc: anthropic.APIStatusError, configured: int) -> int:
    """Retries the SDK actually made: it numbers each attempt in a request header (a 429
    with ``x-should-retry: false`` is not retried at all)."""
    try:
        return int(exc.response.request.headers["x-stainless-retry-count"])
    except (AttributeError, KeyError, RuntimeError, ValueError):
        return configured


def _error_body(body: object) -> tuple[str | None, str]:
    """(error type, message) from ``{"type": "error", "error": {"type": …, "message": …}}``."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return error.get("type"), str(error.get("message") or "")
    return None, ""
