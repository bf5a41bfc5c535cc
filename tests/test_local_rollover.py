"""Issue 32, item 5: rollover in a small window hands off instead of wedging.

The fallback step offers only two tools, so its usage counts a much smaller prompt than the
next full request; the estimate must add back the schemas it left out, or the context
passes the hard limit with no rollover. The host's handoff must fit the new window.
Real httpx against a local server with llama.cpp-shaped streams (usage on the finish chunk).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.context.estimate import DIGITS_LOCAL, estimate_request
from pseudoclaude_nb.events import Notice, RolloverCommitted, RolloverFallback
from pseudoclaude_nb.messages import Message
from tests import llamacpp_recorded as rec
from tests.fakes import FakeServer
from tests.fakes import openai_server as wire
from tests.llamacpp_fake import BABBLE, LlamaCppLike, count_tokens

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


# --- against a server that counts like llama.cpp (tests/llamacpp_fake.py) ------------------------


def small_window_agent(workspace: Path, agents: list, max_steps: int) -> Agent:
    agent = Agent(
        PseudoClaude(
            workspace=str(workspace),
            provider="openai",
            model="gemma",
            strategy="rollover",
            permission_mode="auto",
            max_steps=max_steps,
            memory_policy="off",
            compact_tools=True,
            fsync=False,
        )
    )  # no --context-window: the window is learned from /props, as in the live check
    agents.append(agent)
    return agent


def parts(workspace: Path, n: int) -> list[tuple[str, dict]]:
    for i in range(n):
        (workspace / f"part{i}.txt").write_text(
            "".join(f"line {j}: value {j * 37 % 1000}\n" for j in range(40))
        )
    return [("read_file", {"path": f"part{i}.txt"}) for i in range(n)]


def first_requests_of_new_windows(server: LlamaCppLike) -> list[int]:
    return [
        real
        for body, real in zip(server.bodies, server.prompts, strict=True)
        if len(body["messages"]) == 2 and "<handoff>" in str(body["messages"][1].get("content"))
    ]


def test_a_long_task_in_a_4k_window_hands_off_instead_of_wedging(
    workspace: Path, agents, monkeypatch
) -> None:
    # Six reads of ~1 KB of numbered lines, then the model rambles until the window ends
    # it (as Gemma 3 270M did live). Before: fallback, then the answer was cut by the
    # window and the run ended "truncated" with no rollover.
    moves = [("list_files", {}), *parts(workspace, 6), BABBLE, ("read_file", {"path": "part5.txt"}), "Done."]
    with LlamaCppLike(4_096, moves) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        agent = small_window_agent(workspace, agents, max_steps=16)
        seen: list = []
        summary = agent.run("summarize every part file", listeners=[seen.append], new=True)
    assert agent.session.context.shared.settings.context_window == 4_096  # learned from /props
    assert agent.session.context.shared.digits == DIGITS_LOCAL  # a local server's tokenizer
    base = agent.session.context.shared.settings.rollover_limits["base"]
    commits = [e for e in seen if isinstance(e, RolloverCommitted)]
    assert commits and all(e.reason == "hard-limit" for e in commits)
    assert summary.status == "done" and summary.final_text == "Done."
    assert 400 not in server.statuses  # no request went over the window
    # Each new window starts under the base mark as the server counts it: the host's
    # handoff fits with room for work (measured as the server counts, not as estimated).
    fresh = first_requests_of_new_windows(server)
    assert len(fresh) == len(commits) and all(real < base for real in fresh), (fresh, base)


def test_an_answer_cut_by_the_window_hands_off_and_the_run_goes_on(
    workspace: Path, agents, monkeypatch
) -> None:
    reads = parts(workspace, 1)
    with LlamaCppLike(4_096, [BABBLE, reads[0], "The first line is line 0."]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        agent = small_window_agent(workspace, agents, max_steps=6)
        seen: list = []
        summary = agent.run("read part0.txt and tell me its first line", listeners=[seen.append], new=True)
    # The first answer rambles until the window is full (finish_reason "length").
    assert server.prompts[0] + 1 < 4_096
    notices = [e.text for e in seen if isinstance(e, Notice)]
    assert any("goes on in a fresh window" in t for t in notices)
    assert [type(e) for e in seen if isinstance(e, RolloverCommitted)] == [RolloverCommitted]
    assert summary.status == "done" and summary.final_text == "The first line is line 0."
    assert "<original_request>\nread part0.txt" in server.bodies[1]["messages"][1]["content"]


def test_a_cut_answer_in_a_window_with_room_still_ends_the_run(workspace: Path, agents, monkeypatch) -> None:
    # The output cap, not the window: nothing to hand off, the run ends "truncated" as before.
    with LlamaCppLike(32_768, [BABBLE]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        agent = small_window_agent(workspace, agents, max_steps=6)
        agent.settings.agent_output_tokens = 200
        summary = agent.run("hi", new=True)
    assert summary.status == "truncated" and len(server.bodies) == 1


def test_the_fake_counts_like_gemma_and_refuses_like_llama_cpp() -> None:
    counts = json.loads((Path(__file__).parent / "live" / "gemma_counts.json").read_text())
    for sample in counts["samples"]:
        if sample["kind"] != "cjk":  # the stand-in has no CJK vocabulary: it counts high there
            assert abs(count_tokens(sample["text"]) / sample["tokens"] - 1) < 0.2, sample["kind"]
    recorded = rec.request("context_error_400")
    real = json.loads(rec.raw("context_error_400"))["error"]
    with LlamaCppLike(real["n_ctx"], []) as server:
        status, body = server.chat(recorded)
    error = json.loads(body)["error"]
    assert status == 400 and error["type"] == real["type"] and error["n_ctx"] == real["n_ctx"]
    assert error["n_prompt_tokens"] > real["n_prompt_tokens"]  # denser than Gemma: a harder test


def worker_log(lines: int) -> str:
    return "\n".join(
        f"2026-12-06 05:00:{i % 60:02d} INFO worker {i % 7} handled job {1000 + i}" for i in range(lines)
    )


def test_an_answer_cut_by_the_cap_past_the_base_mark_goes_on_to_the_hand_off(
    workspace: Path, agents, monkeypatch
) -> None:
    # The live shape (Gemma 3 270M, 4,096 window, 384-token cap): a prompt near the base
    # mark, an answer that rambles to the cap and leaves the context between the base and
    # hard marks. Before: "truncated", no rollover. Now: the fallback step, then the host's
    # rollover, then the task goes on in the new window.
    with LlamaCppLike(4_096, [BABBLE, BABBLE, "Done."]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        agent = small_window_agent(workspace, agents, max_steps=6)
        agent.settings.agent_output_tokens = 384
        seen: list = []
        summary = agent.run(
            f"My worker log:\n{worker_log(30)}\n\nlist the files", listeners=[seen.append], new=True
        )
    limits = agent.session.context.shared.settings.rollover_limits
    first = server.prompts[0] + 384
    assert limits["base"] <= first < limits["hard"], (first, limits)  # the shape under test
    kinds = [type(e) for e in seen if isinstance(e, (RolloverFallback, RolloverCommitted))]
    assert kinds == [RolloverFallback, RolloverCommitted]
    assert summary.status == "done" and summary.final_text == "Done."
    assert 400 not in server.statuses
