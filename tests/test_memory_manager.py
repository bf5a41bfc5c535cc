"""The memory manager (pseudoclaude_nb/memory/manager.py): operations and the update after a run.

SPEC §10 and §16: operations are validated one by one (an invalid one is ignored and
reported, the others apply), ``update`` keeps ``created_at``, the update runs in a
background thread serialized per manager, a failure is a note and nothing else. The model
is the real scripted provider playing ``memory_ops``.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path

import pytest

from pseudoclaude_nb.memory import (
    InvalidOperation,
    MemoryManager,
    asks_to_remember,
    parse_operations,
    validate_operations,
)
from pseudoclaude_nb.memory.update import POLICY_TEXT, transcript
from pseudoclaude_nb.messages import Message, ToolCall, ToolResult
from pseudoclaude_nb.providers import ScriptedProvider
from tests.scripts import script

T0 = dt.datetime(2026, 11, 1, 9, 0, tzinfo=dt.timezone.utc)
T1 = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.timezone.utc)
PNPM = {
    "op": "create",
    "level": "project",
    "name": "package manager",
    "description": "This project uses pnpm",
    "type": "preference",
    "body": "pnpm, never npm",
}


def run_messages(text: str = "Remember that this project uses pnpm.") -> list[Message]:
    return [Message(role="user", content=text), Message(role="assistant", content="Noted.")]


def provider(*ops: list[dict]) -> ScriptedProvider:
    return ScriptedProvider(script(memory_ops=list(ops)))  # an update asks for memory_ops only


# --- validation --------------------------------------------------------------------------------


def test_invalid_operations_are_ignored_with_reasons_while_valid_ones_apply(tmp_path: Path) -> None:
    raw = [
        PNPM,
        {"op": "create", "level": "team", "name": "x", "description": "d", "type": "fact", "body": "b"},
        {"op": "create", "level": "project", "name": "no body", "description": "d", "type": "fact"},
        {"op": "create", "level": "user", "name": "", "description": "d", "type": "fact", "body": "b"},
        {"op": "rename", "level": "user", "name": "x"},
        {
            "op": "create",
            "level": "user",
            "name": "big",
            "description": "d",
            "type": "fact",
            "body": "x" * 5000,
        },
        {"op": "create", "level": "user", "name": "kind", "description": "d", "type": "rumour", "body": "b"},
        {"op": "update", "level": "project", "name": "nothing"},
        "create everything",
        {
            "op": "create",
            "level": "user",
            "name": "editor",
            "description": "Vim",
            "type": "preference",
            "body": "vim",
            "reason": "asked",
        },
    ]
    valid, ignored = validate_operations(raw)
    assert [(op.level, op.name) for op in valid] == [("project", "package manager"), ("user", "editor")]
    assert len(ignored) == 8
    joined = "\n".join(ignored)
    for expected in (
        "level",
        "create needs body",
        "name",
        "op",
        "4096 bytes",
        "type",
        "changes nothing",
        "not an object",
    ):
        assert expected in joined
    manager = MemoryManager(tmp_path / "ws", tmp_path / "home" / "memory")
    changes, failures = manager.apply(valid, source="s/m")
    assert changes == ["created project/package manager", "created user/editor"] and failures == []


def test_update_keeps_created_at_and_changes_only_what_it_names(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path)
    (create,) = validate_operations([PNPM])[0]
    manager.apply([create], source="s1/m1", now=T0)
    (update,) = validate_operations(
        [{"op": "update", "level": "project", "name": "Package Manager", "body": "pnpm 9"}]
    )[0]
    assert manager.apply([update], source="s2/m2", now=T1) == (["updated project/Package Manager"], [])
    (after,) = manager.find("package manager")
    assert after.created_at == "2026-11-01T09:00:00Z" and after.updated_at == "2026-11-20T09:00:00Z"
    assert (after.body, after.description, after.type, after.source) == (
        "pnpm 9",
        "This project uses pnpm",
        "preference",
        "s2/m2",
    )


def test_create_of_an_existing_name_updates_it_and_keeps_created_at(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path)
    manager.apply(validate_operations([PNPM])[0], source="a", now=T0)
    manager.apply(validate_operations([{**PNPM, "body": "pnpm only"}])[0], source="b", now=T1)
    (after,) = manager.find("package manager")
    assert after.created_at == "2026-11-01T09:00:00Z" and after.body == "pnpm only"


def test_a_rewritten_note_is_active_again(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path)
    manager.add("project", "pnpm", "Use pnpm", "preference", "pnpm")
    manager.set_status("project", "pnpm", "stale")
    manager.edit("project", "pnpm", body="pnpm 9")
    assert manager.find("pnpm")[0].status == "active"


def test_delete_and_update_of_missing_topics_are_reported_not_applied(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path)
    ops, _ = validate_operations(
        [
            {"op": "delete", "level": "project", "name": "ghost"},
            {"op": "update", "level": "project", "name": "ghost", "body": "b"},
            PNPM,
        ]
    )
    changes, failures = manager.apply(ops, source="s")
    assert changes == ["created project/package manager"]
    assert [f.split(":")[0] for f in failures] == ["delete project/ghost", "update project/ghost"]


def test_user_ops_raise_with_the_reason(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path)
    with pytest.raises(InvalidOperation, match="type"):
        manager.add("project", "x", "d", "rumour", "b")
    with pytest.raises(InvalidOperation, match="no such topic"):
        manager.remove("project", "ghost")
    with pytest.raises(InvalidOperation, match="unknown memory level"):
        manager.store("team")


def test_parse_operations_tolerates_fences_and_wrapping() -> None:
    assert parse_operations("[]") == []
    assert parse_operations('```json\n[{"op": "delete"}]\n```') == [{"op": "delete"}]
    assert parse_operations('Here you go: {"operations": [{"op": "x"}]}') == [{"op": "x"}]
    with pytest.raises(InvalidOperation, match="no JSON array"):
        parse_operations("Nothing to remember.")
    with pytest.raises(InvalidOperation, match="not valid JSON"):
        parse_operations("[{op: create}]")


# --- what asks for an update, and what the request holds -------------------------------------------


def test_explicit_policy_needs_a_user_message_that_asks() -> None:
    assert asks_to_remember(run_messages("Remember: we deploy on Fridays"))
    assert asks_to_remember(run_messages("记住：这个项目用 pnpm"))
    assert asks_to_remember(run_messages("Please forget the npm note"))
    assert asks_to_remember(run_messages("Add this to your memory: tabs, not spaces"))
    assert not asks_to_remember(run_messages("fix the failing test"))
    assert not asks_to_remember(run_messages("why is memory usage so high?"))
    # A tool result that says "remember" is not the user asking.
    result = Message(role="user", tool_result=ToolResult(call_id="c1", content="remember the milk"))
    assert not asks_to_remember([Message(role="user", content="read notes.txt"), result])


def test_the_update_request_states_the_policy_and_shows_the_run_and_the_indexes(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path)
    manager.add("project", "tabs", "Indent with tabs", "convention", "SECRET BODY TEXT")
    call = ToolCall(id="c1", name="read_file", arguments={"path": "a.py"})
    messages = [
        Message(role="user", content="Remember: use pnpm"),
        Message(role="assistant", content="Looking.", tool_calls=(call,)),
        Message(role="user", tool_result=ToolResult(call_id="c1", content="x" * 5000)),
        Message(role="assistant", content="Noted."),
    ]
    request = manager.update_request(messages, "explicit")
    assert request.purpose == "memory" and request.tools == []
    assert POLICY_TEXT["explicit"] in request.system and "JSON array" in request.system
    (content,) = [m.content for m in request.messages]
    assert "[user] Remember: use pnpm" in content and "[assistant calls read_file]" in content
    assert "tabs — Indent with tabs" in content and "## User Memory\n(empty)" in content
    assert "SECRET BODY TEXT" not in content  # indexes only, never bodies
    assert "x" * 600 not in content  # tool results are shown briefly
    assert POLICY_TEXT["auto"] in manager.update_request(messages, "auto").system


def test_a_long_run_is_cut_in_the_middle() -> None:
    messages = (
        [Message(role="user", content="Remember: START")]
        + [Message(role="assistant", content=f"step {i} " + "y" * 1500) for i in range(100)]
        + [Message(role="assistant", content="THE END")]
    )
    text = transcript(messages)
    assert len(text) < 62_000 and "START" in text and "THE END" in text and "characters cut" in text


# --- the update in the background ----------------------------------------------------------------------


def test_update_async_applies_the_scripted_operations(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path, tmp_path / "home")
    notes: list[tuple[str, str]] = []
    bad = {"op": "create", "level": "galaxy", "name": "x"}
    queued = manager.update_async(
        run_messages(),
        provider=provider([PNPM, bad]),
        session_id="S1",
        note=lambda t, lv: notes.append((t, lv)),
    )
    assert queued and manager.wait(30)
    (report,) = manager.take_reports()
    assert report.changes == ["created project/package manager"] and len(report.ignored) == 1
    (topic,) = manager.find("package manager")
    assert topic.source.startswith("S1/") and len(topic.source) == len("S1/") + 32
    (note,) = notes
    assert note[1] == "warning" and "created project/package manager" in note[0] and "galaxy" in note[0]


def test_policies_decide_whether_a_request_is_made(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path)
    quiet = run_messages("fix the test")
    scripted = provider([PNPM])
    assert not manager.update_async(quiet, provider=scripted, policy="explicit")
    assert not manager.update_async(run_messages(), provider=scripted, policy="off")
    assert scripted.memory_ops_used == 0
    assert manager.update_async(quiet, provider=scripted, policy="auto") and manager.wait(30)
    assert scripted.memory_ops_used == 1 and manager.find("package manager")


def test_a_failed_update_is_a_note_and_changes_nothing(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path)
    notes: list[tuple[str, str]] = []
    empty = provider()  # the script has no memory_ops: the request fails loudly
    manager.update_async(run_messages(), provider=empty, note=lambda t, lv: notes.append((t, lv)))
    assert manager.wait(30)
    assert manager.last_report is not None and "ran out" in (manager.last_report.error or "")
    assert notes and notes[0][1] == "warning" and notes[0][0].startswith("memory update failed")
    assert manager.prompt_index() is None


def test_unparsable_answers_and_failing_note_callbacks_are_contained(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path)

    def broken_note(text: str, level: str) -> None:
        raise OSError("the session log is closed")

    scripted = ScriptedProvider(script(memory_ops=[[{"op": "create"}]]))
    manager.update_async(run_messages(), provider=scripted, note=broken_note)
    assert manager.wait(30)
    assert manager.last_report is not None and manager.last_report.ignored


def test_updates_run_one_at_a_time_in_the_order_asked(tmp_path: Path, monkeypatch) -> None:
    """Create then delete: if the second update overtook the first, the note would survive."""
    manager = MemoryManager(tmp_path)
    release, first_started = threading.Event(), threading.Event()
    real_update = manager._update
    calls = []

    def gated(job):
        calls.append(job.source)
        if len(calls) == 1:
            first_started.set()
            assert release.wait(30)
        return real_update(job)

    monkeypatch.setattr(manager, "_update", gated)
    delete = {"op": "delete", "level": "project", "name": "package manager"}
    manager.update_async(run_messages(), provider=provider([PNPM]), session_id="A")
    assert first_started.wait(30)
    manager.update_async(
        run_messages("Now forget the package manager"), provider=provider([delete]), session_id="B"
    )
    assert manager.pending == 2 and not manager.wait(0)
    release.set()
    assert manager.wait(30)
    assert [c.split("/")[0] for c in calls] == ["A", "B"]
    assert manager.find("package manager") == []
    assert [r.changes for r in manager.take_reports()] == [
        ["created project/package manager"],
        ["deleted project/package manager"],
    ]


def test_many_queued_updates_lose_nothing(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path)
    for i in range(12):
        op = {**PNPM, "name": f"note {i}", "description": f"fact {i}"}
        manager.update_async(run_messages(), provider=provider([op]), session_id=f"S{i}")
    assert manager.wait(60)
    topics = manager.topics()["project"]
    assert sorted(t.name for t in topics) == sorted(f"note {i}" for i in range(12))
    index = (tmp_path / ".pseudoclaude" / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    assert all(f"[note {i}]" in index for i in range(12))
    json.dumps([r.changes for r in manager.take_reports()])  # plain data


def test_a_secret_in_a_scripted_body_is_redacted_on_disk(tmp_path: Path) -> None:
    key = "sk-ant-api03-" + "Z" * 40
    manager = MemoryManager(tmp_path)
    manager.update_async(run_messages(), provider=provider([{**PNPM, "body": f"deploy key {key}"}]))
    assert manager.wait(30)
    text = (tmp_path / ".pseudoclaude" / "memory" / "package-manager.md").read_text(encoding="utf-8")
    assert key not in text and "deploy key [REDACTED:anthropic]" in text


def test_a_bad_file_is_reported_once_per_manager(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path)
    manager.add("project", "pnpm", "Use pnpm", "preference", "pnpm")
    (tmp_path / ".pseudoclaude" / "memory" / "junk.md").write_text("no header\n")
    manager.topics()
    assert [n for n in manager.take_notices() if "junk.md" in n] == [
        "memory file .pseudoclaude/memory/junk.md skipped: the file does not start with a '---' header"
    ]
    manager.topics()
    assert manager.take_notices() == []
