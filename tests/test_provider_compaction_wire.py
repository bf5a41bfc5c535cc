"""``--strategy api`` on the wire: the real ``anthropic`` SDK against a local fake server (issue 31).

The server's answers are built from the documentation's shapes (``tests/fakes/anthropic_server``:
a ``compaction`` block first, streamed as ``content_block_start`` with null content, one
``compaction_delta``, ``content_block_stop``; the compaction's usage in ``usage.iterations``),
never from this package's encoder. The provider tests check what a request carries and what an
answer gives back; the magic tests run ``%agent --strategy api`` as a person would and check the
log, resume, ``%context`` and ``%compact --undo``.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from IPython.core.error import UsageError

from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.messages import Message, Reasoning
from pseudoclaude_nb.providers.anthropic import AnthropicProvider
from pseudoclaude_nb.providers.base import ReasoningEnd, Request, ServerContext, UsageEvent, collect
from pseudoclaude_nb.session import load_session
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as wire
from tests.scripts import run_magic

KEY = "sk-ant-compaction-77c1"
# As the documentation's example: the summary request read 180,000 tokens and wrote 3,500; the
# answer after it read the compacted 23,000.
ITERATIONS = [
    {"type": "compaction", "input_tokens": 180_000, "output_tokens": 3_500},
    {"type": "message", "input_tokens": 23_000, "output_tokens": 1_000},
]
# A block as the server may return it: the readable summary and an opaque part that must go
# back unchanged (its bytes are never shown).
BLOCK = {
    "type": "compaction",
    "content": "Summary of the conversation: the user asked for a stats module; mean() is done.",
    "encrypted_content": "Eu8BCkYIBBgCKkDx+opaque/Zm9vYmFy==",
}


@pytest.fixture
def server():
    with FakeServer("anthropic") as fake:
        yield fake


@pytest.fixture
def provider(server: FakeServer) -> AnthropicProvider:
    p = AnthropicProvider(api_key=KEY, base_url=server.url, model="claude-sonnet-4-6", max_retries=0)
    p.server_context = ServerContext(trigger=120_000)
    return p


def ask(*messages: Message, purpose: str = "agent") -> Request:
    return Request(system="You are terse.", messages=list(messages), purpose=purpose)  # type: ignore[arg-type]


def test_an_agent_request_carries_the_beta_header_and_the_compaction_edit(server, provider) -> None:
    server.play(wire.answer("hi"))
    collect(provider.stream(ask(Message(role="user", content="hello"))))
    sent = server.requests[0]
    assert "compact-2026-01-12" in sent.headers["anthropic-beta"].split(",")
    assert sent.body["context_management"] == {
        "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 120_000}}]
    }


def test_tool_result_clearing_adds_its_edit_and_beta_and_the_trigger_has_the_apis_floor(
    server, provider
) -> None:
    provider.server_context = ServerContext(trigger=9_000, clear_tool_results=30_000, keep_tool_uses=2)
    server.play(wire.answer("hi"))
    collect(provider.stream(ask(Message(role="user", content="hello"))))
    sent = server.requests[0]
    assert set(sent.headers["anthropic-beta"].split(",")) == {
        "compact-2026-01-12",
        "context-management-2025-06-27",
        "cache-diagnosis-2026-04-07",  # issue 43: every agent request asks why the cache missed
    }
    clear, compact = sent.body["context_management"]["edits"]
    assert clear == {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": 30_000},
        "keep": {"type": "tool_uses", "value": 2},
    }
    assert compact["trigger"]["value"] == 50_000  # the documented minimum, not 9,000


def test_a_summary_request_asks_for_no_context_management(server, provider) -> None:
    server.play(wire.message("the summary"))
    provider.complete(ask(Message(role="user", content="summarize"), purpose="summary"))
    sent = server.requests[0]
    assert "context_management" not in sent.body and "anthropic-beta" not in sent.headers


def test_a_streamed_compaction_block_is_kept_verbatim_and_its_usage_apart(server, provider) -> None:
    server.play(
        wire.answer(
            "Continuing from the summary.",
            compaction=BLOCK,
            usage={"input_tokens": 23_000, "output_tokens": 1_000},
            iterations=ITERATIONS,
        )
    )
    events = list(provider.stream(ask(Message(role="user", content="go on"))))
    parts = [e.part for e in events if isinstance(e, ReasoningEnd)]
    assert [p.kind for p in parts] == ["compaction"]
    assert orjson.loads(parts[0].data or "") == BLOCK
    usage = [e.usage for e in events if isinstance(e, UsageEvent)][-1]
    # The top-level counts are the answer's (the anchor); the compaction is billed besides.
    assert (usage.input_tokens, usage.output_tokens) == (23_000, 1_000)
    assert (usage.compaction_input_tokens, usage.compaction_output_tokens) == (180_000, 3_500)
    assert usage.prompt_total == 23_000


def test_a_non_streamed_compaction_block_is_kept_verbatim_too(server, provider) -> None:
    server.play(wire.message("ok", compaction=BLOCK, iterations=ITERATIONS))
    response = provider.complete(ask(Message(role="user", content="go on")))
    assert response.text == "ok"
    assert [orjson.loads(r.data or "") for r in response.reasoning] == [BLOCK]
    assert response.usage.compaction_input_tokens == 180_000


def test_the_block_goes_back_byte_for_byte_first_in_its_turn(server, provider) -> None:
    block = Reasoning(kind="compaction", data=json.dumps(BLOCK))
    answer = Message(role="assistant", content="Continuing.", reasoning=(block,))
    server.play(wire.answer("fine"))
    collect(provider.stream(ask(answer, Message(role="user", content="next"))))
    turn = server.requests[0].body["messages"][0]
    assert turn["role"] == "assistant" and turn["content"][0] == BLOCK
    assert turn["content"][1] == {"type": "text", "text": "Continuing."}
    assert orjson.dumps(BLOCK) in server.requests[0].raw  # the very bytes, key order included


def test_without_server_context_the_block_goes_as_its_summary_text(server, provider) -> None:
    """A summary request, or another strategy later in the session: the API is not asked to
    read a compaction block, and the summary still reaches the model (the opaque part does not)."""
    provider.server_context = None
    block = Reasoning(kind="compaction", data=json.dumps(BLOCK))
    answer = Message(role="assistant", content="Continuing.", reasoning=(block,))
    server.play(wire.answer("fine"))
    collect(provider.stream(ask(answer, Message(role="user", content="next"))))
    first = server.requests[0].body["messages"][0]["content"][0]
    assert first["type"] == "text" and BLOCK["content"] in first["text"]
    assert BLOCK["encrypted_content"] not in server.requests[0].raw.decode()


# --- %agent --strategy api, end to end ---------------------------------------------------------


@pytest.fixture
def anthropic_env(monkeypatch: pytest.MonkeyPatch):
    with FakeServer("anthropic") as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        yield fake


def entries(ip) -> list[dict]:
    path = current_agent(ip).session.dir / "conversation.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


AGENT = "agent --provider anthropic --model claude-sonnet-4-6 --strategy api --mode auto"


def _compacting_session(ip, fake: FakeServer) -> None:
    """Two runs: a plain one, then one whose answer the server compacted."""
    fake.play(
        wire.answer("Noted: the stats module.", usage={"input_tokens": 90_000, "output_tokens": 20}),
        wire.answer(
            "Continuing from the summary: mean() is next.",
            compaction=BLOCK,
            usage={"input_tokens": 2_000, "output_tokens": 30},
            iterations=[
                {"type": "compaction", "input_tokens": 150_500, "output_tokens": 900},
                {"type": "message", "input_tokens": 2_000, "output_tokens": 30},
            ],
        ),
    )
    run_magic(ip, f'{AGENT} "plan a stats module"')
    out = run_magic(ip, f'{AGENT} "go on"')
    assert "compacted (server)" in out


def test_a_server_compaction_is_logged_as_a_replace_and_sent_back_on_the_next_request(
    ip, anthropic_env
) -> None:
    _compacting_session(ip, anthropic_env)
    messages = current_agent(ip).session.conversation.messages()
    # What the API reads from now on: the compacted answer, nothing before it.
    assert [m.content for m in messages] == ["Continuing from the summary: mean() is next."]
    log = entries(ip)
    replaces = [e for e in log if e["type"] == "replace"]
    assert [r["reason"] for r in replaces] == ["compact"] and replaces[0]["count"] == 1
    compacts = [e for e in log if e["type"] == "compact"]
    assert [(c["trigger"], c["ok"]) for c in compacts] == [("server", True)]
    usage = [e for e in log if e["type"] == "usage"][-1]
    assert (usage["compaction_input_tokens"], usage["compaction_output_tokens"]) == (150_500, 900)

    anthropic_env.play(wire.answer("Done."))
    run_magic(ip, f'{AGENT} "finish it"')
    sent = anthropic_env.requests[-1]
    first = sent.body["messages"][0]
    assert first["role"] == "assistant" and first["content"][0] == BLOCK
    assert orjson.dumps(BLOCK) in sent.raw
    assert [m["role"] for m in sent.body["messages"]] == ["assistant", "user"]
    # The log still says what each request was: the compacting one read the whole history.
    at_two, at_three = run_magic(ip, "context --at 2"), run_magic(ip, "context --at 3")
    assert "plan a stats module" in at_two and "3 messages" in at_two
    assert "plan a stats module" not in at_three and "by then: 1 replaces (compact ×1)" in at_three


def test_resume_after_a_server_compaction_gives_the_same_effective_context(ip, anthropic_env) -> None:
    _compacting_session(ip, anthropic_env)
    agent = current_agent(ip)
    before = [(m.id, m.content, m.reasoning) for m in agent.session.conversation.messages()]
    loaded = load_session(agent.session.dir)
    assert [(m.id, m.content, m.reasoning) for m in loaded.messages] == before
    session_id = agent.session.writer.id
    run_magic(ip, "sessions new")
    anthropic_env.play(wire.answer("Resumed."))
    run_magic(ip, f'{AGENT} --session {session_id} "where were we?"')
    sent = anthropic_env.requests[-1].body["messages"]
    assert sent[0]["content"][0] == BLOCK and len(sent) == 2


def test_context_shows_the_server_compaction_without_its_opaque_content(ip, anthropic_env) -> None:
    _compacting_session(ip, anthropic_env)
    out = run_magic(ip, "context")
    assert "server compaction at 167,000" in out
    assert BLOCK["encrypted_content"] not in out


def test_undo_puts_back_the_messages_and_the_next_request_has_no_compaction_block(ip, anthropic_env) -> None:
    _compacting_session(ip, anthropic_env)
    out = run_magic(ip, "compact --undo")
    assert "undid the compaction" in out and "4 messages restored" in out
    messages = current_agent(ip).session.conversation.messages()
    assert [m.content for m in messages] == [
        "plan a stats module",
        "Noted: the stats module.",
        "go on",
        "Continuing from the summary: mean() is next.",
    ]
    assert not any(r.kind == "compaction" for m in messages for r in m.reasoning)
    anthropic_env.play(wire.answer("Back with everything."))
    run_magic(ip, f'{AGENT} "and now?"')
    sent = anthropic_env.requests[-1]
    assert b'"compaction"' not in sent.raw.split(b'"context_management"')[0]
    assert sent.body["messages"][0]["role"] == "user"
    # The undo is logged; a resume yields the restored state.
    loaded = load_session(current_agent(ip).session.dir)
    assert [m.id for m in loaded.messages] == [
        m.id for m in current_agent(ip).session.conversation.messages()
    ]


def test_strategy_api_with_the_openai_provider_is_a_usage_error_naming_what_to_use(
    ip, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(UsageError) as info:
        run_magic(ip, 'agent --provider openai --strategy api "hello"')
    text = str(info.value)
    assert "chat completions" in text and "--provider anthropic" in text and "--strategy compact" in text
    assert "openai_api = 'responses'" in text  # issue 43: the Responses API has it
