"""Answers in the OpenAI chat-completions wire format, for ``FakeServer``.

Streams are ``data: {chunk}`` lines ending with ``data: [DONE]``, in three dialects
seen in the wild: ``openai`` (tool calls as indexed deltas — id and name first, then
argument pieces — and usage in a separate chunk with ``choices: []``), ``ollama`` (each
tool call whole in one chunk) and ``llamacpp`` (usage on the finish chunk).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from . import Reply, Stream

Call = tuple[str, str, dict[str, Any] | str]  # (id, name, arguments, or their JSON text)
Dialect = Literal["openai", "ollama", "llamacpp"]
DONE = b"data: [DONE]\n\n"


def data(obj: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "model": "fake",
        "choices": choices,
        **extra,
    }


def _usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    return {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15} | (usage or {})


def _pieces(text: str, n: int) -> list[str]:
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


def frames(
    text: str = "",
    calls: tuple[Call, ...] | list[Call] = (),
    *,
    usage: dict[str, Any] | None = None,
    finish: str | None = None,
    dialect: Dialect = "openai",
) -> list[bytes]:
    u = _usage(usage)
    finish = finish or ("tool_calls" if calls else "stop")
    out = [data(chunk({"role": "assistant", "content": ""}))]
    out += [data(chunk({"content": p})) for p in _pieces(text, 3)] if text else []
    out.append(b": keep-alive comment\n\n")
    for index, (call_id, name, arguments) in enumerate(calls):
        args = arguments if isinstance(arguments, str) else json.dumps(arguments)
        if dialect == "ollama":
            whole = {
                "id": call_id,
                "index": 0,
                "type": "function",
                "function": {"name": name, "arguments": args},
            }
            out.append(data(chunk({"tool_calls": [whole]})))
            continue
        first = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        out.append(data(chunk({"tool_calls": [first]})))
        for piece in _pieces(args, 3):
            out.append(data(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})))
    if dialect == "llamacpp":
        out.append(data(chunk({}, finish, usage=u)))
    else:
        out.append(data(chunk({}, finish)))
        out.append(data(chunk(None, usage=u)))
    out.append(DONE)
    return out


def answer(text: str = "", calls: tuple[Call, ...] | list[Call] = (), **kwargs: Any) -> Stream:
    return Stream(frames(text, calls, **kwargs))


def cut(text: str = "", calls: tuple[Call, ...] | list[Call] = ()) -> Stream:
    """Ends cleanly but without a finish_reason, usage or [DONE]."""
    return Stream(frames(text, calls)[:-3])


def dropped(text: str = "", calls: tuple[Call, ...] | list[Call] = (), *, after: int = 3) -> Stream:
    return Stream(frames(text, calls), drop_after=after)


def completion(
    text: str = "",
    calls: tuple[Call, ...] | list[Call] = (),
    *,
    usage: dict[str, Any] | None = None,
    finish: str | None = None,
) -> Reply:
    """A non-streamed chat completion."""
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": i,
                "type": "function",
                "function": {"name": n, "arguments": a if isinstance(a, str) else json.dumps(a)},
            }
            for i, n, a in calls
        ]
    return Reply(
        200,
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": "fake",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": finish or ("tool_calls" if calls else "stop"),
                }
            ],
            "usage": _usage(usage),
        },
    )


def error(
    status: int,
    text: str,
    *,
    kind: str = "invalid_request_error",
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    return Reply(
        status, {"error": {"message": text, "type": kind, "param": None, "code": code}}, headers or {}
    )


def too_long() -> Reply:
    return error(
        400,
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.",
        code="context_length_exceeded",
    )
