"""The full-history index (SPEC §6.5): what it finds, when, and how it survives losing its file.

Sessions are written through the real ``Agent`` with the scripted provider, so the index is
fed exactly as in a notebook: by the conversation hook right after the session writer.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.errors import ConfigError, SessionError
from pseudoclaude_nb.events import Notice
from pseudoclaude_nb.history import INDEX_NAME, HistoryIndex
from pseudoclaude_nb.magics.history import reindex_action, search_action
from tests.scripts import script, turn

CODE = "def evaluate_budget(state: BudgetState) -> BudgetAction:"
CJK = "上下文换窗：工作记忆与持久层的解耦"


def make_agent(workspace: Path, agents: list, *turns: dict, **settings) -> Agent:
    path = workspace.parent / f"script-{len(agents)}.json"
    path.write_text(json.dumps(script(*turns)), encoding="utf-8")
    config = dict(
        workspace=str(workspace), provider="scripted", script=str(path), permission_mode="auto", fsync=False
    )
    config.update(settings)
    agent = Agent(PseudoClaude(**config))
    agents.append(agent)
    return agent


def index_file(workspace: Path) -> Path:
    return workspace / ".pseudoclaude" / INDEX_NAME


def log(agent: Agent) -> list[dict]:
    text = (agent.session.dir / "conversation.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def message_id(agent: Agent, predicate) -> str:
    (entry,) = [e for e in log(agent) if e["type"] == "message" and not e.get("replace_id") and predicate(e)]
    return entry["id"]


def tool_result(agent: Agent, call_id: str) -> dict:
    (entry,) = [
        e
        for e in log(agent)
        if e["type"] == "message" and (e.get("tool_result") or {}).get("call_id") == call_id
    ]
    return entry["tool_result"]


# --- what it finds -------------------------------------------------------------------------------


def test_cjk_and_code_substrings_in_text_tool_inputs_and_outputs(workspace: Path, agents):
    (workspace / "budget.py").write_text(f"{CODE}\n    return 'continue'\n", encoding="utf-8")
    agent = make_agent(
        workspace,
        agents,
        turn(
            f"先读文件。{CJK}",
            ("read_file", {"path": "budget.py"}, "r"),
            ("grep", {"pattern": "Budget[A-Z]ction"}, "g"),
        ),
        turn("done"),
    )
    agent.run("请修复 evaluate_budget")
    index, sid = agent.history, agent.session.id

    (hit,) = index.search("工作记忆", session_id=sid)
    assert (hit.kind, hit.role) == ("text", "assistant") and "工作记忆" in hit.snippet
    assert hit.message_uuid == message_id(agent, lambda e: e["content"].startswith("先读文件"))
    # Two CJK characters are below the trigram length: still found.
    assert {h.kind for h in index.search("换窗", session_id=sid)} == {"text"}
    assert {h.role for h in index.search("修复", session_id=sid)} == {"user"}

    # Code with punctuation, case-insensitively, in the tool output (read_file numbers lines).
    kinds = {
        (h.kind, h.call_id) for h in index.search("EVALUATE_BUDGET(state: budgetstate) ->", session_id=sid)
    }
    assert ("tool_result", "r") in kinds
    # A tool input: the grep pattern, regex characters and all.
    (pattern,) = index.search("Budget[A-Z]ction", session_id=sid)
    assert (pattern.kind, pattern.call_id, pattern.role) == ("tool_call", "g", "assistant")
    # Words anywhere in one row, when the phrase itself is not there.
    assert index.search("continue evaluate_budget", session_id=sid)[0].kind == "tool_result"
    assert index.search("no such words anywhere", session_id=sid) == []


def test_text_inside_a_spilled_file_is_found_with_its_line(workspace: Path, agents):
    lines = [f"log line {i:05d} " + "x" * 30 for i in range(1, 3001)]
    lines[1499] = "log line 01500 FATAL: connection reset by peer (errno 104)"
    (workspace / "big.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    agent = make_agent(
        workspace,
        agents,
        turn("", ("read_file", {"path": "big.log"}, "big")),
        turn("done"),
        spill_bytes=2_000,
    )
    agent.run("what failed?")
    (spill,) = [e for e in log(agent) if e["type"] == "spill"]
    result = tool_result(agent, "big")
    assert result["content"].startswith("[Tool result too large")
    assert "FATAL" not in result["content"]  # only the preview is in the conversation and the log

    (hit,) = agent.history.search("connection reset by peer", session_id=agent.session.id)
    assert hit.kind == "spill" and hit.call_id == "big"
    assert hit.ref == f".pseudoclaude/sessions/{agent.session.id}/{spill['path']}"
    assert hit.message_uuid == message_id(
        agent, lambda e: (e.get("tool_result") or {}).get("call_id") == "big"
    )
    spilled = (workspace / hit.ref).read_text(encoding="utf-8").splitlines()
    assert "FATAL" in spilled[hit.line - 1]


def test_a_result_appended_earlier_in_the_same_step_is_searchable(workspace: Path, agents):
    agent = make_agent(
        workspace,
        agents,
        turn(
            "",
            ("bash", {"command": "echo build id ZX-4411-Q"}, "b"),
            ("search_history", {"query": "ZX-4411-Q"}, "s"),
        ),
        turn("done"),
        strategy="rollover",
    )
    agent.run("run it")
    found = tool_result(agent, "s")["content"]
    bash_result_uuid = message_id(agent, lambda e: (e.get("tool_result") or {}).get("call_id") == "b")
    assert f"message_uuid {bash_result_uuid}" in found and "tool_result b" in found
    # The search call itself (its own query) is never a hit.
    assert "tool_call s" not in found


def test_search_history_tool_limits_scope_and_says_what_to_do_on_a_miss(workspace: Path, agents):
    other = make_agent(workspace, agents, turn("OTHER-SESSION-NEEDLE"))
    other.run("first session")
    other_id = other.session.id
    other.close()
    agent = make_agent(
        workspace,
        agents,
        turn(
            "",
            ("search_history", {"query": "OTHER-SESSION-NEEDLE"}, "here"),
            (
                "search_history",
                {"query": "OTHER-SESSION-NEEDLE", "session_id": other_id, "limit": 50},
                "there",
            ),
            ("search_history", {"query": "x", "session_id": "20990101-000000-dead"}, "nowhere"),
        ),
        turn("done"),
        strategy="rollover",
    )
    agent.run("look")
    here = tool_result(agent, "here")
    assert (
        not here["is_error"]
        and here["content"].startswith("no match")
        and "go back to the workspace" in here["content"]
    )
    there = tool_result(agent, "there")["content"]
    assert "1 match" in there and other_id in there
    nowhere = tool_result(agent, "nowhere")
    assert nowhere["is_error"] and agent.session.id in nowhere["content"]


# --- %sessions search / reindex ----------------------------------------------------------------------


def test_search_action_current_session_and_all(workspace: Path, agents):
    first = make_agent(workspace, agents, turn("the answer is PLUM-42"))
    first.run("question one")
    first_id = first.session.id
    first.run("question two", new=True)
    assert first.session.id != first_id

    current = search_action(first, "PLUM-42", all_sessions=False)
    assert current.startswith("1 match for 'PLUM-42' in session ") and first.session.id in current
    everywhere = search_action(first, "PLUM-42", all_sessions=True)
    assert "2 matches" in everywhere and first_id in everywhere and first.session.id in everywhere
    assert "Add --all" in search_action(first, "question one", all_sessions=False)

    first.close()
    with pytest.raises(ConfigError, match="--all"):
        search_action(first, "PLUM-42", all_sessions=False)
    with pytest.raises(ConfigError, match="needs a query"):
        search_action(first, "  ", all_sessions=True)

    # A session that is gone (purged, trashed) is not found any more.
    shutil.rmtree(workspace / ".pseudoclaude" / "sessions" / first_id)
    assert "1 match" in search_action(first, "PLUM-42", all_sessions=True)


def test_reindex_rebuilds_from_the_logs(workspace: Path, agents):
    agent = make_agent(workspace, agents, turn("reindex me: KIWI-7"))
    agent.run("one")
    agent.run("two", new=True)
    before = agent.history.count()
    text = reindex_action(agent)
    assert text.startswith("reindexed 2 sessions") and str(index_file(workspace)) in text
    assert agent.history.count() == before
    assert len(agent.history.search("KIWI-7")) == 2


def test_a_rewritten_log_is_reindexed_without_duplicates(workspace: Path, agents):
    agent = make_agent(workspace, agents, turn("MANGO-9"))
    agent.run("one")
    sid, path = agent.session.id, agent.session.dir / "conversation.jsonl"
    agent.close()
    rows = agent.history.count(sid)
    # Rewrite every line (as a hand repair or an import would): same entries, other bytes.
    path.write_text(
        "".join(json.dumps(json.loads(x), indent=None) + "\n" for x in path.read_text().splitlines())
    )
    assert len(agent.history.search("MANGO-9", session_id=sid)) == 1
    assert agent.history.count(sid) == rows


# --- losing the index -------------------------------------------------------------------------------


def test_a_deleted_index_is_rebuilt(workspace: Path, agents):
    agent = make_agent(workspace, agents, turn("remember LIME-3"))
    agent.run("one")
    agent.history.flush()  # the background indexer's catch-up: the kernel now holds the file open
    sid = agent.session.id
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index_file(workspace)}{suffix}").unlink(missing_ok=True)
    # Deleted while the kernel holds it open: the next search notices and rebuilds.
    out = search_action(agent, "LIME-3", all_sessions=False)
    assert "1 match" in out and "was removed" in out
    assert index_file(workspace).is_file()
    # And the hook keeps feeding the new file.
    agent.run("a second question, LIME-4")
    assert len(agent.history.search("LIME-4", session_id=sid)) == 1


def test_a_corrupt_index_is_rebuilt_on_the_next_use(workspace: Path, agents):
    agent = make_agent(workspace, agents, turn("remember PEAR-5"))
    agent.run("one")
    agent.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{index_file(workspace)}{suffix}").unlink(missing_ok=True)
    index_file(workspace).write_bytes(b"this is not a database " * 200)

    fresh = make_agent(workspace, agents, turn("x"))
    out = search_action(fresh, "PEAR-5", all_sessions=True)
    # Not a database at all: set aside unused (SPEC §19), the index rebuilt from the logs.
    assert "does not have the expected shape" in out and "file is not a database" in out and "1 match" in out
    (aside,) = workspace.joinpath(".pseudoclaude").glob(f"{INDEX_NAME}.untrusted-*")
    assert aside.read_bytes().startswith(b"this is not a database")


def test_a_broken_index_never_stops_a_run(workspace: Path, agents):
    (workspace / ".pseudoclaude").mkdir()
    index_file(workspace).mkdir()  # sqlite cannot open a directory
    agent = make_agent(workspace, agents, turn("still works"))
    events: list = []
    summary = agent.run("go", listeners=[events.append])
    assert summary.status == "done" and summary.final_text == "still works"
    assert any("history index not updated" in e.text for e in events if isinstance(e, Notice))
    with pytest.raises(SessionError, match="reindex"):
        agent.history.search("still", session_id=agent.session.id)


def test_the_index_file_is_private(workspace: Path, agents):
    agent = make_agent(workspace, agents, turn("hi"))
    agent.run("one")
    assert index_file(workspace).stat().st_mode & 0o077 == 0
    assert "history.sqlite*" in (workspace / ".pseudoclaude" / ".gitignore").read_text()


def test_the_index_catches_up_on_logs_written_without_it(workspace: Path, agents):
    agent = make_agent(workspace, agents, turn("written before the index existed: FIG-8"))
    agent.run("one")
    sid = agent.session.id
    agent.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index_file(workspace)}{suffix}").unlink(missing_ok=True)
    index = HistoryIndex(workspace)
    try:
        (hit,) = index.search("FIG-8")
        assert (hit.session_id, hit.role, hit.kind) == (sid, "assistant", "text")
    finally:
        index.close()


def test_a_run_leaves_its_catch_up_to_the_background_and_a_listing_does_not_call_it_lag(
    workspace: Path, agents, monkeypatch
):
    """Issue 34: a run ends without the index's catch-up (its commit grew with the index);
    the listing right after it does not report the kernel's own appends as lag, while a
    fresh index (another kernel) sees them behind until the background indexer commits."""
    from pseudoclaude_nb.magics import sessions as sessions_magic

    monkeypatch.setattr("pseudoclaude_nb.history.backlog.QUIET_SECONDS", 3600.0)
    monkeypatch.setattr("pseudoclaude_nb.history.backlog.MAX_WAIT_SECONDS", 3600.0)
    agent = make_agent(workspace, agents, turn("remember QUINCE-4"))
    agent.run("one")
    assert index_file(workspace).is_file()  # opened by the run: its shape was checked
    other = HistoryIndex(workspace)
    try:
        assert agent.session.id in other.lag()  # not committed by the run
    finally:
        other._close_connection()  # noqa: SLF001 - closed without a catch-up of its own
    assert sessions_magic._index_lag(agent) == ""  # marked for the background: not news
    assert [h.snippet for h in agent.history.search("QUINCE-4")] == ["remember QUINCE-4"]


def test_the_word_class_is_its_long_form_at_every_code_point() -> None:
    """``schema.WORD`` is spelled as the ASCII it leaves out (issue 47: compiled on every kernel's
    first run); it finds the words the long form finds, over every code point."""
    import re

    from pseudoclaude_nb.history import schema

    long_form = re.compile(r"[0-9a-z_\u0080-\U0010ffff]+")
    text = " ".join(map(chr, range(0x110000)))
    assert schema.WORD.findall(text) == long_form.findall(text)
