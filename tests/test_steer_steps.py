"""Steps (SPEC §19): ``%context --at STEP``, ``%context --diff A B``, ``%sessions fork --at STEP``.

One scripted session through the real magics — a tool result kept in full, then cut by
``%compact --layer1`` (a spill), then summarized by ``%compact`` — and every request the
scripted provider received checked against the request read back from the log.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.session import load_session
from pseudoclaude_nb.session.entries import encode
from pseudoclaude_nb.session.steps import diff_steps, request_at, scan
from pseudoclaude_nb.session.timeline import build_timeline
from pseudoclaude_nb.widgets.step_view import diff_html, request_html
from tests.scripts import read_log, script, turn
from tests.scripts import run_magic as run

SUMMARY = "## Confirmed requirements\n- read the big file (the user)"
CRAFTED = "look \x1b[2J\x1b]52;c;ZXZpbA==\x07 <b>here</b>"


def dicts(messages) -> list[dict]:
    return [m.to_dict() for m in messages]


class Session:
    """Runs through ``%agent``, each with its own script, keeping every agent request sent."""

    def __init__(self, ip, workspace: Path) -> None:
        self.ip, self.workspace, self.sent, self.runs = ip, workspace, [], 0

    def agent(self, prompt: str, *turns: dict, extra: str = "", summary: bool = False) -> None:
        """``summary``: the script answers a summary request too (``%compact`` after this run
        asks this run's provider; a script must be played to its end, tests/conftest.py)."""
        self.runs += 1
        path = self.workspace.parent / f"run{self.runs}.json"
        path.write_text(json.dumps(script(*turns, summaries=[SUMMARY] if summary else [])), encoding="utf-8")
        self.ip.run_line_magic("config", "PseudoClaude.provider = 'scripted'")
        self.ip.run_line_magic("config", f"PseudoClaude.script = {str(path)!r}")
        run(self.ip, f"agent --provider scripted --script {path} --mode auto {extra}{prompt}")
        agent = current_agent(self.ip)
        assert agent.last_runner is not None
        self.sent += [r for r in agent.last_runner.provider.requests if r.purpose == "agent"]

    @property
    def dir(self) -> Path:
        return current_agent(self.ip).session.dir


@pytest.fixture
def story(ip, workspace: Path) -> Session:
    """Steps 1-2: a read of ~100 KB kept in full; 3: a question; then the result is spilled
    (a snapshot); 4: a question; then Layer 2 (a compact replace); 5: a question."""
    (workspace / "big.txt").write_text("".join(f"line {i:05d} " + "x" * 40 + "\n" for i in range(2000)))
    s = Session(ip, workspace)
    ip.run_line_magic("config", "PseudoClaude.spill_bytes = 500000")  # kept in full for now
    s.agent("read big.txt", turn("", ("read_file", {"path": "big.txt"}, "r1")), turn("read it"))
    s.agent("question two", turn("answer two " + "words " * 200))
    ip.run_line_magic("config", "PseudoClaude.spill_bytes = 50000")
    assert "spilled 1 tool result" in run(ip, "compact --layer1")
    s.agent("question three", turn("answer three"), summary=True)
    ip.run_line_magic("config", "PseudoClaude.recent_tokens = 50")
    assert "compacted: ~" in run(ip, "compact")
    s.agent("question four", turn("answer four"))
    return s


def test_the_request_at_each_step_is_what_the_provider_received(story: Session) -> None:
    index = scan(story.dir)
    assert len(index.steps) == len(story.sent) == 5
    for n, sent in enumerate(story.sent, start=1):
        req = request_at(story.dir, n, index=index)
        assert dicts(req.messages) == dicts(sent.messages), f"step {n}"
        assert req.step.number == n and req.steps == 5
    # The timeline's usage points are the same steps (its tokens-per-step curve).
    timeline = build_timeline(story.dir)
    assert [timeline.lines[i] for i, _ in timeline.usage] == [s.line for s in index.steps]


def test_at_a_step_after_the_compaction_shows_the_summary(story: Session) -> None:
    before = run(story.ip, "context --at 4")
    assert "step 4 of 5" in before and "read it" in before and "[compact]" not in before
    assert "snapshot ×1" in before and "1 spilled results" in before and "spill preview" in before
    out = run(story.ip, "context --at 5")
    assert "step 5 of 5" in out and "[compact]" in out and "Confirmed requirements" in out
    assert "compact ×1" in out and "1 compactions" in out
    assert "not in the log: the system prompt and tool schemas" in out and "NOW (today's" in out
    req = request_at(story.dir, 5)
    (summary,) = [row for row in req.rows if "Confirmed requirements" in row.message.content]
    assert summary.origin == "compact" and summary.part == "user text" and summary.tokens > 0
    assert run(story.ip, "context --at 5") == run(story.ip, "context --at 5")  # reads only


def test_diff_across_the_compaction_lists_what_it_removed_and_the_summary(story: Session) -> None:
    a, b = request_at(story.dir, 4), request_at(story.dir, 5)
    d = diff_steps(story.dir, 4, 5)
    b_ids = {m.id for m in b.messages}
    assert [r.message.id for r in d.removed] == [m.id for m in a.messages if m.id not in b_ids]
    assert d.removed and any(r.message.tool_calls for r in d.removed)  # the old read went
    assert [r.origin for r in d.added if r.origin] == ["compact"] * 3  # summary, acknowledgement, reminder
    assert any("Confirmed requirements" in r.message.content for r in d.added)
    assert [m.reason for m in d.replaces] == ["compact"] and [c.trigger for c in d.compactions] == ["manual"]
    out = run(story.ip, "context --diff 4 5")
    assert f"removed: {len(d.removed)} messages" in out and f"added: {len(d.added)} messages" in out
    assert "cut by a spill" not in out
    assert "replaces in between: 1 (compact)" in out and "compaction (manual)" in out


def test_diff_across_the_spill_shows_the_cut(story: Session) -> None:
    d = diff_steps(story.dir, 3, 4)
    (cut,) = d.cut
    before, after = cut
    assert before.message.id == after.message.id and before.part == "tool result"
    assert after.part == "spill preview" and after.tokens < before.tokens / 10
    assert not d.removed and not d.changed
    assert [r.message.id for r in d.added] == [m.id for m in request_at(story.dir, 4).messages[-2:]]
    out = run(story.ip, "context --diff 3 4")
    assert "cut by a spill: 1 result," in out and "replaces in between: 1 (snapshot)" in out


def test_fork_loads_to_the_step_carries_pins_and_leaves_the_source_alone(ip, workspace: Path) -> None:
    s = Session(ip, workspace)
    s.agent("first question", turn("first answer"))
    s.agent("second question", turn("", ("list_files", {}, "c1")), turn("second answer"))
    source = s.dir
    source_id = source.name
    # Pins as the pins' owner logs them: A and B pinned, B unpinned (after step 3), C after step 4,
    # D after step 5 (the last).
    log = source / "conversation.jsonl"
    pins = [
        {"v": 1, "type": "pin", "id": "pa", "ts": 1.0, "text": "keep A"},
        {"v": 1, "type": "pin", "id": "pb", "ts": 2.0, "text": "keep B"},
        {"v": 1, "type": "unpin", "id": "u1", "ts": 3.0, "pin": "pb"},
    ]
    late = {"v": 1, "type": "pin", "id": "pc", "ts": 4.0, "text": "keep C"}
    for added, prompt in ((pins, "third question"), ([late], "fourth question")):
        run(ip, "sessions new")
        with log.open("ab") as f:
            f.write(b"".join(encode(p) for p in added))
        run(ip, f"sessions resume {source_id}")
        s.agent(prompt, turn(prompt.replace("question", "answer")))
    run(ip, "sessions new")
    with log.open("ab") as f:  # D: pinned after the last step
        f.write(encode({"v": 1, "type": "pin", "id": "pd", "ts": 5.0, "text": "keep D"}))
    original = log.read_bytes()

    out = run(ip, f"sessions fork {source_id} --at 4 --strategy rollover")
    agent = current_agent(ip)
    fork = agent.session.dir
    assert out.startswith(
        f"forked session {source_id} at step 4 of 5\n→ new session {fork.name} (strategy rollover)\n"
    )
    # Short lines, each session id whole on its own: a narrow output never splits one.
    assert max(len(line) for line in out.splitlines()[:5]) <= 72
    assert out.splitlines()[4] == f"  %sessions resume {source_id}"
    assert fork != source and log.read_bytes() == original
    wanted = request_at(source, 4)
    assert dicts(load_session(fork).messages) == dicts(wanted.messages) == dicts(s.sent[3].messages)
    entries = read_log(fork)
    assert entries[0]["type"] == "replace" and entries[0]["reason"] == "fork"
    assert (entries[0]["source_session"], entries[0]["source_step"]) == (source_id, 4)
    assert [e for e in entries if e["type"] in ("pin", "unpin")] == pins[:1]  # B unpinned, C later

    # A run continues in the fork, under rollover; the source stays as it was.
    s.agent("fifth question", turn("fifth answer"))
    assert agent.session.dir == fork and agent.session.context.strategy.name == "rollover"
    assert dicts(s.sent[-1].messages[: len(wanted.messages)]) == dicts(wanted.messages)
    assert s.sent[-1].messages[-1].content.endswith("fifth question")
    assert load_session(fork).messages[-1].content == "fifth answer"
    at1 = run(ip, "context --at 1")
    assert (
        "fork ×1" in at1
        and f"forked from session {source_id} at step 4" in at1
        and "pins in force: 1" in at1
        and "[1] keep A" in at1
    )
    assert log.read_bytes() == original

    # --at defaults to the last step, whose pins are those in force now.
    run(ip, "sessions new")
    out = run(ip, f"sessions fork {source_id}")
    assert "at step 5 of 5" in out and "(strategy rollover)" in out and "3 pins" in out
    last = current_agent(ip).session.dir
    assert dicts(load_session(last).messages) == dicts(request_at(source, 5).messages)
    assert [e["id"] for e in read_log(last) if e["type"] == "pin"] == ["pa", "pc", "pd"]
    assert log.read_bytes() == original


def test_a_fork_after_a_spill_has_its_own_copy_of_the_spilled_result(story: Session) -> None:
    source = story.dir
    before = (source / "conversation.jsonl").read_bytes()
    out = run(story.ip, "sessions fork --at 4")
    fork = current_agent(story.ip).session.dir
    assert "at step 4 of 5" in out and "(strategy compact)" in out and fork != source
    loaded = load_session(fork)
    assert dicts(loaded.messages) == dicts(story.sent[3].messages) and not loaded.problems()
    (preview,) = [m for m in loaded.messages if m.is_spill_preview]
    spilled = preview.tool_result.spilled
    assert (fork / spilled).read_bytes() == (source / spilled).read_bytes()
    assert (source / "conversation.jsonl").read_bytes() == before


def test_steps_out_of_range_and_without_a_session_are_usage_errors(story: Session) -> None:
    ip = story.ip
    for line in ("context --at 0", "context --at 6", "context --diff 1 9", "sessions fork --at 7"):
        with pytest.raises(UsageError, match="steps 1–5"):
            ip.run_line_magic(*line.split(" ", 1))
    with pytest.raises(UsageError, match="not both"):
        ip.run_line_magic("context", "--at 1 --diff 1 2")
    with pytest.raises(UsageError, match="--at goes with %sessions fork"):
        ip.run_line_magic("sessions", "show --at 2")
    run(ip, "sessions new")
    with pytest.raises(UsageError, match="no current session"):
        ip.run_line_magic("context", "--at 1")
    with pytest.raises(UsageError, match="no current session"):
        ip.run_line_magic("sessions", "fork --at 1")


def test_printed_steps_carry_no_terminal_escapes(ip, workspace: Path) -> None:
    s = Session(ip, workspace)
    s.agent(CRAFTED, turn("ok \x1b[31mred"))
    s.agent("again", turn("fine"))
    source = s.dir
    outs = [run(ip, "context --at 2"), run(ip, "context --diff 1 2")]
    outs.append(run(ip, f"sessions fork {source.name} --at 2"))
    for out in outs:
        assert "\x1b" not in out and "\x07" not in out
    assert "\\x1b[2J" in outs[0]
    page = request_html(request_at(source, 1))
    assert "\x1b" not in page and "&lt;b&gt;here&lt;/b&gt;" in page and "<b>here" not in page
    page = diff_html(diff_steps(source, 1, 2))  # the crafted answer is added at step 2
    assert "\x1b" not in page and "ok \\x1b[31mred" in page


def test_a_long_request_shows_its_ends_and_counts_all(story: Session, monkeypatch) -> None:
    from pseudoclaude_nb.widgets import step_view

    monkeypatch.setattr(step_view, "EDGE", 2)
    out = run(story.ip, "context --at 4")
    assert "… 3 more messages (counted in the totals)" in out and "  7 messages" in out
    assert "read big.txt" in out and "question three" in out and "question two" not in out
    # Only the rows shown are made (issue 47): the middle of a long request is counted, not built.
    req = request_at(story.dir, 4)
    step_view.render_request(req)
    step_view.request_html(req)
    assert len(req.rows) == 7 and sorted(req.rows._made) == [0, 1, 5, 6]


def test_the_now_figures_do_not_read_the_conversation(story: Session, monkeypatch) -> None:
    """``%context --at``'s NOW figures are today's system prompt, memory and tool schemas: the
    same as ``%context``'s, counted without going through the session's messages (issue 47)."""
    from pseudoclaude_nb.context import manifest
    from pseudoclaude_nb.magics.context_steps import now_tokens

    agent = current_agent(story.ip)
    parts = agent.next_manifest().parts
    expected = {
        "system": parts["system"],
        "memory": parts["memory"],
        "tool_schemas": parts["tool_schemas"] + parts["mcp_tool_schemas"],
    }

    def refuse(messages):
        raise AssertionError("the NOW figures went through the conversation")

    monkeypatch.setattr(manifest, "message_parts", refuse)
    assert now_tokens(agent) == expected
