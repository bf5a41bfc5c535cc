"""Issue 32, items 2, 6 and 7: reserves that fit the window, an output cap that fits what
the window leaves, junk summaries rejected, and the compaction line's "before".

The seed's numbers hold for 128K–1M windows (and down to the demo's 50,000); a 2K–8K
window gets positive thresholds and no summary before every request. Requests go through
real httpx to a local server, which replays real llama.cpp bytes where they exist.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.context.settings import CompactSettings
from pseudoclaude_nb.events import Compacted, CompactStarted, ContextState
from tests import llamacpp_recorded as rec
from tests.fakes import FakeServer
from tests.fakes import openai_server as wire
from tests.scripts import run_magic


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    with FakeServer("llama.cpp") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        yield fake


# What the real server counted for the system prompt and tools (1,951 real tokens), plus a word.
REAL = {"prompt_tokens": 1_953, "completion_tokens": 2, "total_tokens": 1_955}


def agent_for(workspace: Path, agents: list, **settings) -> Agent:
    config = dict(
        workspace=str(workspace),
        provider="openai",
        model=rec.MODEL,
        permission_mode="auto",
        fsync=False,
        memory_policy="off",
    )
    config.update(settings)
    agent = Agent(PseudoClaude(**config))
    agents.append(agent)
    return agent


# --- the numbers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("window", [2_048, 4_096, 8_192, 16_384, 32_768])
def test_a_small_window_gets_positive_ordered_thresholds(window: int) -> None:
    s = CompactSettings.fitted(window)
    marks = s.rollover_limits
    assert 0 < s.threshold < window
    assert 0 < marks["remind"] < marks["base"] < marks["hard"] < window
    assert s.threshold >= 0.7 * window  # most of the window is for the conversation
    assert 0 < s.tail_tokens < s.threshold and s.spill_bytes < window * 3.5 * 0.25
    assert s.spill_bytes < s.spill_batch_bytes


@pytest.mark.parametrize(
    ("window", "threshold", "marks"),
    [
        (128_000, 95_000, {"remind": 80_000, "base": 95_000, "hard": 108_000}),
        (200_000, 167_000, {"remind": 152_000, "base": 167_000, "hard": 180_000}),
        (1_000_000, 967_000, {"remind": 952_000, "base": 967_000, "hard": 980_000}),
        (50_000, 17_000, {"remind": 6_800, "base": 17_000, "hard": 30_000}),  # the demo's
    ],
)
def test_the_seed_numbers_hold_for_large_windows(window: int, threshold: int, marks: dict) -> None:
    s = CompactSettings.fitted(window)
    assert s.threshold == threshold and s.rollover_limits == marks
    assert (s.summary_reserve, s.safety_margin, s.recent_tokens) == (20_000, 13_000, 20_000)
    assert (s.spill_bytes, s.spill_batch_bytes) == (50_000, 200_000)


def test_the_settings_are_ceilings_for_a_small_window() -> None:
    s = CompactSettings.fitted(4_096, summary_reserve=300, safety_margin=100, spill_bytes=900)
    assert (s.summary_reserve, s.safety_margin, s.spill_bytes) == (300, 100, 900)


def test_context_shows_positive_lines_for_a_4096_window(ip, workspace: Path) -> None:
    ip.run_line_magic("config", "PseudoClaude.context_window = 4096")
    table = run_magic(ip, "context")
    assert "of 4,096 tokens" in table and "Layer 2 at 2,991" in table, table
    assert "-" not in table.split("Layer 2 at")[1].split()[0]
    ip.run_line_magic("config", "PseudoClaude.strategy = 'rollover'")
    table = run_magic(ip, "context")
    assert "remind 1,197 · base 2,991 · hard 3,441" in table, table


# --- no summary before every request; max_tokens fits the window -------------------------------------


def test_a_4096_window_sends_no_summary_and_asks_only_for_what_is_left(
    server, workspace: Path, agents
) -> None:
    server.play(wire.answer("Hello.", usage=REAL), wire.answer("Again.", usage=REAL))
    agent = agent_for(workspace, agents, context_window=4_096)
    seen: list = []
    agent.run("hi", listeners=[seen.append])
    agent.run("and again", listeners=[seen.append])
    assert len(server.requests) == 2  # two answers, no summary request before either
    assert not [e for e in seen if isinstance(e, CompactStarted)]
    for body in server.bodies:
        assert body["stream"] is True  # agent requests, not summaries
        # The setting asks 8,192; the window leaves 4,096 minus the prompt (~1,400 by the
        # estimate before any usage, 1,955 + the new messages after).
        assert 64 <= body["max_tokens"] < 4_096 - 1_000
    assert server.bodies[1]["max_tokens"] < 4_096 - 1_955


def test_an_answer_cut_by_the_window_says_so_not_the_output_cap(server, workspace: Path, agents) -> None:
    # Real llama.cpp bytes: a plain answer running until the 4,096 context is full
    # (1,953 prompt + 2,143 answer tokens), finish_reason "length".
    server.play(rec.stream("plain_answer_length_at_ctx_end"))
    agent = agent_for(workspace, agents, context_window=4_096)
    seen: list = []
    summary = agent.run("explain", listeners=[seen.append])
    assert summary.status == "truncated"
    said = [e.text for e in seen if type(e).__name__ == "Notice"]
    assert any("cut where the context window ran out (4,096 of 4,096 tokens" in n for n in said), said
    assert not any("output cap (about" in n for n in said)


# --- junk summaries -----------------------------------------------------------------------------------


def _over_the_line(agent: Agent, workspace: Path) -> None:
    """Fill a small window's conversation past its Layer 2 line with two old exchanges."""
    conversation = agent.session.conversation
    for i in range(2):
        conversation.add_user(f"step {i}: " + "describe the data in detail " * 60)
        conversation.add_assistant("the data has rows and columns " * 60)


@pytest.mark.parametrize(
    ("summary", "why"),
    [
        (
            wire.completion("## Confirmed requirements\n- Use exactly these sections", finish="length"),
            "cut by the output cap",
        ),
        (wire.completion("   "), "empty summary"),
        (wire.completion("word " * 3_000), "is not shorter than what it replaces"),
    ],
)
def test_a_junk_summary_is_rejected_and_counted(server, workspace: Path, agents, summary, why) -> None:
    server.play(wire.answer("first", usage=REAL), summary, wire.answer("second"))
    agent = agent_for(workspace, agents, context_window=4_096)
    agent.run("start")
    _over_the_line(agent, workspace)
    before = agent.session.conversation.messages()
    seen: list = []
    agent.run("go on", listeners=[seen.append])
    done = [e for e in seen if isinstance(e, Compacted)]
    assert len(done) == 1 and not done[0].ok and why in done[0].error, done
    assert agent.session.context.shared.breaker.failures == 1
    assert agent.session.conversation.messages()[: len(before)] == before  # nothing replaced
    assert server.bodies[1]["stream"] is False  # the summary request
    assert server.bodies[1]["max_tokens"] <= 655  # the 4,096 window's summary reserve


def test_the_compaction_line_before_is_the_estimate_that_triggered_it(
    server, workspace: Path, agents
) -> None:
    server.play(
        wire.answer("first", usage=REAL), wire.completion("They described the data."), wire.answer("second")
    )
    agent = agent_for(workspace, agents, context_window=4_096)
    agent.run("start")
    _over_the_line(agent, workspace)
    seen: list = []
    agent.run("go on", listeners=[seen.append])
    started = next(i for i, e in enumerate(seen) if isinstance(e, CompactStarted))
    trigger = [e for e in seen[:started] if isinstance(e, ContextState)][-1].estimated_tokens
    done = next(e for e in seen if isinstance(e, Compacted))
    assert done.ok and seen[started].before_tokens == done.before_tokens == trigger
    assert trigger >= agent.session.context.shared.settings.threshold
