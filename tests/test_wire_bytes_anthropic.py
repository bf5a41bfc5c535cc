"""The Anthropic body with each turn's wire form reused is, byte for byte, the body built anew.

The provider keeps the converted and encoded turns of the last request's settled prefix
(``wire_prefix``) and sends the next request from them, in blocks. Here the real SDK posts to
the local fake server, and every body it receives must be exactly the bytes of converting the
whole conversation again with nothing kept — every turn through ``anthropic_messages.turn``,
the breakpoints where ``conversation_breakpoints`` puts them, then the request's other fields
— across conversations with tools and tool errors, thinking and redacted thinking, images in
user turns and in tool results, compaction blocks (verbatim under ``--strategy api``, as text
elsewhere), a step with more blocks than the API's breakpoint lookback, and the breakpoints
moving every step. And it never sends a kept form that is no longer the conversation's: after
an undo and another answer, a replace that keeps the first messages, a message changed in place
that kept its id, a compaction block read by the API in one request and not in the next.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import orjson
import pytest

from pseudoclaude_nb.messages import ImagePart, Message, Reasoning, ToolCall, ToolResult
from pseudoclaude_nb.providers import anthropic_messages as messages_api
from pseudoclaude_nb.providers import wire, wire_prefix
from pseudoclaude_nb.providers.anthropic import (
    IMAGE_MAX_SIDE,
    MANY_IMAGES,
    MANY_IMAGES_MAX_SIDE,
    AnthropicProvider,
    conversation_breakpoints,
)
from pseudoclaude_nb.providers.base import Request, ServerContext
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as fake
from tests.images_support import png

KEY = "sk-ant-wire-bytes"
TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {}},
    },
    {"name": "bash", "description": "Run a command.", "input_schema": {"type": "object", "properties": {}}},
]
BLOCK = {
    "type": "compaction",
    "content": "Summary: the user wants a stats module; mean() is done, median() is next.",
    "encrypted_content": "Eu8BCkYIBBgCKkDx+opaque/Zm9vYmFy==",
}
PICTURES = {f"images/{i}.png": png(6 + i, 4, seed=i) for i in range(8)}


def source(part: ImagePart) -> bytes:
    return PICTURES[part.path]


def picture(i: int) -> ImagePart:
    data = PICTURES[f"images/{i}.png"]
    return ImagePart(path=f"images/{i}.png", media_type="image/png", bytes=len(data), sha256=f"{i:064d}")


@pytest.fixture
def server():
    with FakeServer("anthropic") as served:
        yield served


def make(server: FakeServer, **kw) -> AnthropicProvider:
    return AnthropicProvider(api_key=KEY, base_url=server.url, model="claude-sonnet-4-5", max_retries=0, **kw)


def expected(provider: AnthropicProvider, request: Request, sent: dict) -> bytes:
    """The body with nothing kept: every turn converted anew, the breakpoints placed, then the
    other fields in the provider's order (the cache diagnosis's id is the chain's: as sent)."""
    server = provider.server_context is not None and request.purpose == "agent"
    many = sum(len(m.parts) for m in request.messages) > MANY_IMAGES
    side = MANY_IMAGES_MAX_SIDE if many else IMAGE_MAX_SIDE
    turns = [
        messages_api.turn(group, lambda m: provider._images(m, request.images, side), server=server)
        for group in wire.turns(request.messages)
    ]
    for at in conversation_breakpoints(turns):
        turns[at]["content"][-1]["cache_control"] = provider.cache_control
    # The other fields from a provider that keeps nothing (its messages are the ones above).
    fresh = AnthropicProvider(
        api_key=KEY,
        base_url="http://127.0.0.1:9",
        model=provider.model,
        thinking_budget=provider.thinking_budget,
        cache_ttl=provider.cache_ttl,
    )
    fresh.server_context = provider.server_context
    fresh.wire_messages = lambda *_a, **_k: []  # type: ignore[method-assign]
    rest = fresh._params(request)
    del rest["messages"]
    rest.pop("extra_headers", None)  # headers, not the body
    if "diagnostics" in rest:
        rest["diagnostics"] = sent["diagnostics"]
    return orjson.dumps({"messages": turns, **rest, "stream": True})


def send(server: FakeServer, provider: AnthropicProvider, messages: list[Message], **kw) -> dict:
    server.play(fake.answer("ok"))
    request = Request(system="You are a test.", messages=list(messages), tools=TOOLS, max_tokens=500, **kw)
    list(provider.stream(request))
    sent = server.requests[-1]
    assert sent.raw == expected(provider, request, sent.body)
    assert int(sent.headers["content-length"]) == len(sent.raw)
    return sent.body


# --- conversations -------------------------------------------------------------------------


def plain(i: int) -> list[Message]:
    call = ToolCall(
        id=f"toolu_{i}", name="read_file", arguments={"path": f"src/m{i}.py", "note": "é→✓ \u2028"}
    )
    return [
        Message(role="assistant", content=f"Reading m{i}.", tool_calls=(call,)),
        Message(
            role="user", tool_result=ToolResult(call_id=call.id, content=f"def f{i}():\n    return {i}\n" * 9)
        ),
    ]


def errors(i: int) -> list[Message]:
    call = ToolCall(id=f"toolu_e{i}", name="bash", arguments={"command": f"pytest -k t{i}"})
    return [
        Message(role="assistant", tool_calls=(call,)),
        Message(role="user", tool_result=ToolResult(call_id=call.id, content="1 failed", is_error=True)),
        Message(role="user", content=f"Try again, differently ({i})."),
    ]


def thinking(i: int) -> list[Message]:
    thought = (
        Reasoning(kind="thinking", text=f"Thinking about step {i}…", signature=f"sig-{i}"),
        Reasoning(kind="redacted_thinking", data=f"opaque-{i}"),
    )
    call = ToolCall(id=f"toolu_t{i}", name="read_file", arguments={"path": "a.py"})
    return [
        Message(role="assistant", content="", tool_calls=(call,), reasoning=thought[: 1 + i % 2]),
        Message(role="user", tool_result=ToolResult(call_id=call.id, content=f"line {i}")),
    ]


def images(i: int) -> list[Message]:
    call = ToolCall(id=f"toolu_i{i}", name="read_file", arguments={"path": f"plot{i}.png"})
    return [
        Message(role="user", content=f"Look at this ({i}).", parts=(picture(i % 8),)),
        Message(role="assistant", content=f"Seen {i}.", tool_calls=(call,)),
        Message(
            role="user",
            tool_result=ToolResult(call_id=call.id, content="the plot"),
            parts=(picture((i + 3) % 8),),
        ),
    ]


def many_calls(i: int) -> list[Message]:
    """One step with more blocks than the API looks back from a breakpoint (20)."""
    calls = tuple(
        ToolCall(id=f"toolu_m{i}_{k}", name="read_file", arguments={"path": f"f{k}.py"}) for k in range(12)
    )
    results = [
        Message(role="user", tool_result=ToolResult(call_id=c.id, content=f"body {k}"))
        for k, c in enumerate(calls)
    ]
    return [Message(role="assistant", content=f"Reading twelve files ({i}).", tool_calls=calls), *results]


def compacted(i: int) -> list[Message]:
    if i:
        return plain(100 + i)
    block = Reasoning(kind="compaction", data=json.dumps(BLOCK))
    return [
        Message(role="assistant", content="Continuing.", reasoning=(block,)),
        Message(role="user", content="Go on."),
    ]


STEPS: dict[str, Callable[[int], list[Message]]] = {
    "tools": plain,
    "tool errors and user text": errors,
    "thinking": thinking,
    "images": images,
    "many calls in one step": many_calls,
    "a compaction block": compacted,
}


@pytest.mark.parametrize("name", list(STEPS))
@pytest.mark.parametrize("strategy_api", [False, True], ids=["plain", "strategy-api"])
def test_each_body_is_the_body_built_anew_byte_for_byte(server, name, strategy_api):
    provider = make(server, thinking_budget=2048 if name == "thinking" else 0)
    if strategy_api:
        provider.server_context = ServerContext(trigger=150_000)
    grow = STEPS[name]
    messages = [Message(role="user", content="Fix the error in the file.")]
    for i in range(7):
        messages += grow(i)
        send(server, provider, messages, images=source)
        send(
            server, provider, messages[:-1], images=source
        )  # a retry of the step before: the tail moves back
    marked = sum("cache_control" in b for t in server.requests[-1].body["messages"] for b in t["content"])
    assert 1 <= marked <= 2


def test_the_body_in_blocks_smaller_than_a_turn_is_the_same(server, monkeypatch):
    monkeypatch.setattr(wire_prefix, "BLOCK", 300)
    monkeypatch.setattr(wire_prefix.Body, "PIECE", 1000)
    provider = make(server)
    messages = [Message(role="user", content="Fix it.")]
    for i in range(12):
        messages += plain(i) + (images(i) if i < 5 else [])  # up to 10 images: the prefix is kept
        send(server, provider, messages, images=source)
    assert len(provider._encoded._blocks) > 10


# --- never a stale form --------------------------------------------------------------------


def test_after_an_undo_and_another_answer_the_new_answer_is_sent(server):
    """Two steps undone, then the next request (the undone history, a new question and its
    answer) as long as the last one: a kept form found by the count of messages would be stale."""
    provider = make(server)
    messages = [Message(role="user", content="Fix it.")]
    for i in range(6):
        messages += plain(i)
        send(server, provider, messages)
    other = messages[:-4] + errors(50) + thinking(51)  # %compact --undo / a step undone, then on
    assert len(other) >= len(messages)
    body = send(server, provider, other)
    assert "toolu_e50" in json.dumps(body) and "toolu_4" not in json.dumps(body)
    send(server, provider, [*other, *plain(52)])


def test_a_message_changed_in_place_keeping_its_id_is_sent_as_it_is_now(server):
    """A kept form found by message id or position alone would send the old text here."""
    provider = make(server)
    messages = [Message(role="user", content="Fix it.")]
    for i in range(8):
        messages += plain(i)
    send(server, provider, messages)
    send(server, provider, messages + plain(9))
    old = messages[4]  # a tool result deep in the settled prefix
    assert old.tool_result is not None
    spilled = old.model_copy(
        update={"tool_result": old.tool_result.model_copy(update={"content": "[spilled]"})}
    )
    assert spilled.id == old.id
    changed = [*messages[:4], spilled, *messages[5:], *plain(9)]
    body = send(server, provider, changed)
    assert body["messages"][4]["content"][0]["content"] == "[spilled]"


def test_a_replace_that_keeps_the_first_messages_then_grows_sends_the_new_history(server):
    provider = make(server)
    messages = [Message(role="user", content="Fix it.")]
    for i in range(10):
        messages += plain(i)
        send(server, provider, messages)
    kept = [*messages[:3], Message(role="user", content="Summary of steps 1 to 9.")]
    send(server, provider, kept)
    for i in range(3):
        kept += plain(200 + i)
        body = send(server, provider, kept)
    assert "Summary of steps 1 to 9." in json.dumps(body) and "toolu_9" not in json.dumps(body)


def test_a_compaction_block_read_by_the_api_then_not_then_again(server):
    """The block goes back verbatim only to a request with context management; the summary
    request between two agent requests gets it as text, each from its own kept form."""
    provider = make(server)
    provider.server_context = ServerContext(trigger=150_000)
    messages = [Message(role="user", content="Fix it."), *compacted(0)]
    for i in range(1, 5):
        messages += plain(i)
    body = send(server, provider, messages)
    assert body["messages"][1]["content"][0] == BLOCK
    body = send(server, provider, messages, purpose="summary")
    assert body["messages"][1]["content"][0]["type"] == "text"
    assert BLOCK["encrypted_content"] not in server.requests[-1].raw.decode()
    body = send(server, provider, messages + plain(9))
    assert body["messages"][1]["content"][0] == BLOCK


def test_images_then_no_image_source_then_images_again(server):
    provider = make(server)
    messages = [Message(role="user", content="Fix it.")]
    for i in range(5):
        messages += images(i)
        send(server, provider, messages, images=source)
    body = send(server, provider, messages)  # no session to read them from: notes
    assert "not sent: no session to read it from" in json.dumps(body)
    body = send(server, provider, messages + plain(7), images=source)
    assert "not sent" not in json.dumps(body) and '"type":"image"' in server.requests[-1].raw.decode()


def test_two_cache_lifetimes_in_one_kernel_each_mark_their_own(server):
    short, long = make(server), make(server, cache_ttl="1h")
    messages = [Message(role="user", content="Fix it.")]
    for i in range(4):
        messages += plain(i)
        for provider in (short, long):
            body = send(server, provider, messages)
            marks = [
                b["cache_control"] for t in body["messages"] for b in t["content"] if "cache_control" in b
            ]
            assert marks and all(m == provider.cache_control for m in marks)
