"""Answers in the Anthropic Messages API wire format, for ``FakeServer``.

Streams are SSE with ``event:`` lines (the SDK ignores data without them): message_start
with the input-side usage, content blocks (text split into deltas, tool input split
into ``input_json_delta`` pieces), a ping, message_delta with the stop reason and the
cumulative output tokens, message_stop. ``cut`` and ``dropped`` are the two ways a real
stream fails: ending without its last events, or the connection breaking mid-body.

Server-side compaction (issue 31) follows the shapes of the documentation
(platform.claude.com, build-with-claude/compaction): the answer's first block is a
``compaction`` block; streamed, it starts with ``"content": null``, one ``compaction_delta``
carries the summary (and, where the server sends it, ``encrypted_content``), then it stops.
The compaction's own request is reported in ``usage.iterations`` (a ``compaction`` entry
beside the ``message`` one); the top-level usage counts only the answer's.

Issue 43 adds, after the installed SDK's beta types (anthropic 2.17.0, which the stored pages
agree with but for the beta dates, see ``providers/anthropic_native``) and these pages of
platform.claude.com (stored copies of 2026): "Compaction on demand" and "Compaction that keeps
recent turns" (``on_demand``: one ``compaction`` block, ``stop_reason`` ``compaction``, nothing
sampled after it), "Compaction at a token threshold" with ``pause_after_compaction`` (``paused``:
the block alone, ``stop_reason`` ``compaction``), "Context editing" (``applied_edits`` in
``message_delta``'s ``context_management``), and "Cache diagnostics" (``diagnostics`` with a
``cache_miss_reason`` on the message, in ``message_start``).
"""

from __future__ import annotations

import json
from typing import Any

from . import Reply, Stream

Call = tuple[str, str, dict[str, Any] | str]  # (id, name, input, or its JSON text)


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _usage(usage: dict[str, int] | None) -> dict[str, int]:
    base = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    return base | (usage or {})


def _pieces(text: str, n: int) -> list[str]:
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


def frames(
    text: str = "",
    calls: tuple[Call, ...] | list[Call] = (),
    *,
    usage: dict[str, int] | None = None,
    stop_reason: str | None = None,
    thinking: tuple[str, str] | None = None,  # (text, signature)
    model: str = "claude-test",
    cache_creation: dict[str, int] | None = None,  # the documented TTL split of the cache writes
    delta_usage: dict[str, Any] | None = None,  # message_delta's usage (default: output_tokens only)
    compaction: dict[str, Any] | None = None,  # the compaction block the answer begins with
    iterations: list[dict[str, Any]] | None = None,  # usage.iterations, sent in message_delta's usage
    applied_edits: list[dict[str, Any]] | None = None,  # context_management.applied_edits (message_delta)
    diagnostics: dict[str, Any] | None = None,  # the message's diagnostics (message_start)
    message_id: str = "msg_fake",
) -> list[bytes]:
    u = _usage(usage)
    start_usage: dict[str, Any] = {
        k: u[k] for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    }
    if cache_creation is not None:
        start_usage["cache_creation"] = cache_creation
    out = [
        sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": start_usage | {"output_tokens": 1},
                }
                | ({"diagnostics": diagnostics} if diagnostics is not None else {}),
            },
        )
    ]
    index = 0

    def block(start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        out.append(
            sse(
                "content_block_start", {"type": "content_block_start", "index": index, "content_block": start}
            )
        )
        for delta in deltas:
            out.append(
                sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            )
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1

    if compaction is not None:
        delta = {"type": "compaction_delta"} | {k: v for k, v in compaction.items() if k != "type"}
        block({"type": "compaction", "content": None}, [delta])
    if thinking:
        block(
            {"type": "thinking", "thinking": "", "signature": ""},
            [
                {"type": "thinking_delta", "thinking": thinking[0]},
                {"type": "signature_delta", "signature": thinking[1]},
            ],
        )
    if text:
        block({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in _pieces(text, 3)])
    out.append(sse("ping", {"type": "ping"}))
    for call_id, name, arguments in calls:
        block(
            {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            # Arguments given as text are sent as they are (JSON json.dumps cannot make, e.g. too deep).
            [
                {"type": "input_json_delta", "partial_json": p}
                for p in _pieces(arguments if isinstance(arguments, str) else json.dumps(arguments), 3)
            ],
        )
    out.append(
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": stop_reason or ("tool_use" if calls else "end_turn"),
                    "stop_sequence": None,
                },
                "usage": (delta_usage or {"output_tokens": u["output_tokens"]})
                | ({"iterations": iterations} if iterations is not None else {}),
            }
            | ({"context_management": {"applied_edits": applied_edits}} if applied_edits is not None else {}),
        )
    )
    out.append(sse("message_stop", {"type": "message_stop"}))
    return out


def answer(text: str = "", calls: tuple[Call, ...] | list[Call] = (), **kwargs: Any) -> Stream:
    return Stream(frames(text, calls, **kwargs))


def cut(text: str = "", calls: tuple[Call, ...] | list[Call] = (), *, keep_last_block: bool = True) -> Stream:
    """The stream ends cleanly but early: no message_delta, no message_stop.

    With ``keep_last_block=False`` it also ends inside the last content block, so a tool
    call's input is only partly sent.
    """
    out = frames(text, calls)[:-2]
    if not keep_last_block:
        out = out[:-2]  # drop the last input_json_delta piece and content_block_stop
    return Stream(out)


def dropped(text: str = "", calls: tuple[Call, ...] | list[Call] = (), *, after: int = 4) -> Stream:
    """The connection breaks after ``after`` frames, halfway through the next one."""
    return Stream(frames(text, calls), drop_after=after)


def message(
    text: str = "",
    calls: tuple[Call, ...] | list[Call] = (),
    *,
    usage: dict[str, int] | None = None,
    stop_reason: str | None = None,
    compaction: dict[str, Any] | None = None,
    iterations: list[dict[str, Any]] | None = None,
) -> Reply:
    """A non-streamed Messages API answer."""
    content: list[dict[str, Any]] = [compaction] if compaction is not None else []
    if text:
        content.append({"type": "text", "text": text})
    content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
    return Reply(
        200,
        {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content,
            "stop_reason": stop_reason or ("tool_use" if calls else "end_turn"),
            "stop_sequence": None,
            "usage": _usage(usage) | ({"iterations": iterations} if iterations is not None else {}),
        },
    )


def error(status: int, kind: str, text: str, *, retry_after_ms: int | None = None) -> Reply:
    headers = {"retry-after-ms": str(retry_after_ms)} if retry_after_ms is not None else {}
    return Reply(status, {"type": "error", "error": {"type": kind, "message": text}}, headers)


def stream_error(text: str = "", kind: str = "overloaded_error") -> Stream:
    """A stream that starts, then reports an error event instead of finishing."""
    out = frames(text)[:-2]
    out.append(sse("error", {"type": "error", "error": {"type": kind, "message": "Overloaded"}}))
    return Stream(out)


def too_long(tokens: int = 1_234_567, limit: int = 1_000_000) -> Reply:
    return error(400, "invalid_request_error", f"prompt is too long: {tokens} tokens > {limit} maximum")


def on_demand(
    summary: str | None,
    *,
    signature: str = "EqQBCkYIBhgCKkB-signed-summary==",
    usage: dict[str, int] | None = None,
) -> Reply:
    """An on-demand compaction answer: one signed ``compaction`` block, stop reason ``compaction``
    (``summary`` None: the documented failed compaction, ``content: null``)."""
    block = {"type": "compaction", "content": summary, "signature": signature}
    return Reply(
        200,
        {
            "id": "msg_compact",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [block],
            "stop_reason": "compaction",
            "stop_sequence": None,
            "usage": _usage(usage),
        },
    )


def paused(
    block: dict[str, Any],
    *,
    usage: dict[str, int] | None = None,
    iterations: list[dict[str, Any]] | None = None,
) -> Stream:
    """A threshold compaction with ``pause_after_compaction``: the block alone, stop reason
    ``compaction``; the answer comes with the next request."""
    return Stream(frames(compaction=block, stop_reason="compaction", usage=usage, iterations=iterations))
