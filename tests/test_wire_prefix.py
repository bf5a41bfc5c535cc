"""The OpenAI-compatible request body: each message converted and encoded once (issue 34).

Real httpx against the local fake server: every body the server receives must be exactly
what converting the whole history anew gives (the reference: ``wire_messages`` without the
provider's ``EncodedHistory``, written by the standard library as httpx would), while a step
encodes only the turns that are new — however long the history is. Replaces, a new user
turn (the running loop's reasoning is no longer sent), images beyond the cap and a change of
image source start over or re-encode what changed, and still send the right body.
"""

from __future__ import annotations

import json

import pytest

from pseudoclaude_nb.messages import ImagePart, Message, Reasoning, ToolCall, ToolResult
from pseudoclaude_nb.providers import wire_prefix
from pseudoclaude_nb.providers.base import MAX_IMAGES, Request
from pseudoclaude_nb.providers.openai_compat import OpenAIProvider
from pseudoclaude_nb.providers.openai_messages import wire_messages
from tests.fakes import FakeServer
from tests.fakes import openai_server as wire


@pytest.fixture
def server():
    with FakeServer("openai") as fake:
        yield fake


@pytest.fixture
def provider(server: FakeServer) -> OpenAIProvider:
    return OpenAIProvider(api_key="sk-test-wire-prefix", base_url=f"{server.url}/v1", model="test-model")


@pytest.fixture
def encodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many wire messages were encoded, one count per request."""
    counts = [0]
    real = wire_prefix.encode

    def counting(value):
        if isinstance(value, dict) and "role" in value:
            counts[-1] += 1
        return real(value)

    monkeypatch.setattr(wire_prefix, "encode", counting)
    return counts


def reference(provider: OpenAIProvider, request: Request) -> list:
    """The wire messages converted anew, through the standard library's JSON (as httpx writes it)."""
    fresh = wire_messages(request.system, request.messages, provider._image_parts(request))
    return json.loads(json.dumps(fresh, ensure_ascii=False))


def step(i: int, reasoning: bool = False) -> list[Message]:
    call = ToolCall(id=f"call_{i}", name="read_file", arguments={"path": f"src/m{i}.py", "note": "é→✓"})
    thought = (Reasoning(kind="reasoning_content", text=f"thinking {i}"),) if reasoning else ()
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
    out.append(Message(role="assistant", content="Done."))
    return out


def send(
    server: FakeServer, provider: OpenAIProvider, messages: list[Message], counts: list[int], **kw
) -> dict:
    counts.append(0)
    server.play(wire.answer("ok"))
    request = Request(system="You are a test.", messages=list(messages), **kw)
    list(provider.stream(request))
    body = server.bodies[-1]
    assert body["messages"] == reference(provider, request)
    return body


@pytest.mark.parametrize("size", [10, 400])
def test_a_growing_history_sends_the_full_body_and_encodes_only_the_new_turns(
    server, provider, encodes, size
):
    messages = history(size) + [Message(role="user", content="Again, please.")]
    send(server, provider, messages, encodes)
    assert encodes[-1] >= 2 * size  # the first request encodes everything
    for i in range(5):
        messages += step(size + i)
        body = send(server, provider, messages, encodes)
        assert body["model"] == "test-model" and body["stream"] is True
        # The new turns, and the last turn before them (it might have grown): a few, at any size.
        assert encodes[-1] <= 4, encodes
    for i in range(3):  # reasoning (DeepSeek): sent while its loop runs, so those turns are encoded again
        messages += step(size + 10 + i, reasoning=True)
        send(server, provider, messages, encodes)
        assert encodes[-1] <= 4 + 2 * i, encodes
    # The running loop's reasoning went back; a new user turn stops it (those turns re-encode).
    assert any("reasoning_content" in m for m in server.bodies[-1]["messages"])
    messages.append(Message(role="user", content="Thanks. One more thing."))
    body = send(server, provider, messages, encodes)
    assert not any("reasoning_content" in m for m in body["messages"])


def test_a_replace_starts_over_and_sends_the_new_history(server, provider, encodes):
    messages = history(30)
    send(server, provider, messages, encodes)
    summary = [Message(role="user", content="Summary of the work so far."), *messages[-5:]]
    send(server, provider, summary, encodes)
    assert encodes[-1] >= 4
    # A message changed in place (a spilled result's preview): same id, another object.
    changed = list(summary)
    old = changed[2]
    changed[2] = old.model_copy(
        update={"tool_result": ToolResult(call_id=old.tool_result.call_id, content="preview")}
    )
    body = send(server, provider, changed, encodes)
    assert any(m.get("content") == "preview" for m in body["messages"])


def test_images_beyond_the_cap_and_another_image_source_still_send_the_right_body(server, provider, encodes):
    png = bytes.fromhex(
        "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5b1a3d20000000049454e44ae426082"
    )
    source = lambda part: png  # noqa: E731 - the session's copy of every image

    def shown(i: int) -> Message:
        part = ImagePart(
            media_type="image/png", sha256="0" * 64, path=f"images/{i}.png", width=1, height=1, bytes=len(png)
        )
        return Message(role="user", content=f"picture {i}", parts=(part,))

    messages = history(3)
    for i in range(MAX_IMAGES + 2):
        messages += [shown(i), Message(role="assistant", content=f"Seen {i}.")]
        send(server, provider, messages, encodes, images=source)
    send(server, provider, messages, encodes)  # no source: every image is a note now
    send(server, provider, messages, encodes, images=source)


def test_a_body_made_before_the_next_step_is_still_whole(provider):
    """A retry sends the body made for it even after the prefix grew (its buffer only grows)."""
    messages = history(5)
    first = provider._body(Request(system="s", messages=list(messages)))
    raw = wire_prefix.dumps(first)
    messages += step(99)
    provider._body(Request(system="s", messages=list(messages)))
    provider._body(Request(system="s", messages=list(messages + step(100))))
    assert wire_prefix.dumps(first) == raw
    assert json.loads(raw)["messages"] == json.loads(json.dumps(first["messages"]))


def test_the_body_goes_out_in_pieces_with_its_length_and_arrives_whole(
    server, provider, encodes, monkeypatch
):
    """Pieces far smaller than a message cut the prefix's buffer anywhere; the server still
    gets the very body, announced by Content-Length (not chunked: some servers refuse that)."""
    monkeypatch.setattr(wire_prefix.Body, "PIECE", 7)
    pieces: list[int] = []
    real = wire_prefix.Body.__iter__

    def counting(self):
        for piece in real(self):
            pieces.append(len(piece))
            yield piece

    monkeypatch.setattr(wire_prefix.Body, "__iter__", counting)
    messages = history(20)
    send(server, provider, messages, encodes)
    for i in range(3):
        messages += step(50 + i)
        send(server, provider, messages, encodes)
        sent = server.requests[-1]
        compact = json.dumps(sent.body, ensure_ascii=False, separators=(",", ":")).encode()
        assert int(sent.headers["content-length"]) == len(compact)
        assert "transfer-encoding" not in sent.headers
    assert pieces.count(7) > 1000  # the prefix went out a few bytes at a time


@pytest.mark.parametrize("block", [64, 1000])
def test_the_prefix_in_full_blocks_sends_the_same_body_and_keeps_an_earlier_one_whole(
    server, provider, encodes, monkeypatch, block
):
    """Full blocks of the prefix go out as they are; a body made before more blocks filled
    (a retry) still sends its own bytes."""
    monkeypatch.setattr(wire_prefix, "BLOCK", block)
    messages = history(30)
    send(server, provider, messages, encodes)
    first = provider._body(Request(system="s", messages=list(messages)))
    raw = wire_prefix.dumps(first)
    for i in range(4):
        messages += step(60 + i)
        send(server, provider, messages, encodes)
    assert len(provider._encoded._blocks) > 3  # the prefix filled blocks
    assert wire_prefix.dumps(first) == raw
    assert json.loads(raw)["messages"] == json.loads(json.dumps(first["messages"]))


def test_a_resumed_history_in_the_same_kernel_reuses_the_prefix_and_sends_the_same_body(
    server, provider, encodes, tmp_path
):
    """``%sessions resume`` loads equal copies of the messages, other objects: the prefix holds."""
    from pseudoclaude_nb.conversation import Conversation
    from pseudoclaude_nb.session import load_session
    from pseudoclaude_nb.session.writer import SessionWriter
    from pseudoclaude_nb.workspace import new_session_dir

    messages = history(200) + [Message(role="user", content="Again, please.")]
    send(server, provider, messages, encodes)
    folder = new_session_dir(tmp_path)
    conversation = Conversation()
    with SessionWriter(folder, fsync=False) as writer:
        writer.attach(conversation)
        for m in messages:
            conversation.append(m)
    resumed = list(load_session(folder).messages)
    assert resumed == messages and all(a is not b for a, b in zip(resumed, messages, strict=True))
    resumed += step(300)
    send(server, provider, resumed, encodes)
    assert encodes[-1] <= 4, encodes  # not the 400 messages again
    resumed += step(301)
    send(server, provider, resumed, encodes)
    assert encodes[-1] <= 4, encodes
    # A resumed copy that differs (a message edited on disk) is not taken for the kept one.
    edited = list(resumed)
    edited[5] = edited[5].model_copy(update={"content": "edited on disk"})
    body = send(server, provider, edited, encodes)
    assert any(m.get("content") == "edited on disk" for m in body["messages"])
