"""Issue 32, item 1: an answer the output cap ended keeps every call that arrived whole.

Real httpx against a local server replaying the bytes a real ``llama-server`` (Gemma 3 270M)
sent: four tool calls with complete, schema-valid JSON arguments, then
``finish_reason: "length"``. All four run; only a call actually cut is dropped and named.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from tests import llamacpp_recorded as rec
from tests.fakes import FakeServer
from tests.fakes import openai_server as wire
from tests.scripts import read_log

CASE = "four_complete_calls_then_length"


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
        context_window=32_768,  # stated, so the server is not asked for it
        permission_mode="auto",
        fsync=False,
        memory_policy="off",
    )
    config.update(settings)
    agent = Agent(PseudoClaude(**config))
    agents.append(agent)
    return agent


def notices(seen: list) -> list[str]:
    return [e.text for e in seen if type(e).__name__ == "Notice"]


def test_four_complete_calls_cut_by_length_all_run(server, workspace: Path, agents) -> None:
    server.play(rec.stream(CASE), wire.answer("Done."))
    agent = agent_for(workspace, agents)
    seen: list = []
    summary = agent.run("read data.txt", listeners=[seen.append])
    assert summary.status == "done" and summary.final_text == "Done."
    assert len(server.requests) == 2  # no retry of the step: its calls were whole
    messages = agent.session.conversation.messages()
    answer = messages[1]
    assert [c.name for c in answer.tool_calls] == ["read_file", "write_file", "edit_file", "write_file"]
    assert answer.tool_calls[0].arguments == {"path": "file", "offset": 1, "limit": 2000}
    assert answer.stop_reason is None  # the calls are whole: not a truncated answer
    results = [m.tool_result for m in messages if m.tool_result is not None]
    assert [r.call_id for r in results] == [c.id for c in answer.tool_calls]
    assert (workspace / "file").read_text() == "data.txt"  # write_file really ran
    said = notices(seen)
    assert any(
        "kept 4 whole calls (read_file, write_file, edit_file, write_file), which run; nothing was cut" in n
        for n in said
    ), said
    assert not any("before its arguments were complete" in n for n in said)
    # The second request carries all four calls and their four results back.
    sent = server.bodies[1]["messages"]
    assert len([m for m in sent if m["role"] == "tool"]) == 4
    log = [e for e in read_log(agent.session.dir) if e["type"] == "message"]
    assert len(log[1]["tool_calls"]) == 4


def test_only_the_call_actually_cut_is_dropped_and_named(server, workspace: Path, agents) -> None:
    # The same bytes, with the last call's closing brace (its final argument piece) gone:
    # the cap cut it; the three before it are whole.
    frames = rec.events(CASE)
    last_piece = max(i for i, f in enumerate(frames) if b'"arguments":"}"' in f)
    server.play(rec.stream(CASE, frames[:last_piece] + frames[last_piece + 1 :]), wire.answer("Done."))
    agent = agent_for(workspace, agents)
    seen: list = []
    summary = agent.run("read data.txt", listeners=[seen.append])
    assert summary.status == "done"
    answer = agent.session.conversation.messages()[1]
    assert [c.name for c in answer.tool_calls] == ["read_file", "write_file", "edit_file"]
    assert "the write_file call was dropped, not run" in answer.content
    said = notices(seen)
    assert any(
        "kept 3 whole calls (read_file, write_file, edit_file)" in n
        and "dropped write_file: cut before its arguments were complete" in n
        for n in said
    ), said
    ids = json.dumps(server.bodies[1]["messages"])
    assert "VUo9PnpB1HRjSa5DIljyyJihrKZNQ4QX" not in ids  # the cut call's id never goes back


def test_a_whole_call_whose_arguments_do_not_fit_the_tool_is_dropped(server, workspace: Path, agents) -> None:
    calls = [
        ("call_1", "write_file", {"path": "a.txt", "content": "A"}),
        ("call_2", "read_file", {}),  # whole JSON, but read_file needs a path
    ]
    server.play(wire.answer("", calls, finish="length", dialect="llamacpp"), wire.answer("Done."))
    agent = agent_for(workspace, agents)
    seen: list = []
    agent.run("go", listeners=[seen.append])
    assert (workspace / "a.txt").read_text() == "A"
    assert [c.name for c in agent.session.conversation.messages()[1].tool_calls] == ["write_file"]
    assert any("dropped read_file: its arguments do not fit the tool" in n for n in notices(seen))
