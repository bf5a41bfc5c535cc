"""``%context`` and ``%compact`` in a real in-process shell, on real scripted sessions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.session import load_session
from tests.scripts import run_magic as run
from tests.scripts import script, turn


def write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path


def big_file(workspace: Path, name: str = "big.txt", lines: int = 2000) -> str:
    (workspace / name).write_text("".join(f"line {i:05d} " + "x" * 40 + "\n" for i in range(lines)))
    return name


def test_context_json_has_the_pinned_fields_and_matches_the_session(ip, workspace: Path) -> None:
    path = write(workspace / "s.json", script(turn("hi there")))
    run(ip, f"agent --provider scripted --script {path} hello")
    data = json.loads(run(ip, "context --json"))
    for key in (
        "context_window",
        "estimated_tokens",
        "message_count",
        "tools",
        "memory_included",
        "memory_index",
    ):
        assert key in data
    assert data["context_window"] == 200_000 and data["threshold"] == 167_000
    assert data["message_count"] == 2 and data["memory_included"] is False and data["memory_index"] is None
    assert {"read_file", "bash", "grep"} <= set(data["tools"])
    assert data["session_id"] == current_agent(ip).session.id
    assert data["parts"]["user_text"] > 0 and data["parts"]["assistant_text"] > 0
    # The estimate follows the provider's last usage (the anchor), not a re-count.
    assert data["anchor_tokens"] == data["estimated_tokens"] > 0


def test_context_before_any_session_and_its_table(ip, workspace: Path) -> None:
    ip.run_line_magic("config", "PseudoClaude.context_window = 128000")
    table = run(ip, "context")
    assert "next request:" in table and "of 128,000 tokens" in table and "Layer 2 at 95,000" in table
    assert "tool schemas" in table and "0 messages" in table


def test_context_last_shows_what_was_sent(ip, workspace: Path) -> None:
    with pytest.raises(UsageError, match="no request has been sent"):
        ip.run_line_magic("context", "--last")
    path = write(workspace / "s.json", script(turn("", ("list_files", {})), turn("done")))
    run(ip, f"agent --provider scripted --script {path} --mode auto go")
    last = json.loads(run(ip, "context --json --last"))
    assert last["message_count"] == 3  # user, assistant call, tool result
    assert last["model"] == "scripted-test" and last["provider"] == "scripted"
    assert "last request:" in run(ip, "context --last")


def test_compact_layer1_spills_results_kept_under_an_older_limit(ip, workspace: Path) -> None:
    name = big_file(workspace)  # ~100 KB of numbered lines
    path = write(workspace / "s.json", script(turn("", ("read_file", {"path": name})), turn("read it")))
    ip.run_line_magic("config", "PseudoClaude.spill_bytes = 500000")  # nothing spills during the run
    run(ip, f"agent --provider scripted --script {path} --mode auto read")
    session = current_agent(ip).session
    assert not list((session.dir / "tool-results").glob("*"))
    ip.run_line_magic("config", "PseudoClaude.spill_bytes = 50000")
    assert "Layer 1: spilled 1 tool result to files" in run(ip, "compact --layer1")
    (spilled,) = (session.dir / "tool-results").glob("*.txt")
    assert spilled.stat().st_size > 100_000
    result = session.conversation.messages()[2].tool_result
    assert result is not None and result.content.startswith("[Tool result too large")
    assert load_session(session.dir).messages[2].tool_result == result


def test_compact_summarizes_and_status_reports_it(ip, workspace: Path) -> None:
    answer = turn("answer " + "words " * 300)  # each run plays the script from the top
    path = write(
        workspace / "s.json", script(answer, summaries=["## Confirmed requirements\n- six questions"])
    )
    for i in range(6):
        run(ip, f"agent --provider scripted --script {path} question {i}")  # a fresh provider each run
    ip.run_line_magic("config", "PseudoClaude.recent_tokens = 500")
    out = run(ip, "compact")
    assert "compacted: ~" in out
    session = current_agent(ip).session
    first = session.conversation.messages()[0]
    assert first.content.startswith("<summary>") and "six questions" in first.content
    log = load_session(session.dir)
    assert log.replaces == 1 and [c.trigger for c in log.compacts] == ["manual"]
    status = run(ip, "compact --status")
    assert "1 compactions" in status and "last compaction (manual)" in status and "breaker closed" in status


def test_compact_failure_is_reported_and_replaces_nothing(ip, workspace: Path) -> None:
    path = write(workspace / "s.json", script(turn("short")))
    run(ip, f"agent --provider scripted --script {path} hi")
    before = current_agent(ip).session.conversation.messages()
    out = run(ip, "compact")
    assert "compaction failed: nothing old enough to summarize" in out
    assert current_agent(ip).session.conversation.messages() == before


def test_compact_usage_errors(ip) -> None:
    with pytest.raises(UsageError, match="no current session"):
        ip.run_line_magic("compact", "")
    with pytest.raises(UsageError, match="not both"):
        ip.run_line_magic("compact", "--layer1 --status")
    with pytest.raises(UsageError, match="unrecognized"):
        ip.run_line_magic("context", "--bogus")


def _live_state(shared) -> tuple:
    """What a run configures on the session's shared state (and ``%context`` must not)."""
    return (
        shared.settings,
        shared.system,
        shared.tools,
        shared.observed,
        shared.anchor,
        shared.breaker.limit,
        shared.breaker_noted,
        shared.unsaved_noted,
    )


def test_context_is_a_dry_plan_that_leaves_the_shared_state_unchanged(ip, workspace: Path) -> None:
    path = write(workspace / "s.json", script(turn("hi there")))
    run(ip, f"agent --provider scripted --script {path} hello")
    shared = current_agent(ip).session.context.shared
    shared.breaker_noted = shared.unsaved_noted = True  # said once this run: the next %context keeps it
    before = _live_state(shared)
    # Settings a next run would apply differently: %context shows them, the live state keeps its own.
    ip.run_line_magic("config", "PseudoClaude.context_window = 64000")
    ip.run_line_magic("config", "PseudoClaude.breaker_limit = 7")
    (workspace / "CLAUDE.md").write_text("A new project note the next run's system prompt carries.\n")
    data = json.loads(run(ip, "context --json"))
    assert data["context_window"] == 64_000  # the plan of the next run
    assert _live_state(shared) == before
    assert shared.settings is before[0] and shared.observed is before[3]
    run(ip, "context")
    assert _live_state(shared) == before
