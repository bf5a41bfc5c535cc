"""The OpenAI provider over the Responses API (``POST /responses``), streamed (issue 43).

OpenAI's primary API for its current models. This module owns the requests: the body (input
items from ``openai_responses_items``, ``instructions``, tools in the Responses shape, the output
cap, ``store``, ``include`` of the reasoning's encrypted content so a stateless tool loop carries
it back, ``context_management`` compaction under ``--strategy api``), server state (``store:
true`` and ``previous_response_id`` with only the new items, ``openai_chain``), the standalone
``/responses/compact`` behind ``%compact``, and the two fallbacks, each said: a server whose
``/responses`` answers 404 is asked through chat completions from then on, and a stored response
the server no longer holds (``previous_response_not_found``) gets the whole input once. Reading
the events is ``openai_responses_stream``'s.

It composes the chat-completions provider rather than copying it: the endpoint, key, client,
bounded retries, window learning, model table and the mapping of failures to one-line
``ProviderError``s are ``OpenAIProvider``'s, and its ``stream``/``complete`` are the fallback.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import orjson

from .. import provider_blocks
from ..errors import ConfigError, ProviderError, StreamError
from ..messages import ORIGIN_OPENAI, Message, Reasoning
from . import wire
from .base import Compaction, ProviderNote, Request, Response, ServerContext, StreamAssembler, StreamEvent
from .models import clamp_output
from .openai_chain import Chains, Link
from .openai_compat import IMAGE_LIMIT, OpenAIProvider
from .openai_compat import api_for as api_for  # its name here too (it lives where a chat run reads it)
from .openai_responses_items import ImageParts, group_items, items, tool
from .openai_responses_stream import EventReader, usage_of
from .window import Learned
from .wire_prefix import EncodedHistory

PATH, COMPACT_PATH = "/responses", "/responses/compact"
# A server without the Responses API: 404 (or 405) at /responses that is not a missing model.
NO_API = (404, 405)
_NO_RESPONSES: set[str] = set()  # base URLs that answered so: asked through chat from then on
ENCRYPTED_REASONING = "reasoning.encrypted_content"


class ResponsesProvider:
    name = "openai"
    api = "responses"

    def __init__(self, chat: OpenAIProvider, *, server_state: bool = False) -> None:
        self.chat = chat
        self.server_state = server_state
        # Set by --strategy api before each agent request (``ManagesContext``); None: not asked.
        self.server_context: ServerContext | None = None
        self._chain = ("responses", chat.base_url, chat.model)
        # Full inputs (stateless, or a chain's first request) encode only the new turns.
        self._encoded = EncodedHistory.shared((chat.base_url, chat.model, chat.send_images, "responses"))

    def __repr__(self) -> str:
        return f"ResponsesProvider(model={self.model!r}, base_url={self.base_url!r})"

    # --- the provider's face: the chat provider's endpoint, model and window ------------------

    @property
    def model(self) -> str:
        return self.chat.model

    @model.setter
    def model(self, model: str) -> None:
        self.chat.model = model

    @property
    def context_window(self) -> int:
        return self.chat.context_window

    @context_window.setter
    def context_window(self, window: int) -> None:
        self.chat.context_window = window

    @property
    def max_output_tokens(self) -> int:
        return self.chat.max_output_tokens

    @max_output_tokens.setter
    def max_output_tokens(self, tokens: int) -> None:
        self.chat.max_output_tokens = tokens

    @property
    def base_url(self) -> str:
        return self.chat.base_url

    @property
    def is_openai(self) -> bool:
        return self.chat.is_openai

    @property
    def window_source(self) -> str:
        return self.chat.window_source

    def learn_window(self) -> Learned | None:
        return self.chat.learn_window()

    def adopt_window(self, learned: Learned) -> None:
        self.chat.adopt_window(learned)

    # --- requests ---------------------------------------------------------------------------

    def stream(self, request: Request) -> Iterator[StreamEvent]:
        if self.base_url in _NO_RESPONSES:
            yield from self._chat_stream(request)
            return
        reader = EventReader(self.base_url, self.chat.stream_error)
        try:
            response, chained, notes = self._send(request, stream=True)
        except _NoResponsesApi as missing:
            yield ProviderNote(missing.note)
            yield from self._chat_stream(request)
            return
        for note in notes:
            yield ProviderNote(note)
        for line in self.chat.lines(response, "Responses stream"):
            yield from reader.feed_line(line)
        reader.finish()
        self._stored(request, reader, chained)

    def complete(self, request: Request) -> Response:
        if self.base_url in _NO_RESPONSES:
            return self.chat.complete(request)
        try:
            response, chained, notes = self._send(request, stream=False)
        except _NoResponsesApi as missing:
            answer = self.chat.complete(request)
            answer.notes.append(missing.note)
            return answer
        try:
            data = orjson.loads(response.read())
        except (httpx.HTTPError, orjson.JSONDecodeError) as exc:
            raise StreamError(f"OpenAI at {self.base_url} sent an unreadable answer: {exc}") from exc
        finally:
            response.close()
        reader = EventReader(self.base_url, self.chat.stream_error)
        assembler = StreamAssembler()
        for event in reader.read(data if isinstance(data, dict) else {}):
            if isinstance(event, ProviderNote):
                notes.append(event.text)
            assembler.feed(event)
        answer = assembler.finish()
        answer.notes += notes
        self._stored(request, reader, chained)
        return answer

    def compact_on_demand(self, request: Request) -> Compaction:
        """``%compact`` under ``--strategy api``: ``POST /responses/compact`` compacts ``request``'s
        messages into the user messages it keeps and one opaque ``compaction`` item, which stand
        for them from now on (developers.openai.com, "Compaction": standalone compaction)."""
        body: dict[str, Any] = {"model": self.model, "input": items(request.messages, self._images(request))}
        if request.system:
            body["instructions"] = request.system
        response = self.chat._send(body, COMPACT_PATH)
        try:
            data = orjson.loads(response.read())
        except (httpx.HTTPError, orjson.JSONDecodeError) as exc:
            raise StreamError(f"OpenAI at {self.base_url} sent an unreadable compaction: {exc}") from exc
        finally:
            response.close()
        return compacted(data if isinstance(data, dict) else {})

    def _chat_stream(self, request: Request) -> Iterator[StreamEvent]:
        if self.server_context is not None and request.purpose == "agent":
            raise ConfigError(
                f"{self.base_url} has no Responses API (its /responses answered 404), and --strategy api "
                "needs it for the provider's compaction: use --strategy compact or rollover with this "
                "server, or a server that has /responses"
            )
        yield from self.chat.stream(request)

    def _send(self, request: Request, *, stream: bool) -> tuple[httpx.Response, bool, list[str]]:
        """POST the request (chained when server state allows); the fallbacks happen here.
        Returns the open response, whether it was chained, and what to say."""
        notes: list[str] = []
        body, chained = self._body(request, chain=True)
        body["stream"] = stream
        try:
            return self.chat._send(body, PATH), chained, notes
        except ProviderError as exc:
            if exc.status in NO_API and exc.code != "model_not_found":
                _NO_RESPONSES.add(self.base_url)
                raise _NoResponsesApi(self.base_url, exc.status) from exc
            if not (chained and _forgotten(exc)):
                raise
            Chains.forget(self._chain)
            notes.append(
                f"OpenAI no longer holds the stored response this conversation continued "
                f"({body['previous_response_id']}: {exc.code or exc.status}); the whole conversation "
                "was sent once, stored, and a new chain starts from it"
            )
        body, _ = self._body(request, chain=False)
        body["stream"] = stream
        return self.chat._send(body, PATH), False, notes

    def _body(self, request: Request, *, chain: bool) -> tuple[dict[str, Any], bool]:
        agent = request.purpose == "agent"
        store = self.server_state and agent
        images = self._images(request)
        continued = (
            Chains.continues(self._chain, request.thread, request.messages) if store and chain else None
        )
        body: dict[str, Any] = {"model": self.model}
        if continued is not None:
            response_id, start = continued
            body["previous_response_id"] = response_id
            body["input"] = items(request.messages[start:], images)
        else:

            def convert(group: list[Message], _loop: set[str]) -> list[dict[str, Any]]:
                return group_items(group, images)

            body["input"] = self._encoded.using(request.images).messages(
                [], request.messages, convert, _no_loop, _never_changes
            )
        if request.system:
            # Not carried over from a previous response: sent with every request.
            body["instructions"] = request.system
        body["max_output_tokens"] = clamp_output(request.max_tokens, self.max_output_tokens)
        body["store"] = store  # said either way: the API's default is to store
        if self.chat.info.thinking == "effort":
            body["include"] = [ENCRYPTED_REASONING]  # reasoning goes back without server state too
        if self.chat.reasoning_effort and agent:
            body["reasoning"] = {"effort": self.chat.reasoning_effort}
        if request.tools:
            body["tools"] = [tool(t) for t in request.tools]
        ctx = self.server_context
        if ctx is not None and agent and ctx.compact:
            body["context_management"] = [{"type": "compaction", "compact_threshold": ctx.trigger}]
        return body, continued is not None

    def _stored(self, request: Request, reader: EventReader, chained: bool) -> None:
        """After a whole answer: the chain goes on from it (server state), or stops where the
        answer cannot be continued (its calls are not whole, so the runner keeps none of it)."""
        if not (self.server_state and request.purpose == "agent"):
            return
        if reader.response_id and reader.calls_whole():
            Chains.stored(
                self._chain,
                Link(request.thread, request.messages, reader.response_id, tuple(reader.call_ids)),
            )
        else:
            Chains.forget(self._chain)

    def _images(self, request: Request) -> ImageParts:
        """Each message's image parts as ``input_image`` data-URL parts, and notes for the rest."""

        def convert(m: Message) -> tuple[list[dict[str, Any]], list[str]]:
            sent, notes = wire.images_for(
                m,
                request.images,
                accepts=self.chat.info.images,
                setting=self.chat.send_images,
                service="OpenAI",
                model=self.model,
                limit=IMAGE_LIMIT,
            )
            parts = [
                {
                    "type": "input_image",
                    "image_url": f"data:{p.media_type};base64,{wire.b64(data)}",
                    "detail": "auto",
                }
                for p, data in sent
            ]
            return parts, notes

        return convert


class _NoResponsesApi(Exception):
    def __init__(self, base_url: str, status: int | None) -> None:
        super().__init__(base_url)
        self.note = (
            f"{base_url}/responses answered {status}: this server has no Responses API, so requests "
            "go through chat completions from now on (%config PseudoClaude.openai_api = 'chat' skips "
            "the check)"
        )


def _forgotten(exc: ProviderError) -> bool:
    """The server no longer holds (or never held) the response ``previous_response_id`` named."""
    return exc.code == "previous_response_not_found" or exc.param == "previous_response_id"


def _no_loop(_messages: list[Message]) -> set[str]:
    return set()  # reasoning items go back in every turn: no turn's form depends on the loop


def _never_changes(_group: list[Message], _loop: set[str]) -> bool:
    return False


def compacted(data: dict[str, Any]) -> Compaction:
    """A ``/responses/compact`` answer (the SDK's ``CompactedResponse``: the user messages, then one
    compaction item; its ``usage``) as what stands for the messages it compacted."""
    usage = usage_of(data.get("usage"))
    kept: list[Message] = []
    block: Reasoning | None = None
    for item in data.get("output") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "compaction":
            text = orjson.dumps(item).decode()
            why = provider_blocks.too_big(len(text))
            if why is not None:
                return Compaction([], "", usage, why)
            block = Reasoning(kind="compaction", data=text, origin=ORIGIN_OPENAI)
        elif item.get("type", "message") == "message" and item.get("role") == "user":
            kept.append(Message(role="user", content=_text_of(item.get("content"))))
    if block is None:
        return Compaction([], "", usage, "the compaction answer held no compaction item")
    size = len(block.data or "")
    summary = (
        f"(OpenAI's compaction item is opaque: {size:,} bytes of encrypted content, no readable summary)"
    )
    return Compaction([*kept, Message(role="assistant", content="", reasoning=(block,))], summary, usage)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [
        p.get("text", "")
        for p in content or []
        if isinstance(p, dict) and p.get("type") in ("input_text", "output_text")
    ]
    return "\n".join(t for t in parts if t)
