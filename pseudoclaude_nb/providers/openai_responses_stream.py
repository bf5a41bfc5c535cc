"""What comes back from the OpenAI Responses API: typed events read into neutral ones (issue 43).

A streamed response is SSE whose ``data:`` payloads each carry a ``type``
(developers.openai.com, "Streaming API responses", and the SDK's ``ResponseStreamEvent``): the
response is created, output items are added (a message, a ``function_call`` with its ``call_id``,
a ``reasoning`` item, a ``compaction`` item), text and arguments arrive as deltas, each item is
done (the done item is the whole one: a reasoning item's encrypted content is complete only
there), and the stream ends with ``response.completed`` (the usage, and the response's id for
``previous_response_id``), ``response.incomplete`` (the output cap or the content filter) or
``response.failed`` (an error). There is no ``[DONE]``. An ``error`` event, or a failed response,
is the provider's error; a stream that ends without one of the three ends says so and keeps
nothing. An event type this version does not know is skipped and said once. The non-streamed
response is read by the same code, its items played as done events.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from .. import provider_blocks
from ..errors import ProviderError, StreamError
from ..messages import ORIGIN_OPENAI, Reasoning, Usage
from . import wire
from .base import (
    ProviderNote,
    ReasoningDelta,
    ReasoningEnd,
    Stop,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
    whole_arguments,
)

ENDS = ("response.completed", "response.incomplete", "response.failed")
# Events that carry nothing the neutral model needs beyond what their siblings carry.
QUIET = frozenset(
    {
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.done",
        "response.output_text.annotation.added",
        "response.refusal.done",
        "response.function_call_arguments.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.done",
    }
)
_SAID: set[str] = set()  # unknown event types said once per process


class EventReader:
    """Responses events in, neutral events out; keeps what the provider needs afterwards: the
    response's id, the call ids of its function calls, whether they are whole."""

    def __init__(self, base_url: str, stream_error: Callable[[Any], ProviderError]) -> None:
        self.base_url, self.stream_error = base_url, stream_error
        self.response_id: str | None = None
        self.usage: Usage | None = None
        self.stop: str | None = None
        self.calls: dict[str, dict[str, Any]] = {}  # item id -> {"call_id", "name", "args", "started"}
        self.texts: set[str] = set()  # message items that streamed text deltas
        self.refused = False
        self.events = 0

    # --- the stream ------------------------------------------------------------------------

    def feed_line(self, line: str) -> Iterator[StreamEvent]:
        """One SSE line: ``data:`` carries the event (its ``event:`` line repeats the type)."""
        if not line.startswith("data:"):
            return
        payload = line[5:].strip()
        if not payload or payload == "[DONE]":  # some compatible servers still send it
            return
        try:
            event = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise StreamError(
                f"{self.base_url} sent a Responses event that is not JSON ({wire.quote(payload)}); "
                "nothing from this response was kept — run %agent again to retry"
            ) from None
        if isinstance(event, dict):
            yield from self.feed(event)

    def feed(self, event: dict[str, Any]) -> Iterator[StreamEvent]:
        self.events += 1
        kind = event.get("type")
        response = event.get("response")
        if isinstance(response, dict) and isinstance(response.get("id"), str):
            self.response_id = response["id"]
        if kind == "response.output_item.added":
            yield from self._added(event.get("item") or {})
        elif kind == "response.output_text.delta" and event.get("delta"):
            self.texts.add(str(event.get("item_id")))
            yield TextDelta(str(event["delta"]))
        elif kind == "response.refusal.delta" and event.get("delta"):
            self.refused = True  # the refusal is the answer: shown and kept as its text
            self.texts.add(str(event.get("item_id")))
            yield TextDelta(str(event["delta"]))
        elif kind == "response.function_call_arguments.delta":
            yield from self._arguments(str(event.get("item_id")), str(event.get("delta") or ""))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if event.get("delta"):
                yield ReasoningDelta(str(event["delta"]))
        elif kind == "response.output_item.done":
            yield from self.item_done(event.get("item") or {})
        elif kind in ENDS:
            yield from self._end(kind, response if isinstance(response, dict) else {})
        elif kind == "error":
            raise self.stream_error({"error": {k: v for k, v in event.items() if k != "type"}})
        elif kind not in QUIET and isinstance(kind, str) and kind not in _SAID:
            _SAID.add(kind)
            yield ProviderNote(
                f"the Responses stream from {self.base_url} sent an event this version does not know "
                f"({wire.quote(kind)}); it was skipped (said once)",
                "info",
            )

    def _added(self, item: dict[str, Any]) -> Iterator[StreamEvent]:
        if item.get("type") != "function_call":
            return
        call = self._call(item)
        if not call["started"] and call["name"]:
            call["started"] = True
            yield ToolCallStart(id=call["call_id"], name=call["name"])

    def _call(self, item: dict[str, Any]) -> dict[str, Any]:
        key = str(item.get("id") or item.get("call_id"))
        call = self.calls.get(key)
        if call is None:
            call = self.calls[key] = {
                "call_id": str(item.get("call_id") or item.get("id") or ""),
                "name": str(item.get("name") or ""),
                "args": [],
                "started": False,
            }
        return call

    def _arguments(self, item_id: str, delta: str) -> Iterator[StreamEvent]:
        call = self.calls.get(item_id)
        if call is None or not delta:
            return
        call["args"].append(delta)
        if call["started"]:
            yield ToolCallDelta(id=call["call_id"], json=delta)

    def item_done(self, item: dict[str, Any]) -> Iterator[StreamEvent]:
        kind = item.get("type")
        if kind == "function_call":
            call = self._call(item)
            if not call["started"]:
                call["started"] = True
                yield ToolCallStart(id=call["call_id"], name=call["name"] or str(item.get("name") or ""))
            whole = item.get("arguments")
            if isinstance(whole, str) and not call["args"]:
                call["args"].append(whole)  # a server that sends the item whole, not in deltas
                yield ToolCallDelta(id=call["call_id"], json=whole)
            yield ToolCallEnd(call["call_id"])
        elif kind == "message" and str(item.get("id")) not in self.texts:
            # A message that came whole (the non-streamed response, or a server without deltas).
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") in ("output_text", "refusal"):
                    self.refused = self.refused or part["type"] == "refusal"
                    text = part.get("text") if part["type"] == "output_text" else part.get("refusal")
                    if text:
                        yield TextDelta(str(text))
        elif kind == "reasoning":
            yield ReasoningEnd(Reasoning(kind="reasoning_item", text=summary_text(item), data=_json(item)))
        elif kind == "compaction":
            data = _json(item)
            why = provider_blocks.too_big(len(data))
            if why is not None:
                yield ProviderNote(why)
            else:
                yield ReasoningEnd(Reasoning(kind="compaction", data=data, origin=ORIGIN_OPENAI))

    def _end(self, kind: str, response: dict[str, Any]) -> Iterator[StreamEvent]:
        if kind == "response.failed":
            error = response.get("error") or {"message": "the response failed without saying why"}
            raise self.stream_error({"error": error})
        self.usage = usage_of(response.get("usage"))
        yield UsageEvent(self.usage)
        if kind == "response.incomplete":
            reason = (response.get("incomplete_details") or {}).get("reason")
            self.stop = "refusal" if reason == "content_filter" else "max_tokens"
        elif self.refused:
            self.stop = "refusal"
        else:
            self.stop = "tool_use" if self.calls else "end_turn"
        yield Stop(self.stop)

    def finish(self) -> None:
        """After the last line: a stream that never ended is refused here, in its own words."""
        if self.stop is None:
            raise StreamError(
                f"the Responses stream from {self.base_url} ended without response.completed "
                f"({self.events} events, connection cut?); nothing from it was kept — run %agent "
                "again to retry"
            )

    @property
    def call_ids(self) -> list[str]:
        return [c["call_id"] for c in self.calls.values()]

    def calls_whole(self) -> bool:
        """Whether every call's arguments are one whole JSON object (a kept answer's are)."""
        return all(whole_arguments("".join(c["args"])) is not None for c in self.calls.values())

    # --- the non-streamed response ---------------------------------------------------------

    def read(self, response: dict[str, Any]) -> Iterator[StreamEvent]:
        """A whole ``Response`` object, played as the events a stream would end with."""
        if isinstance(response.get("id"), str):
            self.response_id = response["id"]
        for item in response.get("output") or []:
            if isinstance(item, dict):
                yield from self.item_done(item)
        status = response.get("status")
        kind = {"incomplete": "response.incomplete", "failed": "response.failed"}.get(str(status))
        if kind is None and status not in ("completed", None):
            raise StreamError(
                f"{self.base_url} answered a response whose status is {wire.quote(status)}; nothing "
                "was kept — try again"
            )
        yield from self._end(kind or "response.completed", response)


def summary_text(item: dict[str, Any]) -> str:
    """A reasoning item's readable summary (what is shown, collapsed; never the answer)."""
    parts = [p.get("text", "") for p in item.get("summary") or [] if isinstance(p, dict)]
    return "\n\n".join(t for t in parts if t)


def usage_of(u: Any) -> Usage:
    """The Responses usage: ``input_tokens`` counts the cached (``cached_tokens``) and, lately,
    the cache-written (``cache_write_tokens``) ones too, which the neutral model keeps apart;
    ``output_tokens`` counts the reasoning tokens, kept beside it for the record."""
    if not isinstance(u, dict):
        return Usage()
    details = u.get("input_tokens_details") or {}
    out_details = u.get("output_tokens_details") or {}
    cached = int(details.get("cached_tokens") or 0)
    written = int(details.get("cache_write_tokens") or 0)
    return Usage(
        input_tokens=max(0, int(u.get("input_tokens") or 0) - cached - written),
        output_tokens=int(u.get("output_tokens") or 0),
        cache_read_input_tokens=cached,
        cache_creation_input_tokens=written,
        reasoning_output_tokens=int(out_details.get("reasoning_tokens") or 0),
    )


def _json(item: dict[str, Any]) -> str:
    try:
        return orjson.dumps(item).decode()
    except orjson.JSONEncodeError:
        return json.dumps(item)
