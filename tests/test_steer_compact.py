"""Steering compaction (SPEC §19): ``%compact --preview``, ``--apply`` and ``--undo``.

Scripted sessions through ``Agent`` and the magics. The state an undo must restore is
checked against an oracle independent of the undo's own search: the full loader run on a
copy of the log cut right before the undone replace marker.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.context.undo import target_in
from pseudoclaude_nb.errors import SessionError
from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.messages import Message, pairing_problems
from pseudoclaude_nb.session import load_session
from pseudoclaude_nb.session.entries import encode, message_entry
from pseudoclaude_nb.workspace import session_dir
from tests.scripts import read_log, run_magic, scripted_agent, turn, write_script

SUMMARY = "## Confirmed requirements\n- SUMMARY-ONE <b>& co</b>"
LOG = "conversation.jsonl"


# --- helpers ------------------------------------------------------------------------------------


def next_script(workspace: Path, *turns: dict, **extra) -> str:
    """A new script file each call (script-0, script-1, …): a test here plays several."""
    return write_script(workspace, f"script-{len(list(workspace.parent.glob('script-*')))}", *turns, **extra)


def chatty(workspace: Path, agents: list, runs: int = 6, words: int = 300, **settings) -> Agent:
    """An agent whose session holds ``runs`` question/answer pairs, ready for a compaction."""
    path = next_script(workspace, turn("answer " + "words " * words), summaries=[SUMMARY])
    agent = scripted_agent(workspace, path, recent_tokens=settings.pop("recent_tokens", 500), **settings)
    agents.append(agent)
    ask(agent, runs)
    return agent


def ask(agent: Agent, runs: int, start: int = 0) -> None:
    for i in range(start, start + runs):
        summary = agent.run(f"question {i}")  # a fresh scripted provider each run
        assert summary.status == "done", summary.error


def dumped(messages: list[Message]) -> list[dict]:
    return [m.to_dict() for m in messages]


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def cut_before_last(session_dir: Path, reason: str, tmp: Path) -> list[Message]:
    """The oracle: what the full loader yields for the log cut right before the last ``reason`` replace."""
    data = (session_dir / LOG).read_bytes()
    offset, at = None, 0
    for line in data.splitlines(keepends=True):
        entry = json.loads(line)
        if entry["type"] == "replace" and entry["reason"] == reason:
            offset = at
        at += len(line)
    assert offset is not None, f"no {reason} replace in the log"
    folder = tmp / f"cut-{reason}-{offset}"
    folder.mkdir()
    (folder / LOG).write_bytes(data[:offset])
    return load_session(folder, full=True).messages


def summary_requests(agent: Agent) -> int:
    return sum(1 for r in agent.provider_for_context().requests if r.purpose == "summary")


# --- preview and apply --------------------------------------------------------------------------


def test_preview_writes_nothing_and_shows_the_cut_and_the_summary(workspace: Path, agents) -> None:
    agent = chatty(workspace, agents)
    session = agent.session
    session.writer.wait_meta()
    before_files = folder_bytes(session.dir)
    before = session.conversation.messages()

    plan = agent.compact_preview()

    session.writer.wait_meta()
    assert folder_bytes(session.dir) == before_files  # the log byte for byte, and every sidecar
    assert session.conversation.messages() == before
    assert summary_requests(agent) == 1
    assert plan.head + plan.tail == len(before) and plan.head > 0 and plan.tail > 0
    assert plan.head_tokens > plan.tail_tokens > 0
    assert plan.summary == SUMMARY and plan.after < plan.before
    assert session.context.shared.preview is plan


def test_apply_commits_the_previewed_summary_without_asking_again(workspace: Path, agents) -> None:
    agent = chatty(workspace, agents)
    plan = agent.compact_preview()
    provider = agent.provider_for_context()
    asked = len(provider.requests)

    result = agent.compact_apply()

    assert result.ok and result.trigger == "manual"
    assert (result.before_tokens, result.after_tokens) == (plan.before, plan.after)
    assert len(provider.requests) == asked and provider.summaries_used == 1  # no second request
    entries = read_log(agent.session.dir)
    assert [(e["reason"], e["count"]) for e in entries if e["type"] == "replace"] == [
        ("compact", 3 + plan.tail)
    ]
    [compact] = [e for e in entries if e["type"] == "compact"]
    assert (compact["trigger"], compact["ok"], compact["before_tokens"]) == ("manual", True, plan.before)
    loaded = load_session(agent.session.dir)
    assert dumped(loaded.messages) == dumped(agent.session.conversation.messages())
    assert loaded.messages[0].content.startswith("<summary>") and "SUMMARY-ONE" in loaded.messages[0].content
    assert dumped(loaded.messages[3:]) == dumped(plan.messages[plan.head :])  # the previewed tail
    shared = agent.session.context.shared
    assert shared.anchor == (shared.calibrated(plan.after), 3 + plan.tail)
    with pytest.raises(SessionError, match="run %compact --preview first"):
        agent.compact_apply()  # a preview is applied once


def test_apply_after_the_conversation_changed_is_refused(workspace: Path, agents) -> None:
    agent = chatty(workspace, agents)
    agent.compact_preview()
    ask(agent, 1, start=10)
    size = (agent.session.dir / LOG).stat().st_size
    with pytest.raises(SessionError, match="changed since the preview; run %compact --preview again"):
        agent.compact_apply()
    assert (agent.session.dir / LOG).stat().st_size == size
    assert not [e for e in read_log(agent.session.dir) if e["type"] in ("replace", "compact")]


def test_the_magics_show_preview_apply_and_undo(ip, workspace: Path) -> None:
    with pytest.raises(UsageError, match="no current session"):
        ip.run_line_magic("compact", "--preview")
    path = next_script(workspace, turn("answer " + "words " * 300), summaries=[SUMMARY])
    for i in range(6):
        run_magic(ip, f"agent --provider scripted --script {path} question {i}")
    ip.run_line_magic("config", "PseudoClaude.recent_tokens = 500")
    log = current_agent(ip).session.dir / LOG
    with pytest.raises(UsageError, match="no compaction preview to apply; run %compact --preview first"):
        ip.run_line_magic("compact", "--apply")
    with pytest.raises(UsageError, match="nothing to undo"):
        ip.run_line_magic("compact", "--undo")
    with pytest.raises(UsageError, match="not both"):
        ip.run_line_magic("compact", "--preview --apply")
    data = log.read_bytes()

    out = run_magic(ip, "compact --preview")

    assert log.read_bytes() == data
    assert "compaction preview (nothing was written)" in out
    assert "summarize" in out and "keep (recent tail)" in out and "SUMMARY-ONE <b>& co</b>" in out
    assert "messages, ~" in out and " → ~" in out and "%compact --apply" in out
    # issue 31: what the replace would cost the prompt cache (the conversation cached by the last run)
    assert "prompt cache        invalidates ~" in out and "(system prompt and tools stay cached)" in out
    assert "preview pending: summarizes " in run_magic(ip, "compact --status")
    out = run_magic(ip, "compact --apply")
    assert "preview pending" not in run_magic(ip, "compact --status")
    assert out.startswith("compacted: ~")
    out = run_magic(ip, "compact --undo")
    assert out.startswith("undid the compaction of ") and "(12 messages restored)" in out
    assert len(current_agent(ip).session.conversation) == 12


def test_the_preview_in_a_notebook_is_escaped_html(ip, workspace: Path, monkeypatch) -> None:
    from pseudoclaude_nb.magics import context as context_magics

    shown: list = []
    monkeypatch.setattr(context_magics, "in_notebook", lambda shell: True)
    monkeypatch.setattr(context_magics, "display", lambda data, raw=False: shown.append(data))
    path = next_script(workspace, turn("answer " + "words " * 300), summaries=[SUMMARY])
    for i in range(6):
        run_magic(ip, f"agent --provider scripted --script {path} question {i}")
    ip.run_line_magic("config", "PseudoClaude.recent_tokens = 500")
    run_magic(ip, "compact --preview")
    [bundle] = shown
    assert "SUMMARY-ONE &lt;b&gt;&amp; co&lt;/b&gt;" in bundle["text/html"]
    assert "<b>& co</b>" not in bundle["text/html"]
    assert "SUMMARY-ONE <b>& co</b>" in bundle["text/plain"]


# --- undo ---------------------------------------------------------------------------------------


def test_undo_restores_the_state_before_the_compaction_and_survives_a_resume(
    workspace: Path, agents, tmp_path: Path
) -> None:
    agent = chatty(workspace, agents)
    before = dumped(load_session(agent.session.dir).messages)
    assert agent.compact().ok
    compacted_estimate = agent.session.context.shared.estimate()
    [marker] = [e for e in read_log(agent.session.dir) if e["type"] == "replace"]

    done = agent.compact_undo()

    assert dumped(agent.session.conversation.messages()) == before
    assert dumped(cut_before_last(agent.session.dir, "compact", tmp_path)) == before  # the oracle agrees
    assert (done.reason, done.restored, done.dropped) == ("compact", len(before), 0)
    assert done.before_tokens == compacted_estimate and done.after_tokens > done.before_tokens
    # The anchor describes the restored messages: the estimate follows them.
    context = agent.session.context
    assert context.shared.anchor == (done.after_tokens, len(before))
    restored = agent.session.conversation.messages()
    assert (
        context.shared.estimate()
        == done.after_tokens
        == context.shared.calibrated(context.shared.estimate_of(restored))
    )
    entries = read_log(agent.session.dir)
    undo = [e for e in entries if e["type"] == "replace"][-1]
    assert (undo["reason"], undo["undoes"], undo["count"]) == ("undo", marker["replace_id"], len(before))
    assert entries[-1]["replace_id"] == undo["replace_id"]  # the snapshot is the log's last write

    sid = agent.session.id
    agent.close()
    assert dumped(load_session(session_dir(workspace, sid)).messages) == before
    again = scripted_agent(workspace, "")
    agents.append(again)
    again.resume(sid)
    assert dumped(again.session.conversation.messages()) == before
    assert pairing_problems(again.session.conversation.messages()) == []
    with pytest.raises(SessionError, match="nothing to undo"):
        again.compact_undo()  # the undo itself is never undone


def test_undo_twice_walks_back_two_compactions(workspace: Path, agents, tmp_path: Path) -> None:
    agent = chatty(workspace, agents)
    before_first = dumped(load_session(agent.session.dir).messages)
    assert agent.compact().ok
    ask(agent, 4, start=10)
    before_second = dumped(load_session(agent.session.dir).messages)
    assert agent.compact().ok
    ask(agent, 1, start=20)  # work after the last compaction is not part of the state before it

    first = agent.compact_undo()
    assert dumped(agent.session.conversation.messages()) == before_second
    assert first.dropped == 2
    second = agent.compact_undo()
    assert dumped(agent.session.conversation.messages()) == before_first
    assert dumped(cut_before_last(agent.session.dir, "compact", tmp_path)) == before_second
    assert second.restored == len(before_first)
    undoes = [e.get("undoes") for e in read_log(agent.session.dir) if e["type"] == "replace"]
    compacts = [e["replace_id"] for e in read_log(agent.session.dir) if e.get("reason") == "compact"]
    assert undoes == [None, None, compacts[1], compacts[0]]
    with pytest.raises(SessionError, match="nothing to undo"):
        agent.compact_undo()
    assert dumped(load_session(agent.session.dir).messages) == before_first


def test_undo_after_another_compaction_undoes_that_one_first(workspace: Path, agents) -> None:
    agent = chatty(workspace, agents)
    assert agent.compact().ok
    agent.compact_undo()
    ask(agent, 2, start=10)
    before = dumped(load_session(agent.session.dir).messages)
    assert agent.compact().ok
    agent.compact_undo()
    assert dumped(agent.session.conversation.messages()) == before
    with pytest.raises(SessionError, match="nothing to undo"):
        agent.compact_undo()


def test_undo_of_a_rollover_commit(workspace: Path, agents, tmp_path: Path) -> None:
    (workspace / "notes.txt").write_text("remind once\n")
    handoff = {
        "confirmed_requirements": [{"text": "remind once", "source": "user"}],
        "agent_inferences": [],
        "unresolved_conflicts": [],
        "unverified_acceptance_criteria": [],
    }
    path = next_script(
        workspace,
        turn("Reading.", ("read_file", {"path": "notes.txt"}, "r1")),
        turn("Handing off.", ("new_context", {"handoff": handoff, "related_files": []}, "nc")),
        turn("Done in the new window."),
        context_window=100_000,
    )
    agent = scripted_agent(workspace, path, strategy="rollover")
    agents.append(agent)
    assert agent.run("fix it").status == "done"
    expected = dumped(cut_before_last(agent.session.dir, "rollover", tmp_path))
    assert agent.session.conversation.messages()[0].content.startswith("Previous context")

    done = agent.compact_undo()

    assert done.reason == "rollover" and done.dropped == 1  # the answer in the new window
    assert dumped(agent.session.conversation.messages()) == expected
    assert [m.tool_result.call_id for m in agent.session.conversation.messages() if m.tool_result] == [
        "r1",
        "nc",
    ]
    assert dumped(load_session(agent.session.dir).messages) == expected
    assert agent.session.context.state().phase == "normal"


def test_a_crash_at_any_byte_of_the_undo_leaves_the_old_state_or_the_new(workspace: Path, agents) -> None:
    agent = chatty(workspace, agents, runs=3, words=80, recent_tokens=30)
    assert agent.compact().ok
    log = agent.session.dir / LOG
    old_data = log.read_bytes()
    old = dumped(load_session(agent.session.dir).messages)
    agent.compact_undo()
    new_data = log.read_bytes()
    new = dumped(load_session(agent.session.dir).messages)
    assert new_data.startswith(old_data) and old != new
    assert len(new_data) - len(old_data) > 2000
    folder = workspace.parent / "crash"
    folder.mkdir()
    compaction = target_in(log)
    assert compaction is None  # everything is undone
    last_line = new_data.rindex(b"\n", 0, len(new_data) - 1) + 1
    (folder / LOG).write_bytes(new_data)
    for cut in range(len(new_data), len(old_data) - 1, -1):
        os.truncate(folder / LOG, cut)
        loaded = dumped(load_session(folder).messages)
        assert loaded in (old, new), cut
        assert loaded == old if cut <= last_line else True, cut
        assert loaded == new if cut == len(new_data) else True, cut
        # A torn undo is no undo: the next one undoes the same compaction.
        found = target_in(folder / LOG)
        assert (found is not None and found[0].entry.reason == "compact") == (loaded == old), cut
        if cut % 13 == 0 or new_data[cut - 1 : cut] == b"\n":
            # The session goes on after the crash: what comes next never completes the torn replace.
            with (folder / LOG).open("ab") as f:
                f.write(b"\n" + encode(message_entry(Message(role="user", content="after the crash"))))
            loaded = dumped(load_session(folder).messages)
            found = target_in(folder / LOG)
            assert (found is not None and found[0].entry.reason == "compact") == (loaded[:-1] == old), cut
            os.truncate(folder / LOG, cut)
    shutil.rmtree(folder)
