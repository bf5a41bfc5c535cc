"""After a compaction the next request sends the compacted history, not the kept prefix (issue 34).

The OpenAI-compatible and Anthropic providers keep the encoded wire form of the history the
last request sent, and reuse it while the history only grows. A compaction replaces the
history: here ``%agent``'s runner gets "prompt too long" from a local server (real httpx, real
SDK), compacts, and retries. The retried request must hold the summary and the new question
and none of the messages the summary replaced, though the refused request had just settled
them as the prefix (the summary request between them, another form of request, starts the
prefix over too; the test fails only if neither that nor the check of the messages works);
and the next run must grow from the compacted history.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as anthropic_wire
from tests.fakes import openai_server as openai_wire

OLD = "answer one: " + "a" * 8_000
SHORT = 6


def text_of(message: dict) -> str:
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text") or str(b.get("content") or "") for b in content)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_request_after_a_compaction_sends_the_compacted_history(
    provider: str, workspace: Path, agents, monkeypatch: pytest.MonkeyPatch
) -> None:
    wire = openai_wire if provider == "openai" else anthropic_wire
    with FakeServer(provider) as server:
        if provider == "openai":
            monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test-compaction")
            summary = openai_wire.completion("the summary")
        else:
            monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
            monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-compaction")
            summary = anthropic_wire.message("the summary")
        agent = Agent(
            PseudoClaude(
                workspace=str(workspace),
                provider=provider,
                model="test-model",
                context_window=200_000,
                recent_tokens=100,
                permission_mode="auto",
                fsync=False,
                memory_policy="off",
            )
        )
        agents.append(agent)
        server.play(wire.answer(OLD))
        assert agent.run("first question").status == "done"
        for i in range(SHORT):  # short exchanges: the compaction keeps them (the history stays as long)
            server.play(wire.answer(f"noted {i}"))
            assert agent.run(f"short question {i}").status == "done"
        server.play(wire.too_long(), summary, wire.answer("done after compacting"))
        result = agent.run("third question")
        assert result.status == "done", result.error
        refused, retried = server.bodies[SHORT + 1], server.bodies[SHORT + 3]
        # As long as the refused one: its length alone would not tell the kept prefix is gone.
        assert len(retried["messages"]) >= len(refused["messages"])
        assert any(OLD in text_of(m) for m in refused["messages"])
        texts = [text_of(m) for m in retried["messages"]]
        assert not any(OLD in t for t in texts), "the replaced messages went out again"
        assert any("the summary" in t for t in texts) and "third question" in texts[-1]
        server.play(wire.answer("and more"))
        assert agent.run("fourth question").status == "done"
        after = [text_of(m) for m in server.bodies[SHORT + 4]["messages"]]
        assert not any(OLD in t for t in after) and any("the summary" in t for t in after)
        assert "fourth question" in after[-1]
