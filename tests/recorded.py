"""Streams written out by hand in the shapes the providers document, for ``FakeServer``.

Unlike ``tests/fakes/*_server.frames`` (our own encoder), these are literal wire text:
Anthropic SSE with ``event:`` lines, as in the Messages API streaming and extended-thinking
documentation (whose own examples start a thinking block without a signature field and
send ``message_start`` without usage), and OpenAI-compatible ``data:`` chunks ending with
``data: [DONE]``, as in DeepSeek's reasoning-model and OpenAI's chat-completions
documentation. Each blank-line-separated event is sent as one chunk of the body.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

from tests.fakes import Stream


def sse(text: str, **headers: str) -> Stream:
    """A literal SSE body (dedented); every event becomes one chunk."""
    body = textwrap.dedent(text).strip()
    events = [event.strip("\n") + "\n\n" for event in body.split("\n\n") if event.strip()]
    return Stream([e.encode() for e in events], headers=dict(headers))


def chunk(delta: dict[str, Any] | None, finish: str | None = None, model: str = "deepseek-reasoner", **extra):
    """One ``data:`` line as DeepSeek/OpenAI document a chat.completion.chunk."""
    choices = (
        [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    )
    obj = {
        "id": "b4e7c1f0-6a3e-4b8e-9d0a-2f3c5e1a7b90",
        "object": "chat.completion.chunk",
        "created": 1764580000,
        "model": model,
        "system_fingerprint": "fp_ffc7281d48_prod0820_fp8_kvcache",
        "choices": choices,
        **extra,
    }
    return "data: " + json.dumps(obj)


def data_stream(*lines: str) -> Stream:
    """``data:`` lines as a stream, each its own event, [DONE] appended."""
    return Stream([(line + "\n\n").encode() for line in (*lines, "data: [DONE]")])


# --- Anthropic -------------------------------------------------------------------------------------

# Extended thinking, then a tool call (the documented order: thinking, text?, tool_use).
# message_start carries no usage, exactly as in the extended-thinking streaming example.
ANTHROPIC_THINK_THEN_TOOL = """
    event: message_start
    data: {"type": "message_start", "message": {"id": "msg_01Thk", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null}}

    event: content_block_start
    data: {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}

    event: content_block_delta
    data: {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "The user wants the files. "}}

    event: content_block_delta
    data: {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "I will list them."}}

    event: content_block_delta
    data: {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}}

    event: content_block_stop
    data: {"type": "content_block_stop", "index": 0}

    event: content_block_start
    data: {"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"}}

    event: content_block_stop
    data: {"type": "content_block_stop", "index": 1}

    event: content_block_start
    data: {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "list_files", "input": {}}}

    event: content_block_delta
    data: {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}}

    event: content_block_delta
    data: {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\\"pattern\\": \\"*.t"}}

    event: content_block_delta
    data: {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "xt\\"}"}}

    event: content_block_stop
    data: {"type": "content_block_stop", "index": 2}

    event: message_delta
    data: {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 89}}

    event: message_stop
    data: {"type": "message_stop"}
"""

ANTHROPIC_TEXT = """
    event: message_start
    data: {"type": "message_start", "message": {"id": "msg_02Txt", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 472, "output_tokens": 2}}}

    event: content_block_start
    data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}

    event: ping
    data: {"type": "ping"}

    event: content_block_delta
    data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "One file: "}}

    event: content_block_delta
    data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "notes.txt."}}

    event: content_block_stop
    data: {"type": "content_block_stop", "index": 0}

    event: message_delta
    data: {"type": "message_delta", "delta": {"stop_reason": "%(stop)s", "stop_sequence": null}, "usage": {"output_tokens": 15}}

    event: message_stop
    data: {"type": "message_stop"}
"""


def anthropic_text(stop: str = "end_turn") -> Stream:
    return sse(ANTHROPIC_TEXT % {"stop": stop})


# The output cap hit inside a tool call: the input JSON stops mid-string, no content_block_stop.
ANTHROPIC_CUT_TOOL = """
    event: message_start
    data: {"type": "message_start", "message": {"id": "msg_03Cut", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 1500, "output_tokens": 1}}}

    event: content_block_start
    data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}

    event: content_block_delta
    data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Writing the module."}}

    event: content_block_stop
    data: {"type": "content_block_stop", "index": 0}

    event: content_block_start
    data: {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_01Big", "name": "write_file", "input": {}}}

    event: content_block_delta
    data: {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\\"path\\": \\"big.py\\", \\"content\\": \\"def a():\\\\n    return 1\\\\n"}}

    event: message_delta
    data: {"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": null}, "usage": {"output_tokens": 8192}}

    event: message_stop
    data: {"type": "message_stop"}
"""

ANTHROPIC_WRITE_TOOL = """
    event: message_start
    data: {"type": "message_start", "message": {"id": "msg_04Wr", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 1500, "output_tokens": 1}}}

    event: content_block_start
    data: {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_02Big", "name": "write_file", "input": {}}}

    event: content_block_delta
    data: {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\\"path\\": \\"big.py\\", \\"content\\": \\"def a():\\\\n    return 1\\\\n\\"}"}}

    event: content_block_stop
    data: {"type": "content_block_stop", "index": 0}

    event: message_delta
    data: {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 9000}}

    event: message_stop
    data: {"type": "message_stop"}
"""

# A refusal: the streaming classifier stops the answer (stop_reason "refusal").
ANTHROPIC_REFUSAL = """
    event: message_start
    data: {"type": "message_start", "message": {"id": "msg_05Ref", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 40, "output_tokens": 1}}}

    event: content_block_start
    data: {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}

    event: content_block_delta
    data: {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "I can't help with that."}}

    event: content_block_stop
    data: {"type": "content_block_stop", "index": 0}

    event: message_delta
    data: {"type": "message_delta", "delta": {"stop_reason": "refusal", "stop_sequence": null}, "usage": {"output_tokens": 7}}

    event: message_stop
    data: {"type": "message_stop"}
"""
