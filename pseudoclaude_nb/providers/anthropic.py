"""The Anthropic provider: the official ``anthropic`` SDK, streamed, with tools and prompt caching.

It owns the requests: the translation between neutral messages and the Messages API — merged
turns, ``tool_use``/``tool_result`` blocks, the ``cache_control`` breakpoints
(``conversation_breakpoints``), the encoded prefix reused across steps — extended thinking
(``thinking_budget``), the output cap clamped to the model's, and the mapping of SDK errors to
one-line ``ProviderError``s. Reading what comes back is ``anthropic_stream``'s. Retries are the
SDK's own (429, 5xx, 529 and connection errors, honouring ``retry-after``). It knows nothing of
the turn loop, tools or compaction — but for the server's own (issue 31, ``--strategy api``):
with ``server_context`` set, agent requests carry ``context_management`` edits and their beta
headers, and a ``compaction`` block of the history goes back exactly as it came.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx2
from anthropic.types import Message as ApiMessage
from anthropic.types import RawMessageStreamEvent

from .. import provider_blocks
from ..errors import ConfigError, ContextTooLong, ProviderError, StreamError
from ..messages import Message, Reasoning, ToolCall
from . import clients, wire
from .anthropic_stream import COMPACTION, THINKING, Reader, reasoning_of, usage_of
from .base import ImageSource, Request, Response, ServerContext, Stop, StreamEvent
from .models import clamp_output, default_model, model_info
from .window import prompt_in_error, window_in_error
from .wire_prefix import Body, EncodedHistory

SERVICE = "Anthropic"
KEY_VAR, URL_VAR = "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"
DEFAULT_BASE_URL = "https://api.anthropic.com"
EPHEMERAL = {"type": "ephemeral"}
# Long answers stream for minutes; a dead host should fail in seconds. Not the SDK's
# default object, so ``complete()`` skips the SDK's 10-minute non-streaming guess.
TIMEOUT = httpx2.Timeout(600.0, connect=10.0)
# The API's words for a prompt over the window (400), or a body over its size limit (413).
TOO_LONG = ("prompt is too long", "exceed context limit", "exceeds the context window")
# The API's floor for a manual thinking budget; the budget must also stay below max_tokens.
MIN_THINKING_BUDGET = 1024
# Manual-budget models think between tool calls only with this beta (adaptive ones always do).
INTERLEAVED_BETA = "interleaved-thinking-2025-05-14"
# issue 31, --strategy api: server-side compaction (the ``compact_20260112`` edit) and context
# editing (``clear_tool_uses_20250919``) are in beta behind these headers; the API's floor for
# a compaction trigger is 50,000 input tokens.
COMPACT_BETA = "compact-2026-01-12"
CONTEXT_EDITING_BETA = "context-management-2025-06-27"
MIN_COMPACT_TRIGGER = 50_000
# What goes back before an assistant turn's text, in the order it came: thinking, and the
# server's compaction block.
SENT_BACK = (*THINKING, COMPACTION)


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
        history = ("anthropic", self.base_url, self.model, self.send_images)
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
            yield Stop(reader.stop_reason)

    def complete(self, request: Request) -> Response:
        with self._mapped_errors():
            message = self._create(request, stream=False)
        text = "".join(b.text for b in message.content if b.type == "text")
        reasoning = [r for r in map(reasoning_of, message.content) if r is not None]
        calls = [
            ToolCall(id=b.id, name=b.name, arguments=b.input if isinstance(b.input, dict) else {})
            for b in message.content
            if b.type == "tool_use"
        ]
        if not message.stop_reason:
            raise StreamError(f"{SERVICE} answered without a stop reason; nothing was kept — try again")
        return Response(
            text=text,
            tool_calls=calls,
            usage=usage_of(getattr(message, "usage", None)),
            stop_reason=message.stop_reason,
            reasoning=reasoning,
        )

    def _create(self, request: Request, *, stream: bool) -> Any:
        """POST /v1/messages through the SDK (its retries, errors and stream reading) with the
        body as ``wire_prefix`` encodes it: ``messages.create`` would copy, check and encode
        the whole history again on every step (~0.8 s at 10,000 messages)."""
        params = self._params(request)
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
            edits, needed = context_edits(self.server_context)
            params["context_management"] = {"edits": edits}
            betas += needed
        if betas:
            params["extra_headers"] = {"anthropic-beta": ",".join(betas)}
        if request.system:
            # Tools, then system, then messages form the cached prefix: this breakpoint
            # caches tools and system prompt, which every step of a session repeats.
            params["system"] = [{"type": "text", "text": request.system, "cache_control": EPHEMERAL}]
        if request.tools:
            params["tools"] = request.tools
            if not request.system:
                # No system prompt to carry the first breakpoint: the last tool definition does,
                # so the tool schemas are still cached (tools come first in the prefix).
                params["tools"] = [*request.tools[:-1], {**request.tools[-1], "cache_control": EPHEMERAL}]
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
        return encoded.using(images).messages(
            [], messages, convert, _no_loop, _never_changes, last=_breakpoints
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
        role = group[0].role
        blocks: list[dict[str, Any]] = []
        if role == "user":
            # The API wants a turn's tool_result blocks before any text in it.
            for m in group:
                r = m.tool_result
                if r is None:
                    continue
                pictures, notes = self._images(m, images, side)
                text = "\n".join([r.content, *notes])
                block: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": r.call_id,
                    # Images go inside the result, beside its text (the documented form).
                    "content": [_text(text), *pictures] if pictures else text,
                }
                if r.is_error:
                    block["is_error"] = True
                blocks.append(block)
            for m in group:
                if m.tool_result is not None:
                    continue
                pictures, notes = self._images(m, images, side)
                text = "\n".join([m.content, *notes]) if notes else m.content
                if text.strip():
                    blocks.append(_text(text))
                blocks += pictures
            return {"role": "user", "content": blocks}
        for m in group:
            # Thinking first, unchanged: the API checks the signature of every block it
            # gets back, and requires the blocks before the tool_use they led to.
            # A compaction block likewise goes back verbatim, where it came (first).
            blocks += [_sent_back(r, server) for r in m.reasoning if r.kind in SENT_BACK]
            if m.content.strip():
                blocks.append(_text(m.content))
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls
            ]
        return {"role": "assistant", "content": blocks}

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


def _no_loop(_messages: list[Message]) -> set[str]:
    return set()  # a turn's form does not depend on the running tool loop here


def _never_changes(_group: list[Message], _loop: set[str]) -> bool:
    return False  # thinking blocks go back in every turn, while they are in the history


def _breakpoints(tail: list[list[dict[str, Any]]]) -> None:
    """Cache breakpoints on the open tail's turns (``conversation_breakpoints`` says which)."""
    turns = [turn[0] for turn in tail if turn]  # one Messages-API turn per group
    for at in conversation_breakpoints(turns):
        turns[at]["content"][-1]["cache_control"] = EPHEMERAL


def conversation_breakpoints(turns: list[dict[str, Any]]) -> list[int]:
    """The turns whose last block gets a ``cache_control`` breakpoint (with the system prompt's,
    at most 3 of the API's 4).

    The last turn's: the whole conversation is cached, so the next step pays full price only
    for what it adds. And the last stable turn's — the user turn that ended the previous
    request, where that request's breakpoint wrote the cache: the API looks for an earlier
    cache entry only up to 20 blocks before a breakpoint, and a step with many tool calls adds
    more blocks than that, which would make the next request write the whole prefix again.
    A breakpoint on that very block reads it back whatever the step added. Thinking blocks
    take no breakpoint.
    """
    marks = []
    stable = len(turns) - 3
    if stable >= 0 and turns[stable]["role"] == "user" and turns[-1]["role"] == "user":
        marks.append(stable)
    if turns:
        marks.append(len(turns) - 1)
    return [at for at in marks if turns[at]["content"] and turns[at]["content"][-1]["type"] not in SENT_BACK]


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def context_edits(ctx: ServerContext) -> tuple[list[dict[str, Any]], list[str]]:
    """``context_management.edits`` for ``ctx``, and the beta headers they need (the documented
    shapes: ``compact_20260112`` with an ``input_tokens`` trigger; ``clear_tool_uses_20250919``
    with a trigger and the tool uses to ``keep``)."""
    edits: list[dict[str, Any]] = []
    betas = [COMPACT_BETA]
    if ctx.clear_tool_results:
        edits.append(
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": ctx.clear_tool_results},
                "keep": {"type": "tool_uses", "value": ctx.keep_tool_uses},
            }
        )
        betas.append(CONTEXT_EDITING_BETA)
    compact: dict[str, Any] = {
        "type": "compact_20260112",
        "trigger": {"type": "input_tokens", "value": max(ctx.trigger, MIN_COMPACT_TRIGGER)},
    }
    if ctx.instructions:
        compact["instructions"] = ctx.instructions
    edits.append(compact)
    return edits, betas


def _sent_back(r: Reasoning, server: bool) -> dict[str, Any]:
    if r.kind != COMPACTION:
        return _thinking_block(r)
    block = provider_blocks.loaded(r.data)  # a log's block within the bounds, else None
    if block is None:
        block = {"type": COMPACTION, "content": None}  # the documented no-op: a failed compaction
    if server:
        return block  # verbatim: the fields as the API returned them
    summary = block.get("content")
    text = (
        summary
        if isinstance(summary, str) and summary.strip()
        else "(the provider's compaction left no summary)"
    )
    return _text(f"[summary of the earlier conversation, written by the provider's compaction]\n{text}")


def _thinking_block(r: Reasoning) -> dict[str, Any]:
    if r.kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": r.data or ""}
    return {"type": "thinking", "thinking": r.text, "signature": r.signature or ""}


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
