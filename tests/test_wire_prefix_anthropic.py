"""The Anthropic request body: each turn converted and encoded once (issue 34), through the SDK.

Real ``anthropic`` SDK (its httpx2 client, retries and stream reading) against the local fake
server: every body the server receives must be what converting the whole history anew
gives — every turn (thinking blocks kept), the cache breakpoint on the last block only,
system and tools — while a step encodes only the turns that are new. A replace (a
compaction), even one that keeps only the first messages, sends the new history.
"""

from __future__ import annotations

import json

import pytest

from pseudoclaude_nb.messages import Message, Reasoning, ToolCall, ToolResult
from pseudoclaude_nb.providers import wire
from pseudoclaude_nb.providers.anthropic import EPHEMERAL, AnthropicProvider, conversation_breakpoints
from pseudoclaude_nb.providers.base import Request
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as fake
from tests.test_wire_prefix import encodes  # noqa: F401 (the fixture: turns encoded per request)

TOOLS = [
    {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object", "properties": {}}}
]


@pytest.fixture
def server():
    with FakeServer("anthropic") as served:
        yield served


@pytest.fixture
def provider(server: FakeServer) -> AnthropicProvider:
    return AnthropicProvider(api_key="sk-ant-wire-prefix", base_url=server.url, model="claude-sonnet-4-5")


def reference(provider: AnthropicProvider, messages: list[Message]) -> list:
    """The turns converted anew (the provider's ``_turn``), the breakpoints where
    ``conversation_breakpoints`` puts them (the last turn; the turn that ended the last request)."""
    out = [provider._turn(group) for group in wire.turns(messages)]
    for at in conversation_breakpoints(out):
        out[at]["content"][-1]["cache_control"] = EPHEMERAL
    return json.loads(json.dumps(out))


def step(i: int, thinking: bool = False) -> list[Message]:
    call = ToolCall(id=f"toolu_{i}", name="read_file", arguments={"path": f"src/m{i}.py", "note": "é→✓"})
    thought = (Reasoning(kind="thinking", text=f"thinking {i}", signature=f"sig{i}"),) if thinking else ()
    return [
        Message(role="assistant", content=f"Reading m{i}.", tool_calls=(call,), reasoning=thought),
        Message(
            role="user",
            tool_result=ToolResult(call_id=call.id, content=f"def f{i}():\n    return {i}\n" * 20),
        ),
    ]


def history(n_steps: int) -> list[Message]:
    out = [Message(role="user", content="Fix the error in the file.")]
    for i in range(n_steps):
        out += step(i)
    return out


def send(server: FakeServer, provider: AnthropicProvider, messages: list[Message], counts: list[int]) -> dict:
    counts.append(0)
    server.play(fake.answer("ok"))
    request = Request(system="You are a test.", messages=list(messages), tools=TOOLS, max_tokens=500)
    events = list(provider.stream(request))
    assert events, "no events"
    sent = server.requests[-1]
    body = sent.body
    assert body["messages"] == reference(provider, messages)
    assert body["system"] == [{"type": "text", "text": "You are a test.", "cache_control": EPHEMERAL}]
    assert body["tools"] == TOOLS and body["model"] == "claude-sonnet-4-5" and body["stream"] is True
    assert sent.headers["anthropic-version"] and "transfer-encoding" not in sent.headers
    marked = [b for t in body["messages"] for b in t["content"] if "cache_control" in b]
    assert len(marked) <= 2  # the breakpoints move with the last turns: never left behind
    return body


@pytest.mark.parametrize("size", [10, 300])
def test_a_growing_history_sends_the_full_body_and_encodes_only_the_new_turns(
    server,
    provider,
    encodes,
    size,
):
    messages = history(size)
    send(server, provider, messages, encodes)
    assert encodes[-1] >= 2 * size  # the first request encodes everything
    for i in range(4):
        messages += step(size + i, thinking=i % 2 == 1)
        send(server, provider, messages, encodes)
        assert encodes[-1] <= 5, encodes  # the new turns and the open tail before them, at any size


def test_a_replace_sends_the_new_history_even_one_that_keeps_only_the_first_messages(
    server,
    provider,
    encodes,
):
    messages = history(30)
    send(server, provider, messages, encodes)
    messages += step(31)
    send(server, provider, messages, encodes)
    compacted = [Message(role="user", content="Summary of the work so far."), *messages[-4:]]
    body = send(server, provider, compacted, encodes)
    assert body["messages"][0]["content"][0]["text"] == "Summary of the work so far."
    # Only the turns kept from the last request (all but its last): the breakpoint moves back.
    longer = messages + step(40)
    send(server, provider, longer, encodes)
    body = send(server, provider, longer[:-1], encodes)
    assert body["messages"][-1]["content"][-1]["type"] == "tool_use"
    assert "cache_control" in body["messages"][-1]["content"][-1]
