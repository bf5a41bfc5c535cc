"""Issue 32, items 4 and 8: honest limits.

When the fixed part of the prompt (system, tools, memory, notebook block) alone does not
fit the window, the error says so with those numbers and what would fit, and never advises
what cannot help; a prompt that got no answer does not stay in the conversation, so failed
prompts do not pile up. ``--thinking`` with the OpenAI-compatible provider and an
undocumented ``--effort`` are usage errors. The 400 is the bytes a real llama-server sent.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from tests import llamacpp_recorded as rec
from tests.fakes import FakeServer
from tests.scripts import read_log


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    with FakeServer("llama.cpp") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        yield fake


def agent_for(workspace: Path, agents: list, **settings) -> Agent:
    config = dict(
        workspace=str(workspace),
        provider="openai",
        model=rec.MODEL,
        context_window=2_048,
        permission_mode="auto",
        fsync=False,
        memory_policy="off",
    )
    config.update(settings)
    agent = Agent(PseudoClaude(**config))
    agents.append(agent)
    return agent


@pytest.mark.parametrize("strategy", ["compact", "rollover"])
def test_a_fixed_prompt_over_the_window_is_explained_with_numbers(
    server, workspace: Path, agents, strategy: str
) -> None:
    server.play(rec.reply("context_error_400"), rec.reply("context_error_400"))
    agent = agent_for(workspace, agents, strategy=strategy)
    seen: list = []
    first = agent.run("read data.txt", listeners=[seen.append])
    assert first.status == "error"
    text = str(first.error)
    assert "request (2062 tokens) exceeds the available context size (2048 tokens)" in text
    assert "the fixed part of the prompt alone does not fit the 2,048-token window" in text
    assert "system prompt (with memory) ~" in text and "tool schemas ~" in text
    assert f"({len(server.bodies[0]['tools'])} tools)" in text
    if strategy == "compact":  # scaled to its 2,062: bytes/3.5 says less for this request
        assert "(the server's count, shared out by the estimate)" in text
    assert "what would fit: a window of at least ~" in text
    # Nothing that cannot help: no compaction, no new session, no rollover.
    for useless in ("%compact", "%sessions new", "--strategy rollover"):
        assert useless not in text
    # The unanswered prompt left the conversation (it is still in the cell).
    assert agent.session.conversation.messages() == []
    assert any("got no answer and was taken out" in getattr(e, "text", "") for e in seen)
    # A second try does not pile up a second unanswered prompt.
    agent.run("read data.txt please")
    assert agent.session.conversation.messages() == []
    users = [e for e in read_log(agent.session.dir) if e["type"] == "message" and e["role"] == "user"]
    assert len(users) == 2 and [
        e["reason"] for e in read_log(agent.session.dir) if e["type"] == "replace"
    ] == [
        "edit",
        "edit",
    ]


def test_thinking_with_the_openai_provider_is_a_usage_error(ip, server) -> None:
    with pytest.raises(UsageError, match="Anthropic's extended thinking.*--effort"):
        ip.run_line_magic("agent", "--provider openai --thinking 2048 hello")
    assert server.requests == []


def test_an_undocumented_effort_is_a_usage_error(ip, server) -> None:
    with pytest.raises(UsageError, match="'bogus' is not a reasoning_effort.*low, medium, high"):
        ip.run_line_magic("agent", "--provider openai --model o3 --effort bogus hello")
    assert server.requests == []


# --- the compact tool set ---------------------------------------------------------------------------


def test_large_tool_schemas_are_said_once_and_the_compact_set_is_smaller(
    server, workspace: Path, agents
) -> None:
    from tests.fakes import openai_server as wire

    server.play(wire.answer("one"), wire.answer("two"), wire.answer("three"))
    agent = agent_for(workspace, agents, context_window=4_096)
    seen: list = []
    agent.run("hi", listeners=[seen.append])
    agent.run("again", listeners=[seen.append])
    said = [e.text for e in seen if type(e).__name__ == "Notice" and "tool schemas are" in e.text]
    assert len(said) == 1 and "of the 4,096-token window" in said[0] and "compact_tools = True" in said[0]
    full = server.bodies[0]["tools"]
    agent.settings.compact_tools = True
    agent.run("small now", listeners=[seen.append])
    small = server.bodies[2]["tools"]
    assert [t["function"]["name"] for t in small] == [
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "grep",
        "bash",
    ]
    assert all(len(t["function"]["description"]) <= 160 for t in small)
    assert "description" not in str(small[0]["function"]["parameters"])
    assert len(str(small)) * 2 < len(str(full))
    assert len(said) == 1  # nothing more said with the compact set on


def test_the_compact_set_is_not_advised_when_it_is_on(server, workspace: Path, agents) -> None:
    server.play(rec.reply("context_error_400"))
    agent = agent_for(workspace, agents, compact_tools=True)
    summary = agent.run("read data.txt")
    assert "compact_tools" not in str(summary.error) and "a window of at least" in str(summary.error)


def test_advice_after_compacting_once_reads_as_one_sentence() -> None:
    from pseudoclaude_nb.context.limits import FixedPrompt, too_long_advice

    parts = FixedPrompt(system=300, tools=1_400, tool_count=6, notebook=0, conversation=5_300)
    text = too_long_advice("too long", 4_096, parts, rollover_helps=True, compactable=True, history=True)
    assert text.endswith(
        "Try %compact, or a new session (%sessions new), or the rollover strategy (--strategy rollover)."
    ), text
