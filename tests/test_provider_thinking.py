"""Anthropic: extended thinking, output caps and named stops, on documented stream shapes.

The real SDK talks to a local server that plays streams written out in ``tests/recorded``;
asserts are on the request bodies the server received, field by field, on the session log
and on what the run printed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.errors import ConfigError
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.providers.anthropic import INTERLEAVED_BETA, AnthropicProvider
from pseudoclaude_nb.providers.anthropic_native import DIAGNOSIS_BETA
from pseudoclaude_nb.providers.base import ReasoningDelta, Request, TextDelta, collect
from tests import recorded
from tests.fakes import FakeServer, Reply
from tests.fakes import anthropic_server as wire
from tests.scripts import read_log

KEY = "sk-ant-think-3c8e1d90"
SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
THINKING_BLOCK = {
    "type": "thinking",
    "thinking": "The user wants the files. I will list them.",
    "signature": SIGNATURE,
}
REDACTED_BLOCK = {"type": "redacted_thinking", "data": REDACTED}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    with FakeServer("anthropic") as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        yield fake


def agent_for(workspace: Path, agents: list, **settings) -> Agent:
    config = dict(
        workspace=str(workspace),
        provider="anthropic",
        permission_mode="auto",
        fsync=False,
        memory_policy="off",
    )
    config.update(settings)
    agent = Agent(PseudoClaude(**config))
    agents.append(agent)
    return agent


def ask(text: str = "hi", **kwargs) -> Request:
    return Request(system="s", messages=[Message(role="user", content=text)], **kwargs)


# --- thinking kept with the message, passed back before tool_use -----------------------------------


def test_thinking_goes_back_before_tool_use_with_its_signature_and_is_logged(
    server, workspace: Path, agents
) -> None:
    (workspace / "notes.txt").write_text("milk\n")
    server.play(recorded.sse(recorded.ANTHROPIC_THINK_THEN_TOOL), recorded.anthropic_text())
    agent = agent_for(workspace, agents, model="claude-haiku-4-5", thinking_budget=2048)
    seen: list = []
    summary = agent.run("which files?", listeners=[seen.append])
    assert summary.status == "done" and summary.final_text == "One file: notes.txt."

    first, second = server.bodies
    # Thinking on: budget on top of the answer's room, below max_tokens; no temperature.
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert first["max_tokens"] == 8192 + 2048
    assert "temperature" not in first
    # Interleaved thinking between tool calls, for a manual-budget model with tools.
    # issue 43: beside the cache diagnosis every agent request asks for
    assert server.requests[0].headers["anthropic-beta"].split(",") == [INTERLEAVED_BETA, DIAGNOSIS_BETA]
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == THINKING_BLOCK
    assert assistant["content"][1] == REDACTED_BLOCK
    assert assistant["content"][2] == {
        "type": "tool_use",
        "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
        "name": "list_files",
        "input": {"pattern": "*.txt"},
    }
    assert second["messages"][2]["content"][0]["tool_use_id"] == "toolu_01T1x1fJ34qAmk2tNTrN7Up6"

    # Never the answer: thinking streamed as its own events, not as text.
    from pseudoclaude_nb.events import AssistantDelta
    from pseudoclaude_nb.events import ReasoningDelta as RunReasoning

    said = "".join(e.text for e in seen if isinstance(e, AssistantDelta))
    thought = "".join(e.text for e in seen if isinstance(e, RunReasoning))
    assert "I will list them" not in said and thought == THINKING_BLOCK["thinking"]

    entries = [e for e in read_log(agent.session.dir) if e["type"] == "message" and e["role"] == "assistant"]
    assert entries[0]["reasoning"] == [
        {"kind": "thinking", "text": THINKING_BLOCK["thinking"], "signature": SIGNATURE},
        {"kind": "redacted_thinking", "text": "", "data": REDACTED},
    ]
    assert entries[0]["content"] == ""
    assert "reasoning" not in entries[1] and "stop_reason" not in entries[1]


def test_thinking_blocks_go_back_after_a_resume_from_the_log_in_a_new_agent(
    server, workspace: Path, agents
) -> None:
    (workspace / "notes.txt").write_text("milk\n")
    # Step 2 is refused without retries, so the run ends between the tool result and the answer.
    server.play(
        recorded.sse(recorded.ANTHROPIC_THINK_THEN_TOOL),
        Reply(
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            {"x-should-retry": "false"},
        ),
    )
    first = agent_for(workspace, agents, model="claude-haiku-4-5", thinking_budget=2048)
    summary = first.run("which files?")
    assert summary.status == "error"
    # x-should-retry: false — one request was made, and the message does not claim retries.
    assert len(server.requests) == 2 and "retries" not in str(summary.error)
    session_id = first.session.id
    first.close()

    server.play(recorded.anthropic_text())
    second = agent_for(workspace, agents, model="claude-haiku-4-5", thinking_budget=2048)
    assert second.run("go on", session_id=session_id).status == "done"
    body = server.bodies[-1]
    assistant = body["messages"][1]
    assert [b["type"] for b in assistant["content"]] == ["thinking", "redacted_thinking", "tool_use"]
    assert assistant["content"][0] == THINKING_BLOCK and assistant["content"][1] == REDACTED_BLOCK
    user = body["messages"][2]["content"]
    assert user[0]["type"] == "tool_result" and user[-1]["text"] == "go on"


def test_adaptive_models_get_adaptive_thinking_and_the_budget_as_room() -> None:
    with FakeServer("anthropic") as fake:
        fake.play(recorded.anthropic_text())
        provider = AnthropicProvider(
            api_key=KEY, base_url=fake.url, thinking_budget=4096
        )  # claude-sonnet-5-5
        collect(provider.stream(ask(tools=[])))
    body = fake.bodies[0]
    assert body["thinking"] == {"type": "adaptive"} and body["max_tokens"] == 8192 + 4096
    assert fake.requests[0].headers["anthropic-beta"] == DIAGNOSIS_BETA  # no interleaved-thinking beta


def test_thinking_budget_stays_below_max_tokens_at_the_model_cap() -> None:
    with FakeServer("anthropic") as fake:
        fake.play(recorded.anthropic_text(), wire.message("summary"))
        # claude-opus-4-1: 32,000 output tokens at most.
        provider = AnthropicProvider(
            api_key=KEY, base_url=fake.url, model="claude-opus-4-1", thinking_budget=40_000
        )
        collect(provider.stream(ask(max_tokens=8192)))
        provider.complete(ask(max_tokens=20_000, purpose="summary"))
    agent, summary = fake.bodies
    assert agent["max_tokens"] == 32_000
    assert agent["thinking"]["type"] == "enabled"
    assert 1024 <= agent["thinking"]["budget_tokens"] < agent["max_tokens"]
    assert agent["thinking"]["budget_tokens"] == 32_000 - 8192
    # Summaries do not think, and their cap fits the model.
    assert "thinking" not in summary and summary["max_tokens"] == 20_000


def test_thinking_on_a_model_without_it_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no extended thinking"):
        AnthropicProvider(
            api_key=KEY, base_url="http://127.0.0.1:9", model="claude-3-5-haiku", thinking_budget=2048
        )
    with pytest.raises(ConfigError, match="at least 1024"):
        AnthropicProvider(api_key=KEY, base_url="http://127.0.0.1:9", thinking_budget=500)


def test_message_start_without_usage_does_not_crash_and_thinking_streams_apart() -> None:
    with FakeServer("anthropic") as fake:
        fake.play(recorded.sse(recorded.ANTHROPIC_THINK_THEN_TOOL))
        provider = AnthropicProvider(api_key=KEY, base_url=fake.url)
        events = list(provider.stream(ask()))
    response = collect(iter(events))
    assert response.usage.input_tokens == 0 and response.usage.output_tokens == 89
    assert [r.kind for r in response.reasoning] == ["thinking", "redacted_thinking"]
    assert response.reasoning[0].signature == SIGNATURE
    assert response.text == "" and not any(isinstance(e, TextDelta) for e in events)
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == THINKING_BLOCK["thinking"]


# --- output caps ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "asked", "sent"),
    [
        ("claude-3-haiku-20240307", 20_000, 4_096),
        ("claude-3-opus-20240229", 8_192, 4_096),
        ("claude-3-5-sonnet-20241022", 20_000, 8_192),
        ("claude-haiku-4-5", 20_000, 20_000),
    ],
)
def test_every_request_output_cap_fits_the_model(model: str, asked: int, sent: int) -> None:
    with FakeServer("anthropic") as fake:
        fake.play(wire.message("a summary"), recorded.anthropic_text())
        provider = AnthropicProvider(api_key=KEY, base_url=fake.url, model=model)
        provider.complete(ask(max_tokens=asked, purpose="summary"))
        collect(provider.stream(ask(max_tokens=asked)))
    assert [b["max_tokens"] for b in fake.bodies] == [sent, sent]


def test_max_output_tokens_setting_overrides_the_table() -> None:
    with FakeServer("anthropic") as fake:
        fake.play(wire.message("a summary"))
        provider = AnthropicProvider(
            api_key=KEY, base_url=fake.url, model="my-proxy-model", max_output_tokens=3000
        )
        provider.complete(ask(max_tokens=20_000, purpose="summary"))
    assert fake.bodies[0]["max_tokens"] == 3000


# --- named stops -------------------------------------------------------------------------------------


def test_a_tool_call_cut_by_the_cap_is_dropped_and_the_step_retried_once_with_the_model_cap(
    server, workspace: Path, agents
) -> None:
    server.play(
        recorded.sse(recorded.ANTHROPIC_CUT_TOOL),
        recorded.sse(recorded.ANTHROPIC_WRITE_TOOL),
        recorded.anthropic_text(),
    )
    agent = agent_for(workspace, agents, model="claude-haiku-4-5")
    seen: list = []
    summary = agent.run("write big.py", listeners=[seen.append])
    assert summary.status == "done"
    assert [b["max_tokens"] for b in server.bodies] == [8192, 64_000, 8192]
    assert (workspace / "big.py").read_text() == "def a():\n    return 1\n"
    notices = [e.text for e in seen if type(e).__name__ == "Notice"]
    assert any("cut the write_file call" in n and "retried once with 64,000" in n for n in notices)
    # The cut call is in neither the conversation nor the log; the retry's call is.
    calls = [c.id for m in agent.session.conversation.messages() for c in m.tool_calls]
    assert calls == ["toolu_02Big"]
    log = (agent.session.dir / "conversation.jsonl").read_text()
    assert "toolu_01Big" not in log
    retry_messages = server.bodies[1]["messages"]
    assert "toolu_01Big" not in str(retry_messages) and "Writing the module." not in str(retry_messages)


def test_a_cut_tool_call_at_the_model_cap_stops_with_advice_and_keeps_the_text(
    server, workspace: Path, agents
) -> None:
    server.play(recorded.sse(recorded.ANTHROPIC_CUT_TOOL))
    agent = agent_for(workspace, agents, model="claude-3-5-sonnet-20241022")  # cap 8,192: no retry
    summary = agent.run("write big.py")
    assert summary.status == "error" and len(server.requests) == 1
    text = str(summary.error)
    assert "output cap (8,192 tokens) cut the write_file call" in text
    assert "smaller steps" in text and "write the file in parts" in text and "run %agent again" not in text
    assert not (workspace / "big.py").exists()
    messages = agent.session.conversation.messages()
    assert [m.role for m in messages] == ["user", "assistant"]
    assert messages[1].content == "Writing the module." and messages[1].tool_calls == ()
    assert messages[1].stop_reason == "max_tokens"


def test_text_cut_by_the_cap_is_kept_marked_truncated_with_a_notice(server, workspace: Path, agents) -> None:
    server.play(recorded.anthropic_text("max_tokens"))
    agent = agent_for(workspace, agents)
    seen: list = []
    summary = agent.run("explain", listeners=[seen.append])
    assert summary.status == "truncated" and summary.final_text == "One file: notes.txt."
    assert any("cut at the output cap" in getattr(e, "text", "") for e in seen)
    entry = [e for e in read_log(agent.session.dir) if e["type"] == "message"][-1]
    assert entry["content"] == "One file: notes.txt." and entry["stop_reason"] == "max_tokens"


def test_a_refusal_is_shown_and_logged_as_the_answer_with_a_notice(server, workspace: Path, agents) -> None:
    server.play(recorded.sse(recorded.ANTHROPIC_REFUSAL))
    agent = agent_for(workspace, agents)
    seen: list = []
    summary = agent.run("something bad", listeners=[seen.append])
    assert summary.status == "refused" and summary.final_text == "I can't help with that."
    assert any("refused" in getattr(e, "text", "") for e in seen)
    entry = [e for e in read_log(agent.session.dir) if e["type"] == "message"][-1]
    assert entry["role"] == "assistant" and entry["content"] == "I can't help with that."
    assert entry["stop_reason"] == "refusal"
