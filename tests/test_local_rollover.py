"""Issue 32, item 5: rollover in a small window hands off instead of wedging.

The fallback step offers only two tools, so its usage counts a much smaller prompt than the
next full request; the estimate must add back the schemas it left out, or the context
passes the hard limit with no rollover. The host's handoff must fit the new window.
Real httpx against a local server with llama.cpp-shaped streams (usage on the finish chunk).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.compact.estimate import estimate_request
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.events import RolloverCommitted, RolloverFallback
from pseudoclaude_nb.messages import Message
from tests import llamacpp_recorded as rec
from tests.fakes import FakeServer
from tests.fakes import openai_server as wire

WINDOW = 8_192  # rollover: remind 2,393 · base 5,981 · hard 6,882


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    with FakeServer("llama.cpp") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        yield fake


def usage(prompt: int) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": 20, "total_tokens": prompt + 20}


def test_the_fallback_steps_small_tool_set_does_not_hide_the_hard_limit(
    server, workspace: Path, agents
) -> None:
    (workspace / "notes.txt").write_text("a line of notes\n" * 40)
    read = ("read_file", {"path": "notes.txt"})
    server.play(
        # 1: full tools; the real count puts the context past the base limit.
        wire.answer("", [("c1", *read)], usage=usage(6_000), dialect="llamacpp"),
        # 2: the fallback step (two tools, ~1,250 tokens of schemas fewer): the model reads
        # again instead of handing off. Its count alone is under the base limit.
        wire.answer("", [("c2", *read)], usage=usage(5_000), dialect="llamacpp"),
        # 3: after the host's rollover, in the new window.
        wire.answer("Continuing from the handoff.", usage=usage(2_900), dialect="llamacpp"),
    )
    agent = Agent(
        PseudoClaude(
            workspace=str(workspace),
            provider="openai",
            model=rec.MODEL,
            context_window=WINDOW,
            strategy="rollover",
            permission_mode="auto",
            fsync=False,
            memory_policy="off",
        )
    )
    agents.append(agent)
    seen: list = []
    summary = agent.run("summarize notes.txt", listeners=[seen.append])
    assert summary.status == "done", summary.error
    assert [len(b["tools"]) for b in server.bodies[:2]] == [8, 2]  # full, then the fallback's
    assert [type(e) for e in seen if isinstance(e, (RolloverFallback, RolloverCommitted))] == [
        RolloverFallback,
        RolloverCommitted,
    ]
    assert (
        server.requests[1].body["messages"][-1]["content"].startswith("[host note] context rollover fallback")
    )
    committed = next(e for e in seen if isinstance(e, RolloverCommitted))
    assert committed.reason == "hard-limit"
    # The estimate that triggered it counted the full tool set again, not the fallback's two
    # (5,020 as counted + the ~1,250 tokens of schemas the fallback left out).
    assert committed.before_tokens >= agent.session.context.shared.settings.rollover_limits["base"]
    # The new window's request fits the window with room to answer.
    third = server.bodies[2]
    assert len(third["tools"]) == 8 and "<handoff>" in third["messages"][1]["content"]
    system = third["messages"][0]["content"]
    rest = [Message(role=m["role"], content=m["content"]) for m in third["messages"][1:]]
    assert (
        estimate_request(system, rest, third["tools"])
        < agent.session.context.shared.settings.rollover_limits["base"]
    )


def test_no_reminder_before_the_first_answer_in_a_small_window(server, workspace: Path, agents) -> None:
    # 4,096 tokens: the reminder mark (1,197) is below the fixed prompt alone (~2,600).
    server.play(wire.answer("Hello.", usage=usage(2_400), dialect="llamacpp"))
    agent = Agent(
        PseudoClaude(
            workspace=str(workspace),
            provider="openai",
            model=rec.MODEL,
            context_window=4_096,
            strategy="rollover",
            permission_mode="auto",
            fsync=False,
            memory_policy="off",
        )
    )
    agents.append(agent)
    seen: list = []
    agent.run("hi", listeners=[seen.append])
    assert not [e for e in seen if "rollover reminder" in getattr(e, "text", "")]
    assert "[host note]" not in str(server.bodies[0]["messages"])
