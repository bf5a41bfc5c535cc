"""Answers in the OpenAI Responses API wire format, for ``FakeServer`` (issue 43).

The shapes follow the documentation, not this package's reader:

- streaming: developers.openai.com, "Streaming API responses" (stored copy of 2026) and the
  OpenAI Python SDK's ``ResponseStreamEvent`` union (openai-python at e43b422, 2026-08-21): SSE
  frames of ``event: <type>`` and ``data: {"type": <type>, "sequence_number": n, ...}``;
  ``response.created`` first, each output item ``added`` then ``done`` (text in
  ``response.output_text.delta``, arguments in ``response.function_call_arguments.delta`` keyed by
  the item's ``id``, the call's own ``call_id`` on the item), and ``response.completed`` with the
  whole response (its ``id``, ``output`` and ``usage``) last. No ``[DONE]``.
- the response and its usage: the SDK's ``Response`` and ``ResponseUsage`` (``input_tokens``
  counting ``input_tokens_details.cached_tokens`` and ``cache_write_tokens``, ``output_tokens``
  counting ``output_tokens_details.reasoning_tokens``).
- reasoning items: the SDK's ``ResponseReasoningItem`` (``summary`` parts, ``encrypted_content``).
- compaction: developers.openai.com, "Compaction" (stored copy of 2026): with
  ``context_management`` the server emits a ``compaction`` output item (``id``,
  ``encrypted_content``; the SDK's ``ResponseCompactionItem``) in the same stream, before the
  answer; ``/responses/compact`` answers a ``response.compaction`` object whose output is the
  user messages and one compaction item (the SDK's ``CompactedResponse``).
- errors: ``{"error": {"message", "type", "param", "code"}}``; a forgotten stored response is
  400 ``previous_response_not_found`` on ``previous_response_id`` (as OpenAI answers it, quoted in
  public issue threads, e.g. maximhq/bifrost#2441).
"""

from __future__ import annotations

import json
from typing import Any

from . import Reply, Stream

Call = tuple[str, str, dict[str, Any] | str]  # (call_id, name, arguments, or their JSON text)


def event(kind: str, seq: int, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': seq, **fields})}\n\n".encode()


def usage(
    input_tokens: int = 10, output_tokens: int = 5, *, cached: int = 0, written: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def reasoning_item(
    summary: str = "Thinking about it.", encrypted: str = "gAAAAB-opaque-reasoning=="
) -> dict[str, Any]:
    return {
        "id": "rs_fake1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": summary}] if summary else [],
        "encrypted_content": encrypted,
    }


def compaction_item(
    encrypted: str = "gAAAAB-opaque-compaction==", item_id: str = "cmp_fake1"
) -> dict[str, Any]:
    return {"id": item_id, "type": "compaction", "encrypted_content": encrypted}


def _pieces(text: str, n: int) -> list[str]:
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _response(
    rid: str, status: str, output: list[dict[str, Any]], u: dict[str, Any] | None, **extra: Any
) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "response",
        "created_at": 1_780_000_000,
        "status": status,
        "model": "gpt-5.5",
        "output": output,
        "usage": u,
        "error": None,
        "incomplete_details": None,
        **extra,
    }


def output_items(
    text: str = "",
    calls: tuple[Call, ...] | list[Call] = (),
    *,
    reasoning: dict[str, Any] | None = None,
    compaction: dict[str, Any] | None = None,
    refusal: str = "",
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if compaction is not None:
        out.append(compaction)
    if reasoning is not None:
        out.append(reasoning)
    if text or refusal:
        part = (
            {"type": "refusal", "refusal": refusal}
            if refusal
            else {"type": "output_text", "text": text, "annotations": []}
        )
        out.append(
            {
                "id": "msg_fake1",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [part],
            }
        )
    for i, (call_id, name, arguments) in enumerate(calls):
        args = arguments if isinstance(arguments, str) else json.dumps(arguments)
        out.append(
            {
                "id": f"fc_fake{i}",
                "type": "function_call",
                "call_id": call_id,
                "name": name,
                "arguments": args,
                "status": "completed",
            }
        )
    return out


def frames(
    text: str = "",
    calls: tuple[Call, ...] | list[Call] = (),
    *,
    response_id: str = "resp_fake1",
    u: dict[str, Any] | None = None,
    reasoning: dict[str, Any] | None = None,
    compaction: dict[str, Any] | None = None,
    refusal: str = "",
    incomplete: str | None = None,  # incomplete_details.reason: max_output_tokens | content_filter
    extra_events: list[bytes] | None = None,  # put before the end (e.g. an unknown event type)
) -> list[bytes]:
    items = output_items(text, calls, reasoning=reasoning, compaction=compaction, refusal=refusal)
    seq = 0

    def ev(kind: str, **fields: Any) -> bytes:
        nonlocal seq
        seq += 1
        return event(kind, seq - 1, **fields)

    out = [ev("response.created", response=_response(response_id, "in_progress", [], None))]
    out.append(ev("response.in_progress", response=_response(response_id, "in_progress", [], None)))
    for index, item in enumerate(items):
        kind = item["type"]
        if kind == "message":
            started = {**item, "status": "in_progress", "content": []}
            out.append(ev("response.output_item.added", output_index=index, item=started))
            part = item["content"][0]
            out.append(
                ev(
                    "response.content_part.added",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    part={**part, **({"text": ""} if "text" in part else {"refusal": ""})},
                )
            )
            if part["type"] == "refusal":
                for p in _pieces(part["refusal"], 2):
                    out.append(
                        ev(
                            "response.refusal.delta",
                            item_id=item["id"],
                            output_index=index,
                            content_index=0,
                            delta=p,
                        )
                    )
            else:
                for p in _pieces(part["text"], 3):
                    out.append(
                        ev(
                            "response.output_text.delta",
                            item_id=item["id"],
                            output_index=index,
                            content_index=0,
                            delta=p,
                            logprobs=[],
                        )
                    )
                out.append(
                    ev(
                        "response.output_text.done",
                        item_id=item["id"],
                        output_index=index,
                        content_index=0,
                        text=part["text"],
                        logprobs=[],
                    )
                )
            out.append(
                ev(
                    "response.content_part.done",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    part=part,
                )
            )
        elif kind == "function_call":
            out.append(
                ev(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "arguments": "", "status": "in_progress"},
                )
            )
            for p in _pieces(item["arguments"], 3):
                out.append(
                    ev(
                        "response.function_call_arguments.delta",
                        item_id=item["id"],
                        output_index=index,
                        delta=p,
                    )
                )
            out.append(
                ev(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    arguments=item["arguments"],
                )
            )
        elif kind == "reasoning":
            # The added item's encrypted content may be incomplete: only the done item's counts.
            out.append(
                ev(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "summary": [], "encrypted_content": None},
                )
            )
            for s_index, s in enumerate(item["summary"]):
                out.append(
                    ev(
                        "response.reasoning_summary_text.delta",
                        item_id=item["id"],
                        output_index=index,
                        summary_index=s_index,
                        delta=s["text"],
                    )
                )
        else:  # compaction: added and done whole
            out.append(ev("response.output_item.added", output_index=index, item=item))
        out.append(ev("response.output_item.done", output_index=index, item=item))
    out += extra_events or []
    if incomplete:
        done = _response(
            response_id, "incomplete", items, u or usage(), incomplete_details={"reason": incomplete}
        )
        out.append(ev("response.incomplete", response=done))
    else:
        out.append(
            ev("response.completed", response=_response(response_id, "completed", items, u or usage()))
        )
    return out


def answer(text: str = "", calls: tuple[Call, ...] | list[Call] = (), **kwargs: Any) -> Stream:
    return Stream(frames(text, calls, **kwargs))


def cut(text: str = "", calls: tuple[Call, ...] | list[Call] = (), **kwargs: Any) -> Stream:
    """Ends cleanly, but without ``response.completed`` (or any other end)."""
    return Stream(frames(text, calls, **kwargs)[:-1])


def dropped(text: str = "", calls: tuple[Call, ...] | list[Call] = (), *, after: int = 4) -> Stream:
    return Stream(frames(text, calls), drop_after=after)


def failed(code: str, message: str, *, response_id: str = "resp_failed") -> Stream:
    """A stream that ends with ``response.failed`` and the response's ``error``."""
    out = frames("", response_id=response_id)[:2]
    error = {"code": code, "message": message}
    out.append(
        event("response.failed", 2, response=_response(response_id, "failed", [], None) | {"error": error})
    )
    return Stream(out)


def error_event(code: str, message: str, param: str | None = None) -> Stream:
    """An ``error`` event in a started stream (the SDK's ``ResponseErrorEvent``)."""
    out = frames("", response_id="resp_err")[:2]
    out.append(event("error", 2, code=code, message=message, param=param))
    return Stream(out)


def unknown(kind: str = "response.future_thing.delta") -> bytes:
    return event(kind, 99, item_id="x", delta="?")


def response(
    text: str = "",
    calls: tuple[Call, ...] | list[Call] = (),
    *,
    response_id: str = "resp_fake1",
    u: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Reply:
    """A non-streamed response (the SDK's ``Response``)."""
    items = output_items(text, calls, **kwargs)
    return Reply(200, _response(response_id, "completed", items, u or usage()))


def compacted(kept: list[str], item: dict[str, Any] | None = None, u: dict[str, Any] | None = None) -> Reply:
    """A ``/responses/compact`` answer: the user messages, then one compaction item."""
    output: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]} for t in kept
    ]
    output.append(item if item is not None else compaction_item())
    return Reply(
        200,
        {
            "id": "cmp_resp1",
            "object": "response.compaction",
            "created_at": 1_780_000_000,
            "output": output,
            "usage": u or usage(5000, 300),
        },
    )


def error(
    status: int,
    message: str,
    *,
    kind: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
) -> Reply:
    return Reply(status, {"error": {"message": message, "type": kind, "param": param, "code": code}})


def forgotten(response_id: str) -> Reply:
    return error(
        400,
        f"Previous response with id '{response_id}' not found.",
        code="previous_response_not_found",
        param="previous_response_id",
    )


def too_long() -> Reply:
    return error(
        400,
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
        code="context_length_exceeded",
        param="input",
    )
