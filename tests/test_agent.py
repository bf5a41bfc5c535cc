"""The agent of one kernel (pseudoclaude_nb/agent.py): session lifecycle and run assembly.

SPEC §11 (resume restores the conversation, never the runtime configuration; model change
said once; stale sessions), §12 (permission modes), §13 (.env), §16 (two kernels on one
session). Runs use the real scripted provider from script files, or the built-in demo.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.errors import SessionLockedError, SessionNotFoundError
from pseudoclaude_nb.messages import ToolCall, pairing_problems
from pseudoclaude_nb.providers.demo_script import DEMO_MODEL, DEMO_PROMPT, RUN_TESTS
from pseudoclaude_nb.runner import Notice
from pseudoclaude_nb.session import SessionWriter, list_sessions, load_session, new_session_dir
from pseudoclaude_nb.tools.registry import NO_STDIN_REFUSAL
from tests.scripts import read_log as entries
from tests.scripts import scripted_agent as make_agent
from tests.scripts import turn, write_script


def user_texts(messages) -> list[str]:
    return [m.content for m in messages if m.role == "user" and m.tool_result is None]


# --- continuing and starting sessions ---------------------------------------------------------------


def test_runs_continue_the_same_session(workspace: Path, agents):
    path = write_script(workspace, "s", turn("answer"))
    agent = make_agent(workspace, path)
    agents.append(agent)
    first = agent.run("first question")
    second = agent.run("second question")
    assert first.status == second.status == "done"
    assert first.session_id == second.session_id == agent.session.id
    assert user_texts(agent.session.conversation.messages()) == ["first question", "second question"]
    # The second request carried the first exchange: context carries across cells.
    sent = agent.last_runner.provider.requests[0].messages
    assert [m.content for m in sent] == ["first question", "answer", "second question"]
    loaded = load_session(agent.session.dir)
    assert [m.content for m in loaded.messages] == ["first question", "answer", "second question", "answer"]
    assert len(list_sessions(workspace)) == 1


def test_a_run_leaves_the_sidecar_current_while_the_session_stays_open(workspace: Path, agents, monkeypatch):
    """The listing right after a run reads meta.json as it is: the run's end brought it up to date."""
    from pseudoclaude_nb.session import sidecar

    path = write_script(workspace, "s", turn("answer"))
    agent = make_agent(workspace, path)
    agents.append(agent)
    agent.run("first question")
    log = agent.session.dir / "conversation.jsonl"
    meta = json.loads((agent.session.dir / "meta.json").read_text())
    assert meta["bytes"] == log.stat().st_size and meta["offset"] == log.stat().st_size
    catch_ups = []
    monkeypatch.setattr(sidecar, "catch_up", lambda *a: catch_ups.append(a) or [])
    (listed,) = list_sessions(workspace)
    assert listed.effective_messages == 2 and catch_ups == []


def test_new_starts_another_session(workspace: Path, agents):
    path = write_script(workspace, "s", turn("answer"))
    agent = make_agent(workspace, path)
    agents.append(agent)
    first = agent.run("in the first session")
    first_dir = agent.session.dir
    second = agent.run("in the second session", new=True)
    assert second.session_id != first.session_id
    assert user_texts(agent.session.conversation.messages()) == ["in the second session"]
    assert agent.last_runner.provider.requests[0].messages[0].content == "in the second session"
    assert len(agent.last_runner.provider.requests[0].messages) == 1
    # The first session is intact on disk and no longer locked.
    assert user_texts(load_session(first_dir).messages) == ["in the first session"]
    statuses = {s.id: s.status for s in list_sessions(workspace)}
    assert statuses[first.session_id] == "ok"
    assert statuses[second.session_id] == "open"


def test_resume_none_picks_the_session_with_the_latest_activity(workspace: Path, agents):
    path = write_script(workspace, "s", turn("answer"))
    agent = make_agent(workspace, path)
    agents.append(agent)
    older = agent.run("A1").session_id
    newer = agent.run("B1", new=True).session_id
    assert list_sessions(workspace)[0].id == newer
    agent.run("A2", session_id=older)  # now the older session has the latest activity
    assert agent.session.id == older
    agent.close()

    other = make_agent(workspace, path)
    agents.append(other)
    loaded = other.resume()
    assert other.session.id == older
    assert user_texts(loaded.messages) == ["A1", "A2"]
    assert user_texts(other.session.conversation.messages()) == ["A1", "A2"]


def test_resume_none_without_sessions_is_a_clear_error(workspace: Path, agents):
    agent = make_agent(workspace)
    agents.append(agent)
    with pytest.raises(SessionNotFoundError, match="no sessions"):
        agent.resume()


def test_resume_of_an_unknown_id_is_a_clear_error(workspace: Path, agents):
    agent = make_agent(workspace)
    agents.append(agent)
    with pytest.raises(SessionNotFoundError, match="20990101-000000-dead"):
        agent.resume("20990101-000000-dead")


def test_resume_of_a_session_with_a_dangling_tool_call_resyncs_the_log(workspace: Path, agents):
    # A kernel died while a tool ran: the log ends with a call that has no result.
    session = new_session_dir(workspace)
    with SessionWriter(session, model="model-A", fsync=False) as writer:
        conversation = Conversation()
        writer.attach(conversation)
        conversation.add_user("please build")
        conversation.add_assistant("done with part one")
        conversation.add_user("and part two")
        conversation.add_assistant_tool_calls(
            "running", [ToolCall(id="lost", name="bash", arguments={"command": "make"})]
        )

    path = write_script(workspace, "s", turn("picking up again"), model="model-A")
    agent = make_agent(workspace, path)
    agents.append(agent)
    loaded = agent.resume(session.name)
    assert loaded.truncated_tool_calls
    assert [m.content for m in loaded.messages] == ["please build", "done with part one", "and part two"]
    replaces = [e for e in entries(session) if e["type"] == "replace"]
    assert [(r["reason"], r["count"]) for r in replaces] == [("resync", 3)]

    summary = agent.run("what now?")
    assert summary.status == "done"
    after = load_session(session)
    assert pairing_problems(after.messages) == []
    assert after.truncated_tool_calls is False
    assert after.orphan_results == 0
    assert after.torn_replace is False
    assert [m.content for m in after.messages] == [
        "please build",
        "done with part one",
        "and part two",
        "what now?",
        "picking up again",
    ]
    assert after.messages == agent.session.conversation.messages()


def test_a_second_agent_cannot_take_a_session_held_by_the_first(workspace: Path, agents):
    path = write_script(workspace, "s", turn("answer"))
    first = make_agent(workspace, path)
    agents.append(first)
    held = first.run("mine").session_id

    second = make_agent(workspace, path)
    agents.append(second)
    with pytest.raises(SessionLockedError) as info:
        second.resume(held)
    assert held in str(info.value)
    assert f"pid {os.getpid()}" in str(info.value)
    assert second.session is None
    with pytest.raises(SessionLockedError):
        second.run("let me in", session_id=held)
    # The failed attempts changed nothing: the holder keeps writing.
    assert first.run("still mine").status == "done"
    assert user_texts(load_session(first.session.dir).messages) == ["mine", "still mine"]
    # Once released, the second agent can resume it.
    first.close()
    second.resume(held)
    assert second.session.id == held


def test_resuming_the_current_session_reloads_it(workspace: Path, agents):
    path = write_script(workspace, "s", turn("answer"))
    agent = make_agent(workspace, path)
    agents.append(agent)
    sid = agent.run("one").session_id
    loaded = agent.resume(sid)
    assert agent.session.id == sid
    assert [m.content for m in loaded.messages] == ["one", "answer"]
    assert agent.run("two").status == "done"


# --- resume does not restore runtime config ------------------------------------------------------------


def test_resume_uses_the_new_runs_provider_and_model_and_says_so_once(workspace: Path, agents):
    path_a = write_script(workspace, "a", turn("from A"), model="model-A")
    path_b = write_script(workspace, "b", turn("from B"), model="model-B")
    first = make_agent(workspace, path_a)
    agents.append(first)
    sid = first.run("hello").session_id
    first.close()

    second = make_agent(workspace, path_b)
    agents.append(second)
    second.resume(sid)
    events: list = []
    summary = second.run("again", listeners=[events.append])
    assert summary.status == "done"
    assert summary.final_text == "from B"
    assert second.last_runner.provider.model == "model-B"

    notices = [e.text for e in events if isinstance(e, Notice)]
    assert len(notices) == 1
    assert "previously used model model-A" in notices[0]
    assert "model-B" in notices[0]
    notes = [e for e in entries(second.session.dir) if e["type"] == "note"]
    assert [n["text"] for n in notes] == notices

    usage = [e for e in entries(second.session.dir) if e["type"] == "usage"]
    assert [u["model"] for u in usage] == ["model-A", "model-B"]
    loaded = load_session(second.session.dir)
    assert (loaded.first_model, loaded.last_model) == ("model-A", "model-B")

    # Said once: the next run of the same session does not repeat it.
    events.clear()
    second.run("third", listeners=[events.append])
    assert not [e for e in events if isinstance(e, Notice)]
    assert len([e for e in entries(second.session.dir) if e["type"] == "note"]) == 1


def test_resume_with_the_same_model_says_nothing(workspace: Path, agents):
    path = write_script(workspace, "a", turn("x"), model="model-A")
    first = make_agent(workspace, path)
    agents.append(first)
    sid = first.run("hello").session_id
    first.close()
    second = make_agent(workspace, path)
    agents.append(second)
    second.resume(sid)
    events: list = []
    second.run("again", listeners=[events.append])
    assert not [e for e in events if isinstance(e, Notice)]
    assert not [e for e in entries(second.session.dir) if e["type"] == "note"]
    assert not second.session.conversation.messages()[2].content.startswith("[host note]")


def test_resume_uses_the_new_runs_permission_mode(workspace: Path, agents):
    path = write_script(
        workspace, "w", turn("", ("write_file", {"path": "f.txt", "content": "x"}, "w")), turn("ok")
    )
    first = make_agent(workspace, path, permission_mode="auto")
    agents.append(first)
    sid = first.run("write").session_id
    assert (workspace / "f.txt").read_text() == "x"
    (workspace / "f.txt").unlink()
    first.close()

    second = make_agent(workspace, path, permission_mode="read-only")
    agents.append(second)
    second.resume(sid)
    second.run("write again")
    last_result = [m for m in second.session.conversation.messages() if m.tool_result][-1].tool_result
    assert last_result.is_error and "read-only" in last_result.content
    assert not (workspace / "f.txt").exists()


# --- stale sessions --------------------------------------------------------------------------------------


def _age_log(session_dir: Path, seconds: float) -> None:
    """Move every timestamp of the log back by ``seconds`` (as if the session were idle)."""
    log = session_dir / "conversation.jsonl"
    lines = []
    for entry in entries(session_dir):
        entry["ts"] -= seconds
        lines.append(json.dumps(entry))
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_stale_session_gets_a_recheck_note_on_the_next_user_message(workspace: Path, agents):
    path = write_script(workspace, "s", turn("noted"))
    first = make_agent(workspace, path)
    agents.append(first)
    sid = first.run("look at config.yaml").session_id
    first.close()
    _age_log(workspace / ".pseudoclaude" / "sessions" / sid, 7 * 3600)

    second = make_agent(workspace, path)
    agents.append(second)
    second.resume(sid)
    events: list = []
    assert second.run("is it still there?", listeners=[events.append]).status == "done"
    new_user = second.session.conversation.messages()[2]
    assert new_user.role == "user"
    assert new_user.content.startswith("[host note]")
    assert "re-check" in new_user.content
    assert "7 hours" in new_user.content
    assert new_user.content.endswith("is it still there?")
    # The model saw it in the request.
    assert second.last_runner.provider.requests[0].messages[-1].content == new_user.content
    notices = [e for e in events if isinstance(e, Notice)]
    assert len(notices) == 1 and "idle for 7 hours" in notices[0].text
    assert [n["text"] for n in entries(second.session.dir) if n["type"] == "note"] == [notices[0].text]

    # Only once: the following run is not prefixed.
    second.run("and now?")
    assert second.session.conversation.messages()[4].content == "and now?"


def test_a_recent_session_gets_no_recheck_note(workspace: Path, agents):
    path = write_script(workspace, "s", turn("noted"))
    first = make_agent(workspace, path)
    agents.append(first)
    sid = first.run("hello").session_id
    first.close()
    _age_log(workspace / ".pseudoclaude" / "sessions" / sid, 5 * 3600)  # under stale_hours (6)
    second = make_agent(workspace, path)
    agents.append(second)
    second.resume(sid)
    second.run("again")
    assert second.session.conversation.messages()[2].content == "again"


def test_stale_hours_setting_is_honoured(workspace: Path, agents):
    path = write_script(workspace, "s", turn("noted"))
    first = make_agent(workspace, path)
    agents.append(first)
    sid = first.run("hello").session_id
    first.close()
    _age_log(workspace / ".pseudoclaude" / "sessions" / sid, 2 * 3600)
    second = make_agent(workspace, path, stale_hours=1)
    agents.append(second)
    second.resume(sid)
    second.run("again")
    assert second.session.conversation.messages()[2].content.startswith("[host note]")


# --- permission mode "ask" without stdin -------------------------------------------------------------------


def test_ask_mode_without_stdin_refuses_side_effects_clearly(workspace: Path, agents):
    (workspace / "readme.txt").write_text("read me\n", encoding="utf-8")
    path = write_script(
        workspace,
        "ask",
        turn(
            "",
            ("read_file", {"path": "readme.txt"}, "r"),
            ("write_file", {"path": "new.txt", "content": "x"}, "w"),
            ("bash", {"command": "touch made_by_bash.txt"}, "b"),
        ),
        turn("I could not write."),
    )
    asked: list[str] = []

    def no_stdin(prompt: str) -> str:
        asked.append(prompt)
        raise EOFError

    agent = Agent(
        PseudoClaude(
            workspace=str(workspace), provider="scripted", script=path, permission_mode="ask", fsync=False
        ),
        ask=no_stdin,
    )
    agents.append(agent)
    summary = agent.run("try to write")
    assert summary.status == "done"
    res = {
        m.tool_result.call_id: m.tool_result for m in agent.session.conversation.messages() if m.tool_result
    }
    assert not res["r"].is_error and "read me" in res["r"].content  # reading needs no permission
    for cid in ("w", "b"):
        assert res[cid].is_error
        assert res[cid].content == NO_STDIN_REFUSAL
        assert "no stdin" in res[cid].content and "--mode auto" in res[cid].content
    assert len(asked) == 2  # asked for the two side-effecting calls only
    assert not (workspace / "new.txt").exists()
    assert not (workspace / "made_by_bash.txt").exists()


# --- .env ----------------------------------------------------------------------------------------------


def test_dotenv_sets_only_provider_variables_without_overriding_the_environment(
    workspace: Path, agents, monkeypatch: pytest.MonkeyPatch
):
    # Register the names with monkeypatch so whatever the run sets is undone afterwards.
    for name in ("PC_TEST_FROM_DOTENV", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(name, "placeholder")
        monkeypatch.delenv(name)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    (workspace / ".env").write_text(
        "PC_TEST_FROM_DOTENV=from-the-file\nANTHROPIC_API_KEY=sk-ant-from-the-file-1\n"
        "OPENAI_API_KEY=sk-from-the-file-2\n",
        encoding="utf-8",
    )
    path = write_script(workspace, "s", turn("ok"))
    agent = make_agent(workspace, path)
    agents.append(agent)
    events: list = []
    assert agent.run("hi", listeners=[events.append]).status == "done"
    # Workspace trust (SPEC §19, §20): a .env gives provider variables only, never the user's
    # own, and only to the package's providers: nothing of it enters os.environ.
    from pseudoclaude_nb import envtrust

    assert "PC_TEST_FROM_DOTENV" not in os.environ and "ANTHROPIC_API_KEY" not in os.environ
    assert envtrust.lookup("ANTHROPIC_API_KEY") == "sk-ant-from-the-file-1"
    assert envtrust.lookup("OPENAI_API_KEY") == os.environ["OPENAI_API_KEY"] == "sk-from-the-environment"
    envtrust.forget()
    log_text = (agent.session.dir / "conversation.jsonl").read_text(encoding="utf-8")
    assert "from-the-file" not in log_text
    notices = " ".join(e.text for e in events if type(e).__name__ == "Notice")
    assert "PC_TEST_FROM_DOTENV" in notices and "from-the-file" not in notices  # names, never values


# --- the demo, end to end -------------------------------------------------------------------------------


def test_demo_end_to_end(workspace: Path, agents):
    agent = Agent(
        PseudoClaude(workspace=str(workspace), provider="demo", permission_mode="auto", fsync=False)
    )
    agents.append(agent)
    started = time.monotonic()
    summary = agent.run(DEMO_PROMPT)
    assert summary.status == "done", summary.error
    assert summary.error is None
    assert time.monotonic() - started < 60
    assert (workspace / "stats.py").is_file()
    assert (workspace / "test_stats.py").is_file()
    assert "return sum(xs) / len(xs)" in (workspace / "stats.py").read_text(encoding="utf-8")

    # The effective conversation is protocol-valid, even after Layer 2 replaced its start.
    messages = agent.session.conversation.messages()
    assert pairing_problems(messages) == []

    # The physical log keeps everything: both test runs, the failing one and the fixed one.
    log = agent.session.dir / "conversation.jsonl"
    logged = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    calls = {c["id"]: c for e in logged if e["type"] == "message" for c in e["tool_calls"]}
    results = {
        e["tool_result"]["call_id"]: e["tool_result"]["content"]
        for e in logged
        if e["type"] == "message" and e["tool_result"] and not e.get("replace_id")
    }
    test_runs = [
        cid for cid, c in calls.items() if c["name"] == "bash" and c["arguments"].get("command") == RUN_TESTS
    ]
    assert len(test_runs) == 2  # the failing run, then the run after the fix
    first_run, last_run = (results[cid] for cid in test_runs)
    assert "FAILED" in first_run
    assert "Ran 4 tests" in last_run and last_run.rstrip().endswith("OK")

    loaded = load_session(agent.session.dir)
    assert loaded.first_model == DEMO_MODEL
    assert loaded.bad_lines == [] and not loaded.truncated_tool_calls
    # Layer 1: the 110 KB read of the sample log went to a file; the log holds no raw body.
    (spill,) = loaded.spills
    assert spill.bytes > 50_000
    assert (agent.session.dir / spill.path).stat().st_size == spill.bytes
    assert max(len(line) for line in log.read_bytes().splitlines()) < 64 * 1024
    # Layer 2: the two log pages carried the estimate over the line; one summary replaced the start.
    assert [c.ok for c in loaded.compacts] == [True]
    assert loaded.replaces == 1 and loaded.messages[0].content.startswith("<summary>")
