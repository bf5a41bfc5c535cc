"""Rollover through the real ``Agent`` (SPEC §9): declare, commit, remind, fallback, force.

Runs use the scripted provider with a 100,000-token window, so the limits are: reminder from
52,000, base (fallback) limit 67,000, hard limit 80,000. Scripted ``usage`` sets the anchor
the way a real provider's figures would, which moves the estimate across those limits.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.context.policies import FALLBACK_MARK, REMIND_MARK
from pseudoclaude_nb.events import (
    ContextState,
    RolloverCommitted,
    RolloverDeclared,
    RolloverFallback,
    RolloverReminded,
)
from pseudoclaude_nb.messages import HOST_REMIND, pairing_problems
from pseudoclaude_nb.session import load_session
from tests.scripts import script, turn

WINDOW = 100_000
PROMPT = "Fix the budget rule in budget.py  \n\n要求：提醒只发一次 — keep `evaluate_budget(state)` pure.\n"
HANDOFF = {
    "confirmed_requirements": [{"text": "the reminder is sent once", "source": "user"}],
    "agent_inferences": ["the off-by-one is in remaining <= threshold"],
    "unresolved_conflicts": ["test_budget.py fails: expected remind, got continue"],
    "unverified_acceptance_criteria": ["pytest tests/test_budget.py passes"],
}
RELATED = [
    {"path": "budget.py", "role": "implementation", "note": "the rule"},
    {"path": "SPEC.md", "role": "spec"},
    {"path": "tests/test_budget.py", "role": "test", "note": "to be written"},
]


def used(tokens: int, t: dict) -> dict:
    """A scripted turn whose response reports ``tokens`` of prompt, as a provider would."""
    return {**t, "usage": {"input_tokens": tokens, "output_tokens": 50}}


def new_context(handoff: dict | None = None, related: list | None = None, call_id: str = "nc") -> tuple:
    return (
        "new_context",
        {"handoff": handoff or HANDOFF, "related_files": RELATED if related is None else related},
        call_id,
    )


@pytest.fixture
def ws(workspace: Path) -> Path:
    (workspace / "budget.py").write_text("def evaluate_budget(state):\n    return 'continue'\n")
    (workspace / "SPEC.md").write_text("# Spec\nRemind once.\n")
    return workspace


def make_agent(ws: Path, agents: list, *turns: dict, **settings) -> Agent:
    path = ws.parent / f"script-{len(agents)}.json"
    path.write_text(json.dumps(script(*turns, context_window=WINDOW)), encoding="utf-8")
    config = dict(
        workspace=str(ws),
        provider="scripted",
        script=str(path),
        permission_mode="auto",
        fsync=False,
        strategy="rollover",
    )
    config.update(settings)
    agent = Agent(PseudoClaude(**config))
    agents.append(agent)
    return agent


def log(agent: Agent) -> list[dict]:
    text = (agent.session.dir / "conversation.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def requests(agent: Agent):
    return agent.last_runner.provider.requests


def tool_names(request) -> list[str]:
    return [t["name"] for t in request.tools]


def result_of(agent: Agent, call_id: str):
    (entry,) = [
        e
        for e in log(agent)
        if e["type"] == "message" and (e.get("tool_result") or {}).get("call_id") == call_id
    ][:1]
    return entry["tool_result"]


# --- the declared rollover -----------------------------------------------------------------------


def test_a_declared_rollover_commits_at_the_next_step_with_anchors_and_the_pinned_request(ws: Path, agents):
    agent = make_agent(
        ws,
        agents,
        turn("Reading the rule.", ("read_file", {"path": "budget.py"}, "r1")),
        # new_context and a sibling call in one step: the switch waits for both results.
        turn(
            "CANARY-7731: the rule returns continue too early.",
            new_context(),
            ("read_file", {"path": "SPEC.md"}, "r2"),
        ),
        turn("", ("search_history", {"query": "CANARY-7731"}, "s1")),
        turn("Done."),
    )
    events: list = []
    summary = agent.run(PROMPT, listeners=[events.append])
    assert summary.status == "done", summary.error
    sid = agent.session.id
    entries = log(agent)

    # Phase 1: the intent, logged by the handler, with the conversation untouched.
    (caller,) = [
        e for e in entries if e["type"] == "message" and any(c["id"] == "nc" for c in e["tool_calls"])
    ]
    intent, commit = [e for e in entries if e["type"] == "rollover"]
    assert (intent["phase"], intent["reason"], intent["call_id"]) == ("intent", "model", "nc")
    assert intent["message_uuid"] == caller["id"]
    assert intent["handoff"]["confirmed_requirements"] == [
        {"text": "the reminder is sent once", "source": "user"}
    ]
    assert [(f["path"], f["role"], f["exists"]) for f in intent["related_files"]] == [
        ("budget.py", "implementation", True),
        ("SPEC.md", "spec", True),
        ("tests/test_budget.py", "test", False),
    ]
    answer = result_of(agent, "nc")
    assert not answer["is_error"] and "before your next step" in answer["content"]
    assert "tests/test_budget.py" in answer["content"]  # the missing file is noted

    # Phase 2: at the pre-step boundary, after the sibling's result, one replace.
    order = [
        (e["type"], e.get("phase") or e.get("reason"), (e.get("tool_result") or {}).get("call_id"))
        for e in entries
    ]
    assert order.index(("message", None, "r2")) < order.index(("replace", "rollover", None))
    assert order.index(("replace", "rollover", None)) < order.index(("rollover", "commit", None))
    replaces = [e for e in entries if e["type"] == "replace"]
    assert [(r["reason"], r["count"]) for r in replaces] == [("rollover", 1)]
    assert (commit["reason"], commit["call_id"], commit["message_uuid"]) == ("model", "nc", caller["id"])

    # The new window's first (and only) message, as the model received it.
    first = requests(agent)[2].messages
    assert len(first) == 1 and first[0].role == "user"
    text = first[0].content
    assert text.startswith("Previous context is available in durable storage.")
    assert f"session_id: {sid}\nmessage_uuid: {caller['id']}\n" in text
    assert f"<original_request>\n{PROMPT}\n</original_request>" in text  # verbatim, spaces and all
    for title in (
        "1. Confirmed requirements",
        "2. Agent inferences",
        "3. Unresolved conflicts",
        "4. Unverified",
    ):
        assert f"### {title}" in text
    assert "- the reminder is sent once (source: user)" in text
    assert "- test_budget.py fails: expected remind, got continue" in text
    assert "- budget.py (implementation) - the rule" in text
    assert "- tests/test_budget.py (test) - to be written [did not exist at handoff time]" in text

    # The anchor resolves: a search of the old window names the message that called new_context.
    found = result_of(agent, "s1")["content"]
    assert f"message_uuid {caller['id']}" in found and "CANARY-7731" in found

    loaded = load_session(agent.session.dir)
    assert loaded.messages[0].content == text and pairing_problems(loaded.messages) == []
    declared = [e for e in events if isinstance(e, RolloverDeclared)]
    committed = [e for e in events if isinstance(e, RolloverCommitted)]
    assert [(d.call_id, d.missing_files) for d in declared] == [("nc", ("tests/test_budget.py",))]
    assert [(c.reason, c.message_uuid, c.session_id) for c in committed] == [("model", caller["id"], sid)]
    assert "new_context" in tool_names(requests(agent)[0]) and "search_history" in tool_names(
        requests(agent)[0]
    )
    assert any(s["title"] == "rollover" for s in agent.context_manifest()["system_sections"])
    assert "## Context rollover" in requests(agent)[0].system


def test_the_original_request_stays_pinned_across_rollovers(ws: Path, agents):
    agent = make_agent(
        ws,
        agents,
        turn("first window", new_context(call_id="a")),
        turn("second window", new_context({"agent_inferences": ["still on it"]}, [], call_id="b")),
        turn("third window: done"),
    )
    assert agent.run(PROMPT).status == "done"
    third = requests(agent)[2].messages
    assert len(third) == 1
    assert third[0].content.count("<original_request>") == 1
    assert f"<original_request>\n{PROMPT}\n</original_request>" in third[0].content
    assert "still on it" in third[0].content and "the reminder is sent once" not in third[0].content
    commits = [e for e in log(agent) if e["type"] == "rollover" and e["phase"] == "commit"]
    assert [c["call_id"] for c in commits] == ["a", "b"]
    assert agent.session.context.shared.rollovers == 2


def test_new_context_refuses_bad_input_and_declares_nothing(ws: Path, agents):
    agent = make_agent(
        ws,
        agents,
        turn(
            "",
            new_context(related=[{"path": "../outside.py", "role": "other"}], call_id="out"),
            new_context({"agent_inferences": []}, [], call_id="empty"),
            new_context({"confirmed_requirements": [{"text": "no source"}]}, [], call_id="nosrc"),
            new_context(related=[{"path": "budget.py", "role": "library"}], call_id="role"),
        ),
        turn("I will keep working here."),
    )
    assert agent.run(PROMPT).status == "done"
    out = result_of(agent, "out")
    assert (
        out["is_error"]
        and "outside the workspace" in out["content"]
        and "nothing was declared" in out["content"]
    )
    assert result_of(agent, "empty")["is_error"] and "empty" in result_of(agent, "empty")["content"]
    assert result_of(agent, "nosrc")["is_error"] and "source" in result_of(agent, "nosrc")["content"]
    assert result_of(agent, "role")["is_error"] and "role" in result_of(agent, "role")["content"]
    assert not [e for e in log(agent) if e["type"] in ("rollover", "replace")]
    assert agent.session.context.shared.handoff is None


# --- remind, fallback, force ------------------------------------------------------------------------


def test_the_reminder_is_given_once_as_a_logged_user_note(ws: Path, agents):
    agent = make_agent(
        ws,
        agents,
        used(55_000, turn("", ("read_file", {"path": "budget.py"}))),
        used(56_000, turn("", ("read_file", {"path": "SPEC.md"}))),
        used(57_000, turn("Done for now.")),
    )
    events: list = []
    assert agent.run(PROMPT, listeners=[events.append]).status == "done"
    notes = [m for m in agent.session.conversation.messages() if m.content.startswith(REMIND_MARK)]
    assert len(notes) == 1 and "new_context" in notes[0].content
    # It reached the model in the request after the reminder was due, and only there.
    second, third = requests(agent)[1], requests(agent)[2]
    assert second.messages[-1].content == notes[0].content
    assert [m.id for m in third.messages].count(notes[0].id) == 1
    assert tool_names(second) == tool_names(third) == tool_names(requests(agent)[0])
    assert [e.base_limit for e in events if isinstance(e, RolloverReminded)] == [67_000]
    logged = [e for e in log(agent) if e["type"] == "message" and e["content"].startswith(REMIND_MARK)]
    assert len(logged) == 1
    states = [e for e in events if isinstance(e, ContextState) and e.strategy == "rollover"]
    assert states and states[-1].marks == (("remind", 52_000), ("base", 67_000), ("hard", 80_000))
    assert states[-1].phase == "reminded"


def test_fallback_offers_only_the_rollover_tools_and_refuses_other_calls(ws: Path, agents):
    agent = make_agent(
        ws,
        agents,
        used(70_000, turn("", ("read_file", {"path": "budget.py"}))),
        turn("", ("bash", {"command": "touch should_not_exist.txt"}, "sneak"), new_context()),
        turn("Continuing in the new window."),
    )
    events: list = []
    assert agent.run(PROMPT, listeners=[events.append]).status == "done"
    fallback_request = requests(agent)[1]
    assert tool_names(fallback_request) == ["new_context", "search_history"]
    assert fallback_request.messages[-1].content.startswith(FALLBACK_MARK)
    refused = result_of(agent, "sneak")
    assert (
        refused["is_error"] and "not available" in refused["content"] and "new_context" in refused["content"]
    )
    assert not (ws / "should_not_exist.txt").exists()
    # The declared rollover wins at the next boundary, and the full surface is back.
    (commit,) = [e for e in log(agent) if e["type"] == "rollover" and e["phase"] == "commit"]
    assert commit["reason"] == "model"
    assert "bash" in tool_names(requests(agent)[2]) and len(requests(agent)[2].messages) == 1
    assert [e.tools for e in events if isinstance(e, RolloverFallback)] == [("new_context", "search_history")]


def test_ignoring_the_fallback_forces_a_rollover_with_a_host_written_handoff(ws: Path, agents):
    agent = make_agent(
        ws,
        agents,
        used(
            60_000,
            turn(
                "I will edit budget.py next.",
                ("edit_file", {"path": "budget.py", "old_string": "'continue'", "new_string": "'remind'"}),
            ),
        ),
        used(70_000, turn("Checking the spec as well.", ("read_file", {"path": "SPEC.md"}))),
        used(71_000, turn("One more look.", ("read_file", {"path": "budget.py"}, "late"))),
        turn("Picking up from the host's handoff."),
    )
    events: list = []
    assert agent.run(PROMPT, listeners=[events.append]).status == "done"
    assert result_of(agent, "late")["is_error"]  # the fallback step's call was refused
    entries = log(agent)
    rollovers = [e for e in entries if e["type"] == "rollover"]
    assert [(e["phase"], e["reason"], e["call_id"]) for e in rollovers] == [("commit", "hard-limit", None)]
    handoff = rollovers[0]["handoff"]
    assert handoff["confirmed_requirements"] == [] and handoff["unresolved_conflicts"] == []
    inferences = "\n".join(handoff["agent_inferences"])
    assert "did not write this handoff" in inferences
    assert "One more look." in inferences and "Checking the spec as well." in inferences
    assert "budget.py (edited, read)" in inferences and "SPEC.md (read)" in inferences
    text = requests(agent)[3].messages[0].content
    assert "host wrote the handoff below" in text and "all of it is unverified" in text
    assert f"<original_request>\n{PROMPT}\n</original_request>" in text
    assert "- budget.py (other) - edited, read" in text
    last_assistant = [
        e for e in entries if e["type"] == "message" and e["role"] == "assistant" and not e.get("replace_id")
    ][-2]
    assert f"message_uuid: {last_assistant['id']}" in text
    committed = [e for e in events if isinstance(e, RolloverCommitted)]
    assert [(c.reason, c.before_tokens > 67_000) for c in committed] == [("hard-limit", True)]


def test_the_hard_limit_forces_a_rollover_without_a_fallback_step(ws: Path, agents):
    agent = make_agent(
        ws,
        agents,
        used(85_000, turn("Big read done.", ("read_file", {"path": "budget.py"}))),
        turn("Fresh window."),
    )
    events: list = []
    assert agent.run(PROMPT, listeners=[events.append]).status == "done"
    assert not [e for e in events if isinstance(e, (RolloverFallback, RolloverReminded))]
    assert [e.reason for e in events if isinstance(e, RolloverCommitted)] == ["hard-limit"]
    assert len(requests(agent)[1].messages) == 1


def test_a_prompt_too_long_answer_forces_one_rollover_and_one_retry(ws: Path, agents):
    agent = make_agent(
        ws,
        agents,
        turn("Reading.", ("read_file", {"path": "budget.py"})),
        {"error": "context_too_long"},
        turn("Retried in a fresh window."),
    )
    summary = agent.run(PROMPT)
    assert summary.status == "done" and summary.final_text == "Retried in a fresh window."
    assert [(e["phase"], e["reason"]) for e in log(agent) if e["type"] == "rollover"] == [
        ("commit", "hard-limit")
    ]


# --- across runs and kernels --------------------------------------------------------------------------


def test_a_pending_intent_survives_a_restart_and_commits_before_the_next_request(ws: Path, agents):
    first = make_agent(ws, agents, turn("handing over", new_context()), max_steps=1)
    assert first.run(PROMPT).status == "max-steps"  # stopped right after the intent
    sid = first.session.id
    first.close()

    second = make_agent(ws, agents, turn("Continuing."))
    second.resume(sid)
    assert second.session.context.shared.handoff is not None
    assert second.run("please go on").status == "done"
    text = requests(second)[0].messages[0].content
    assert len(requests(second)[0].messages) == 1
    assert f"<original_request>\n{PROMPT}\n</original_request>" in text
    assert "<user_message_after_handoff>\nplease go on\n</user_message_after_handoff>" in text
    assert [(e["phase"], e["call_id"]) for e in log(second) if e["type"] == "rollover"] == [
        ("intent", "nc"),
        ("commit", "nc"),
    ]


def test_a_resumed_window_remembers_its_reminder(ws: Path, agents):
    first = make_agent(ws, agents, used(55_000, turn("", ("read_file", {"path": "budget.py"}))), turn("ok"))
    first.run(PROMPT)
    sid = first.session.id
    first.close()
    second = make_agent(ws, agents, turn("still fine"))
    second.resume(sid)
    assert HOST_REMIND in second.session.context.shared.notes
    second.run("next")
    notes = [m for m in second.session.conversation.messages() if m.content.startswith(REMIND_MARK)]
    assert len(notes) == 1


def test_switching_strategy_in_one_session_keeps_the_anchor(ws: Path, agents):
    agent = make_agent(ws, agents, used(30_000, turn("an answer")), strategy="compact")
    agent.run("one")
    assert agent.session.context.shared.anchor[0] == 30_050
    assert "new_context" not in tool_names(requests(agent)[0])
    events: list = []
    agent.run("two", strategy="rollover", listeners=[events.append])
    assert agent.session.context.strategy.name == "rollover"
    assert "new_context" in tool_names(requests(agent)[0])
    first_state = next(e for e in events if isinstance(e, ContextState))
    assert first_state.strategy == "rollover" and first_state.estimated_tokens > 30_050
    agent.run("three", strategy="compact")
    assert agent.session.context.strategy.name == "compact"
    assert "new_context" not in tool_names(requests(agent)[0])


# --- %context ---------------------------------------------------------------------------------------------


def test_the_manifest_shows_rollover_limits_instead_of_the_layer2_line(ws: Path, agents):
    agent = make_agent(ws, agents, turn("hi"), context_window=WINDOW)
    before = agent.context_manifest()
    assert before["strategy"] == "rollover"
    assert before["rollover_limits"] == {"remind": 52_000, "base": 67_000, "hard": 80_000}
    assert {"new_context", "search_history"} <= set(before["tools"])
    assert [s["title"] for s in before["system_sections"]][-1] == "rollover"
    agent.run("hello")
    after = agent.context_manifest()
    assert after["rollover_limits"] == before["rollover_limits"]
    assert after["rollovers"] == 0 and after["rollover_phase"] == "normal"
    compact = make_agent(ws, agents, turn("hi"), strategy="compact", context_window=WINDOW)
    data = compact.context_manifest()
    assert "rollover_limits" not in data and "new_context" not in data["tools"]


def test_the_live_gauge_draws_the_rollover_marks(ws: Path, agents):
    from pseudoclaude_nb.widgets import ContextGauge

    agent = make_agent(
        ws, agents, used(55_000, turn("", ("read_file", {"path": "budget.py"}))), turn("Done.")
    )
    gauge = ContextGauge()
    assert agent.run(PROMPT, listeners=[gauge]).status == "done"
    assert gauge.state.marks == (("remind", 52_000), ("base", 67_000), ("hard", 80_000))
    assert "Layer 2" not in gauge.widget.value and "Layer 2" not in gauge.widget.text
    assert "remind 52,000" in gauge.widget.text and "hard 80,000" in gauge.widget.text


def test_a_prompt_that_starts_like_a_reminder_does_not_suppress_it(ws: Path, agents):
    agent = make_agent(
        ws,
        agents,
        used(55_000, turn("", ("read_file", {"path": "budget.py"}))),
        used(56_000, turn("Done for now.")),
    )
    events: list = []
    prompt = f"{REMIND_MARK}: this is the user's own text, not the host's"
    assert agent.run(prompt, listeners=[events.append]).status == "done"
    assert [e.base_limit for e in events if isinstance(e, RolloverReminded)] == [67_000]
    hosted = [m for m in agent.session.conversation.messages() if m.host == "rollover-remind"]
    assert len(hosted) == 1 and hosted[0].content != prompt
    logged = [e for e in log(agent) if e["type"] == "message" and e.get("host") == "rollover-remind"]
    assert len(logged) == 1
