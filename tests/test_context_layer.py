"""The context layer (issue 12): strategies over one shared state, events to the caller only,
and a gauge that shows what the compactor decides."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.context.host import ContextHost
from pseudoclaude_nb.context.settings import CompactSettings
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.events import Compacted, CompactStarted, ContextState, RunFinished
from pseudoclaude_nb.messages import Message, ToolCall, ToolResult, Usage
from pseudoclaude_nb.providers import ScriptedProvider
from pseudoclaude_nb.session import SessionWriter, load_session, new_session_dir
from pseudoclaude_nb.widgets import ContextGauge
from tests.scripts import script


def test_a_strategy_switch_keeps_calibration_anchor_and_the_pending_batch(workspace: Path):
    path = new_session_dir(workspace)
    with SessionWriter(path, fsync=False) as writer:
        conversation = Conversation()
        writer.attach(conversation)
        settings = CompactSettings(context_window=10**9, spill_batch_bytes=30_000)
        context = ContextHost(conversation, settings, session_dir=path, workspace=workspace, writer=writer)
        context.shared.configure(settings, system="s", tools=[])
        # Two anchors a pair apart: one calibration sample.
        for tokens in (1_000, 2_000):
            conversation.add_user("x" * 2_000)
            context.shared.on_usage(Usage(input_tokens=tokens), len(conversation))
        assert context.shared.calibration.samples == 1
        calls = [ToolCall(id=f"c{i}", name="bash", arguments={}) for i in range(3)]
        conversation.add_assistant_tool_calls("", calls)
        for call in calls:
            conversation.add_result(
                context.spiller.admit(call, ToolResult(call_id=call.id, content="r" * 20_000))
            )
        context.spiller.after_tools(len(calls))
        calibration, anchor, shared = context.shared.calibration, context.shared.anchor, context.shared

        rollover = context.use("rollover")
        assert rollover.name == "rollover" and context.strategy is rollover
        assert context.shared is shared and context.shared.calibration is calibration
        assert context.shared.calibration.samples == 1 and context.shared.anchor == anchor
        assert shared.pending_batch == ["c0", "c1", "c2"]
        # The batch is still checked at the next boundary, under the new strategy.
        events: list = []
        context.before_step(ScriptedProvider(script()), events.append)
        assert shared.pending_batch == []
        assert [context.shared.ledger.decision(f"c{i}") for i in range(3)].count("spilled") == 2
        assert context.use("compact").name == "compact" and context.shared.calibration is calibration


def demo_agent(workspace: Path) -> Agent:
    return Agent(PseudoClaude(workspace=str(workspace), provider="demo", permission_mode="auto", fsync=False))


def test_the_gauge_shows_the_estimate_the_compactor_decides_on(workspace: Path):
    """The quickstart: the gauge's values include the pre-compaction estimate, over the Layer 2 line."""
    agent = demo_agent(workspace)
    try:
        gauge, events = ContextGauge(), []
        seen: list[str] = []
        gauge.widget.observe(lambda change: seen.append(change["new"]), names="value")
        summary = agent.run("Add a stats module", listeners=[gauge, events.append])
        assert summary.status == "done"
        started = next(i for i, e in enumerate(events) if isinstance(e, CompactStarted))
        decided = [e for e in events[:started] if isinstance(e, ContextState)][-1]
        assert decided.estimated_tokens >= decided.threshold == 17_000
        assert decided.marks == (("Layer 2", 17_000),)
        shown = {int(m.group(1)) for v in seen if (m := re.search(r"data-estimated='(\d+)'", v))}
        assert decided.estimated_tokens in shown
        assert max(shown) >= 17_000
        # After the replace: one more state, at the compacted estimate.
        compacted = next(e for e in events if isinstance(e, Compacted))
        after = next(e for e in events[started:] if isinstance(e, ContextState))
        assert compacted.ok and after.estimated_tokens < 17_000 and after.compactions == 1
    finally:
        agent.close()


def test_a_later_compact_reaches_only_its_own_listener(workspace: Path):
    agent = demo_agent(workspace)
    try:
        gauge, run_events = ContextGauge(), []
        assert agent.run("Add a stats module", listeners=[gauge, run_events.append]).status == "done"
        assert isinstance(run_events[-1], RunFinished)
        frozen_value, frozen_state, count = gauge.widget.value, gauge.state, len(run_events)
        own: list = []
        result = agent.compact(listeners=[own.append])
        assert isinstance(result, Compacted)
        assert [type(e) for e in own] == [CompactStarted, Compacted]
        assert len(run_events) == count, "the finished run's listeners heard nothing"
        assert gauge.widget.value == frozen_value and gauge.state == frozen_state
        assert gauge.state.status == "done"
    finally:
        agent.close()


def test_a_finished_gauge_ignores_later_events():
    gauge = ContextGauge()
    state = ContextState(100, 50, 1_000, 800, False, 0, 0, marks=(("Layer 2", 800),))
    gauge(state)
    from pseudoclaude_nb.events import RunSummary

    gauge(RunFinished(RunSummary(status="done")))
    before = gauge.widget.value
    gauge(CompactStarted("manual", 100))
    gauge(ContextState(900, 50, 1_000, 800, False, 0, 1))
    assert gauge.widget.value == before and gauge.state.status == "done"


# --- durable marks: fields, not text -------------------------------------------------------------------


def test_the_marks_are_serialized_only_when_set():
    plain = Message(id="m", role="user", tool_result=ToolResult(call_id="c", content="x"), ts=1.0)
    assert list(plain.to_dict()) == ["id", "ts", "role", "content", "tool_calls", "tool_result"]
    assert list(plain.to_dict()["tool_result"]) == ["call_id", "content", "is_error"]
    marked = Message(role="user", content="n", host="rollover-remind")
    assert marked.to_dict()["host"] == "rollover-remind"
    spilled = ToolResult(call_id="c", content="p", spilled="tool-results/c.txt")
    assert spilled.to_dict()["spilled"] == "tool-results/c.txt"
    assert Message.model_validate({**marked.to_dict(), "type": "message", "v": 1}) == marked


def write_log(path: Path, lines: list[dict]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "conversation.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8")


def legacy_lines(preview_text: str, *, spilled: str | None = None) -> list[dict]:
    result = {"call_id": "c1", "content": preview_text, "is_error": False}
    if spilled:
        result["spilled"] = spilled
    return [
        {"v": 1, "type": "message", "id": "u", "ts": 1.0, "role": "user", "content": "go", "tool_calls": []},
        {
            "v": 1,
            "type": "message",
            "id": "a",
            "ts": 2.0,
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "name": "bash", "arguments": {}}],
        },
        {
            "v": 1,
            "type": "message",
            "id": "r",
            "ts": 3.0,
            "role": "user",
            "content": "",
            "tool_result": result,
        },
    ]


PREVIEW = (
    "[Tool result too large for the context: 60,000 bytes, saved in full to "
    ".pseudoclaude/sessions/s/tool-results/c1.txt]\nRead it in parts with read_file(...)\n\nhead\n"
)


def test_a_legacy_preview_is_recognised_on_resume(workspace: Path):
    path = new_session_dir(workspace)
    write_log(path, legacy_lines(PREVIEW))
    loaded = load_session(path)
    [result] = [m for m in loaded.messages if m.tool_result is not None]
    assert result.is_spill_preview and result.tool_result.spilled == "tool-results/c1.txt"
    context = ContextHost(Conversation(loaded.messages), session_dir=path, workspace=workspace)
    context.restore(loaded)
    assert context.shared.ledger.decision("c1") == "spilled"


def test_in_a_current_log_text_alone_is_not_a_preview(workspace: Path):
    """A log that carries the marks: a result that merely reads like a preview is a result."""
    path = new_session_dir(workspace)
    lines = legacy_lines(PREVIEW)
    lines += [
        {
            "v": 1,
            "type": "message",
            "id": "a2",
            "ts": 4.0,
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c2", "name": "bash", "arguments": {}}],
        },
        {
            "v": 1,
            "type": "message",
            "id": "r2",
            "ts": 5.0,
            "role": "user",
            "content": "",
            "tool_result": {
                "call_id": "c2",
                "content": "p",
                "is_error": False,
                "spilled": "tool-results/c2.txt",
            },
        },
    ]
    write_log(path, lines)
    loaded = load_session(path)
    by_call = {m.tool_result.call_id: m for m in loaded.messages if m.tool_result is not None}
    assert by_call["c2"].is_spill_preview
    assert not by_call["c1"].is_spill_preview
