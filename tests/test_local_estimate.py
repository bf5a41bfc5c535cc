"""Issue 32: the estimate against a real tokenizer on the recorded llama.cpp requests.

Each recording holds the request body the project sent and what the server's own tokenizer
(Gemma 3) counted for its prompt (``prompt_tokens`` in the usage, or ``n_prompt_tokens`` in
the 400). The estimate — system prompt, messages and tool schemas at bytes/3.5 — must not
be below the real count by more than 5 %: low is the unsafe side (compaction too late).
"""

from __future__ import annotations

import json

import pytest

from pseudoclaude_nb.context.estimate import estimate_request
from pseudoclaude_nb.messages import Message
from tests import llamacpp_recorded as rec


def server_count(name: str) -> int:
    if name == "context_error_400":
        return json.loads(rec.raw(name))["error"]["n_prompt_tokens"]
    for line in rec.raw(name).decode().splitlines():
        if line.startswith("data: {") and '"usage"' in line:
            return json.loads(line[6:])["usage"]["prompt_tokens"]
    raise AssertionError(f"{name}: no usage in the recording")


@pytest.mark.parametrize(
    "name", ["four_complete_calls_then_length", "plain_answer_length_at_ctx_end", "context_error_400"]
)
def test_the_estimate_is_not_more_than_5_percent_low_on_recorded_requests(name: str) -> None:
    body = rec.request(name)
    messages = body["messages"]
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    rest = [Message(role=m["role"], content=m.get("content") or "") for m in messages[1:]]
    estimate = estimate_request(system, rest, body["tools"])
    real = server_count(name)
    assert estimate >= 0.95 * real, (estimate, real)
    assert estimate <= 1.25 * real, (estimate, real)  # and not wildly high either
