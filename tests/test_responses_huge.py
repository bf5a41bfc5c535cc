"""The issue's 50 MB compaction item through ``%agent`` (issue 43; slow: the fake server writes the
item three times, ~150 MB over loopback). The answer and its cost are kept, the item is not, the
run says why, and the log stays small and consistent: resume yields what the run ended with."""

from __future__ import annotations

import json

import pytest

from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.session import load_session
from tests.fakes import FakeServer
from tests.fakes import openai_responses_server as wire
from tests.scripts import run_magic


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    with FakeServer("openai-responses") as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-huge-1f2e")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        yield server


def test_a_50_mb_compaction_item_is_refused_and_the_answer_and_its_cost_are_kept(ip, fake) -> None:
    run_magic(ip, "config PseudoClaude.openai_api = 'responses'")
    huge = wire.compaction_item("A" * (50 << 20))
    fake.play(wire.answer("Still here.", compaction=huge, u=wire.usage(160_000, 30)))
    out = run_magic(
        ip, 'agent --provider openai --model gpt-5.5 --strategy api --mode auto --no-memory "go on"'
    )
    assert "was 50.0 MB, over the 1.0 MB kept" in out and "Still here." in out
    agent = current_agent(ip)
    messages = agent.session.conversation.messages()
    assert [m.content for m in messages] == ["go on", "Still here."]
    assert not any(r.kind == "compaction" for m in messages for r in m.reasoning)
    log = agent.session.dir / "conversation.jsonl"
    assert log.stat().st_size < 64 << 10  # nothing of the item was written
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["input_tokens"] for e in entries if e["type"] == "usage"] == [160_000]  # paid, kept
    assert any("50.0 MB" in e["text"] for e in entries if e["type"] == "note")
    assert [m.id for m in load_session(agent.session.dir).messages] == [m.id for m in messages]
