"""A Layer 2 summary costs money too (issue 31): its request is in the run's cost and the log.

Each summary request is logged as a ``spend`` entry (its own type: a reader that anchors the
estimate on ``usage`` entries never takes a summary's size for the conversation's). The oracle
for "not an anchor" is the loader on the same log with the ``spend`` lines taken out.
"""

from __future__ import annotations

import json
from pathlib import Path

from pseudoclaude_nb.session import load_session
from pseudoclaude_nb.session.spend import session_spend
from tests.scripts import read_log, scripted_agent, turn, write_script
from tests.test_steer_compact import chatty, summary_requests

TOO_LONG = {"error": "context_too_long"}


def of_type(session_dir: Path, kind: str) -> list[dict]:
    return [e for e in read_log(session_dir) if e["type"] == kind]


def without_spend(session_dir: Path, into: Path) -> Path:
    into.mkdir()
    lines = (session_dir / "conversation.jsonl").read_bytes().splitlines(keepends=True)
    (into / "conversation.jsonl").write_bytes(b"".join(x for x in lines if json.loads(x)["type"] != "spend"))
    return into


def test_a_summary_in_a_run_is_in_the_runs_cost_and_the_log_but_never_an_anchor(
    workspace: Path, agents, tmp_path: Path
):
    agent = scripted_agent(workspace, recent_tokens=100)
    agents.append(agent)
    first = write_script(workspace, "first", turn("answer one: " + "a" * 8_000))
    assert agent.run("first question", script=first).status == "done"
    path = write_script(
        workspace, "second", TOO_LONG, turn("done after compacting"), summaries=["the summary"]
    )

    summary = agent.run("second question", script=path)

    assert summary.status == "done", summary.error
    spent = of_type(agent.session.dir, "spend")
    assert [(e["purpose"], e["model"]) for e in spent] == [("summary", agent.last_provider.model)]
    assert spent[0]["input_tokens"] > 0 and spent[0]["output_tokens"] > 0
    usage = of_type(agent.session.dir, "usage")
    assert len(usage) == 2  # one answered request per run: the refused one reported nothing
    # the run's cost: its one answered agent request and its summary
    assert len(summary.spend.requests) == 2
    assert summary.spend.usage.output_tokens == usage[-1]["output_tokens"] + spent[0]["output_tokens"]
    # the session's: every usage and spend entry of the log
    assert len(session_spend(agent.session.dir).requests) == 3
    plain = load_session(without_spend(agent.session.dir, tmp_path / "plain"))
    loaded = load_session(agent.session.dir)
    assert loaded.usage_anchor == plain.usage_anchor is not None
    assert [m.to_dict() for m in loaded.messages] == [m.to_dict() for m in plain.messages]


def test_a_preview_writes_no_spend_until_it_is_applied_then_its_one_request(workspace: Path, agents):
    agent = chatty(workspace, agents)
    plan = agent.session.context.preview(agent.provider_for_context())
    assert plan.new is not None and len(plan.spent) == 1
    assert of_type(agent.session.dir, "spend") == []  # a preview writes nothing

    agent.session.context.apply_preview()

    assert [e["purpose"] for e in of_type(agent.session.dir, "spend")] == ["summary"]
    assert summary_requests(agent) == 1  # the applied preview's request, not a second one
