"""Reasoning and stop reasons offline: the message model, the log, the scripted provider,
the runner's named stops and how the renderers show them."""

from __future__ import annotations

import io
import json
from pathlib import Path

from pseudoclaude_nb.context.estimate import estimate_tokens
from pseudoclaude_nb.events import (
    AssistantDelta,
    ReasoningDelta,
    RunFinished,
    RunSummary,
    StepFinished,
    StepStarted,
)
from pseudoclaude_nb.magics.render import NotebookRenderer, TerminalRenderer, end_line
from pseudoclaude_nb.messages import Message, Reasoning, ToolCall, Usage
from pseudoclaude_nb.session import load_session
from pseudoclaude_nb.session.entries import message_entry
from tests.scripts import read_log, script, scripted_agent, turn

OLD_KEYS = {"id", "role", "content", "tool_calls", "tool_result", "ts"}


def write_script(workspace: Path, data: dict) -> str:
    path = workspace / "script.json"
    path.write_text(json.dumps(data))
    return str(path)


# --- the message model and the log -----------------------------------------------------------


def test_messages_without_reasoning_serialize_exactly_as_before() -> None:
    msg = Message(role="assistant", content="hi", tool_calls=(ToolCall(id="c", name="n"),), id="m1", ts=1.5)
    assert set(msg.to_dict()) == OLD_KEYS
    entry = message_entry(msg)
    assert list(entry) == ["v", "type", "id", "ts", "role", "content", "tool_calls", "tool_result"]


def test_reasoning_and_stop_round_trip_and_old_entries_still_load(tmp_path: Path) -> None:
    msg = Message(
        role="assistant",
        content="cut here",
        reasoning=(
            Reasoning(kind="thinking", text="hmm", signature="sig"),
            Reasoning(kind="redacted_thinking", data="opaque"),
        ),
        stop_reason="max_tokens",
    )
    data = msg.to_dict()
    assert data["reasoning"] == [
        {"kind": "thinking", "text": "hmm", "signature": "sig"},
        {"kind": "redacted_thinking", "text": "", "data": "opaque"},
    ]
    assert Message.from_dict(data) == msg
    session = tmp_path / "s"
    session.mkdir()
    old = {"v": 1, "type": "message", "id": "u1", "ts": 1.0, "role": "user", "content": "hello"}
    old["tool_calls"], old["tool_result"] = [], None
    lines = [json.dumps(old), json.dumps(message_entry(msg))]
    (session / "conversation.jsonl").write_text("\n".join(lines) + "\n")
    loaded = load_session(session)
    assert loaded.messages[0].reasoning == () and loaded.messages[0].stop_reason is None
    assert loaded.messages[1] == msg


def test_reasoning_counts_in_the_estimate() -> None:
    plain = Message(role="assistant", content="answer")
    thought = plain.model_copy(update={"reasoning": (Reasoning(kind="reasoning_content", text="x" * 700),)})
    assert estimate_tokens([thought]) - estimate_tokens([plain]) == 200


# --- the scripted provider: reasoning and stops, offline ----------------------------------------


def test_scripted_reasoning_is_kept_logged_and_never_the_answer(workspace: Path, agents) -> None:
    path = write_script(
        workspace, script({"text": "Forty-two.", "reasoning": "Six times seven is forty-two."})
    )
    agent = scripted_agent(workspace, path)
    agents.append(agent)
    seen: list = []
    summary = agent.run("what is 6*7?", listeners=[seen.append])
    assert summary.status == "done" and summary.final_text == "Forty-two."
    said = "".join(e.text for e in seen if isinstance(e, AssistantDelta))
    thought = "".join(e.text for e in seen if isinstance(e, ReasoningDelta))
    assert said == "Forty-two." and thought == "Six times seven is forty-two."
    entry = read_log(agent.session.dir)[-2]
    assert entry["type"] == "message" and entry["reasoning"] == [
        {"kind": "reasoning", "text": "Six times seven is forty-two."}
    ]


def test_scripted_stop_reasons_end_the_run_named(workspace: Path, agents) -> None:
    path = write_script(workspace, script({"text": "The first half of", "stop_reason": "max_tokens"}))
    agent = scripted_agent(workspace, path)
    agents.append(agent)
    seen: list = []
    first = agent.run("explain", listeners=[seen.append])
    # Each run reads the script afresh: the second run plays the refusal.
    write_script(workspace, script({"text": "I can't help with that.", "stop_reason": "refusal"}))
    second = agent.run("do the bad thing", listeners=[seen.append])
    assert (first.status, second.status) == ("truncated", "refused")
    notices = [e.text for e in seen if type(e).__name__ == "Notice"]
    assert any("cut at the output cap" in n for n in notices) and any("refused" in n for n in notices)
    stops = [e.get("stop_reason") for e in read_log(agent.session.dir) if e["type"] == "message"]
    assert stops == [None, "max_tokens", None, "refusal"]


def test_scripted_cut_tool_call_is_retried_once_with_the_larger_cap(workspace: Path, agents) -> None:
    cut = turn("Writing.", ("write_file", {"path": "a.py", "content": "x = 1\n"}))
    cut["stop_reason"] = "max_tokens"
    path = write_script(
        workspace,
        script(
            cut,
            turn("", ("write_file", {"path": "a.py", "content": "x = 1\n"})),
            turn("Done."),
            max_output_tokens=32_000,
        ),
    )
    agent = scripted_agent(workspace, path)
    agents.append(agent)
    summary = agent.run("write a.py")
    assert summary.status == "done" and (workspace / "a.py").read_text() == "x = 1\n"
    provider = agent.last_provider
    assert [r.max_tokens for r in provider.requests] == [8192, 32_000, 8192]
    assert sum(len(m.tool_calls) for m in agent.session.conversation.messages()) == 1


def test_scripted_cut_tool_call_without_room_stops_with_advice(workspace: Path, agents) -> None:
    cut = turn("", ("write_file", {"path": "a.py", "content": "x = 1\n"}))
    cut["stop_reason"] = "max_tokens"
    agent = scripted_agent(workspace, write_script(workspace, script(cut)))
    agents.append(agent)
    summary = agent.run("write a.py")
    assert summary.status == "error" and "write the file in parts" in str(summary.error)
    assert not (workspace / "a.py").exists()
    assert [m.role for m in agent.session.conversation.messages()] == ["user"]


# --- what a person sees -------------------------------------------------------------------------------


def test_terminal_shows_thinking_as_one_line_and_names_the_stop() -> None:
    out = io.StringIO()
    render = TerminalRenderer(out=out)
    render(StepStarted(1))
    render(ReasoningDelta("secret chain "))
    render(ReasoningDelta("of thought"))
    render(AssistantDelta("The answer."))
    summary = RunSummary(status="truncated", steps=1)
    render(RunFinished(summary))
    text = out.getvalue()
    assert "thinking…" in text and "secret chain" not in text and "The answer." in text
    assert end_line(summary).startswith("■ answer cut at the output cap")
    assert end_line(RunSummary(status="refused")).startswith("■ the model refused")


def test_notebook_shows_thinking_collapsed_above_the_answer(ip) -> None:
    from IPython.utils.capture import capture_output

    with capture_output() as captured:
        render = NotebookRenderer()
        render(StepStarted(1))
        render(ReasoningDelta("Let me think <carefully>."))
        render(AssistantDelta("The answer."))
        render(StepFinished(1, Usage(), Message(role="assistant", content="The answer.")))
    html_parts = [o.data.get("text/html", "") for o in captured.outputs]
    markdown = [o.data.get("text/markdown", "") for o in captured.outputs]
    # While it streams, its size; when the answer starts, its text, collapsed.
    thinking = [h for h in html_parts if "thinking…" in h]
    assert (
        thinking
        and "<details" in thinking[-1]
        and "<details style='margin:2px 0;color:#777' open" not in thinking[-1]
    )
    assert "Let me think &lt;carefully&gt;." in thinking[-1]
    assert "The answer." in "".join(markdown) and "Let me think" not in "".join(markdown)


def test_reasoning_of_another_shape_is_left_out_not_the_message() -> None:
    data = {"id": "a", "role": "assistant", "content": "ok", "ts": 1.0, "stop_reason": "pause_turn"}
    data["reasoning"] = [{"kind": "thinking", "text": "t", "signature": "s"}, {"kind": "future-kind"}, "x"]
    msg = Message.model_validate(data)
    assert msg.reasoning == (Reasoning(kind="thinking", text="t", signature="s"),)
    assert msg.stop_reason is None and msg.content == "ok"
