"""Session lifecycle (SPEC §6.4): trash, restore, purge and gc never delete without saying so."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.errors import SessionError, SessionLockedError, SessionNotFoundError
from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session import (
    gc_sessions,
    list_sessions,
    list_trash,
    load_session,
    plan_purge,
    purge,
    restore_session,
    trash_session,
)
from pseudoclaude_nb.session.lifecycle import dir_bytes
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir
from tests.scripts import run_magic as run

DAY = 86_400.0


def make_session(
    ws: Path, title: str = "hello", *, first: float | None = None, last: float | None = None
) -> str:
    """A closed session whose first and last entries carry the given times."""
    now = time.time()
    first = now - 60 if first is None else first
    last = now if last is None else last
    path = new_session_dir(ws)
    with SessionWriter(path, model="m") as w:
        conv = Conversation()
        w.attach(conv)
        conv.append(Message(role="user", content=title, ts=first))
        conv.append(Message(role="assistant", content="hi there", ts=(first + last) / 2))
        conv.append(Message(role="user", content="bye", ts=last))
    spill = path / "tool-results" / "call_1.txt"
    spill.parent.mkdir()
    spill.write_text("a spilled result\n" * 50)
    return path.name


@contextmanager
def locked_elsewhere(session: Path) -> Iterator[int]:
    """Another process holding the session's writer lock, as a second kernel would."""
    code = (
        "import sys\nfrom pseudoclaude_nb.session.writer import SessionWriter\n"
        "w = SessionWriter(sys.argv[1])\nprint('locked', flush=True)\nsys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(session)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield proc.pid
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def sessions_of(ws: Path) -> list[str]:
    return sorted(s.id for s in list_sessions(ws))


# --- trash and restore --------------------------------------------------------------------------


def test_trash_moves_the_directory_with_a_note_and_restore_brings_it_back(workspace: Path) -> None:
    sid = make_session(workspace, "fix the parser")
    before = load_session(workspace / ".pseudoclaude/sessions" / sid).messages
    size = dir_bytes(workspace / ".pseudoclaude/sessions" / sid)

    t = trash_session(workspace, sid)

    assert not (workspace / ".pseudoclaude/sessions" / sid).exists()
    assert t.path == workspace / ".pseudoclaude/trash" / sid
    assert (t.path / "conversation.jsonl").is_file() and (t.path / "tool-results/call_1.txt").is_file()
    note = json.loads((t.path / "trashed.json").read_text())
    assert note["original_id"] == sid and note["reason"] == "manual" and note["title"] == "fix the parser"
    assert abs(note["trashed_at"] - time.time()) < 60
    assert [p.name for p in t.path.iterdir() if p.name.endswith(".tmp")] == []  # atomic write left nothing
    assert sessions_of(workspace) == []
    [listed] = list_trash(workspace)
    assert (listed.id, listed.original_id, listed.title) == (sid, sid, "fix the parser")
    assert listed.bytes == dir_bytes(t.path) >= size

    restored = restore_session(workspace, sid)

    assert restored == workspace / ".pseudoclaude/sessions" / sid
    assert not (restored / "trashed.json").exists()
    assert list_trash(workspace) == []
    assert load_session(restored).messages == before
    assert sessions_of(workspace) == [sid]


def test_trash_refuses_the_session_open_in_this_kernel(workspace: Path) -> None:
    sid = make_session(workspace)
    with pytest.raises(SessionError, match="open in this kernel.*%sessions new"):
        trash_session(workspace, sid, open_id=sid)
    assert sessions_of(workspace) == [sid]


def test_trash_refuses_a_session_locked_by_another_process(workspace: Path) -> None:
    sid = make_session(workspace)
    with locked_elsewhere(workspace / ".pseudoclaude/sessions" / sid) as pid:
        with pytest.raises(SessionLockedError, match=f"pid {pid}") as info:
            trash_session(workspace, sid)
        assert sid in str(info.value)
        assert sessions_of(workspace) == [sid] and list_trash(workspace) == []
    trash_session(workspace, sid)  # once that kernel is gone, it can go
    assert sessions_of(workspace) == []


def test_unknown_or_malformed_ids_are_refused(workspace: Path) -> None:
    for bad in ("", "../x", ".pseudoclaude", "a/b"):
        with pytest.raises(SessionNotFoundError, match="not a session id"):
            trash_session(workspace, bad)
    with pytest.raises(SessionNotFoundError, match="no session 20990101-000000-0000"):
        trash_session(workspace, "20990101-000000-0000")


def test_restore_refuses_an_id_conflict_and_keeps_the_trashed_copy(workspace: Path) -> None:
    sid = make_session(workspace, "the old one")
    trash_session(workspace, sid)
    # A session of the same id appears again (an import, or a copy from a backup).
    (workspace / ".pseudoclaude/sessions" / sid).mkdir()
    (workspace / ".pseudoclaude/sessions" / sid / "conversation.jsonl").write_bytes(b"")
    with pytest.raises(SessionError, match=f"a session {sid} already exists.*%sessions trash {sid}"):
        restore_session(workspace, sid)
    [still] = list_trash(workspace)
    assert still.title == "the old one" and (still.path / "conversation.jsonl").stat().st_size > 0


def test_trashing_an_id_already_in_the_trash_keeps_both(workspace: Path) -> None:
    sid = make_session(workspace, "first")
    trash_session(workspace, sid)
    again = workspace / ".pseudoclaude/sessions" / sid
    again.mkdir()
    (again / "conversation.jsonl").write_bytes(
        (workspace / ".pseudoclaude/trash" / sid / "conversation.jsonl").read_bytes()
    )
    second = trash_session(workspace, sid)
    assert second.id == f"{sid}~2" and second.original_id == sid
    assert sorted(t.id for t in list_trash(workspace)) == [sid, f"{sid}~2"]
    # The suffixed one restores under its original id.
    assert restore_session(workspace, f"{sid}~2").name == sid


def test_a_trashed_session_without_its_note_still_lists_and_restores(workspace: Path) -> None:
    sid = make_session(workspace, "crash between move and note")
    t = trash_session(workspace, sid)
    (t.path / "trashed.json").unlink()  # as if the kernel died right after the rename
    [listed] = list_trash(workspace)
    assert listed.original_id == sid and listed.title == "crash between move and note"  # from meta.json
    assert restore_session(workspace, sid).name == sid


# --- purge -----------------------------------------------------------------------------------------


def test_purge_plans_count_and_bytes_and_deletes_only_when_run(workspace: Path) -> None:
    ids = [make_session(workspace, f"s{i}") for i in range(3)]
    keep = ids[2]
    for sid in ids[:2]:
        trash_session(workspace, sid)

    plan = plan_purge(workspace)
    assert plan.count == 2
    assert plan.bytes == sum(dir_bytes(workspace / ".pseudoclaude/trash" / sid) for sid in ids[:2])
    assert len(list_trash(workspace)) == 2  # planning deleted nothing

    one = plan_purge(workspace, ids[0])
    assert [t.id for t in one.sessions] == [ids[0]]
    assert purge(one) == one.bytes
    assert [t.id for t in list_trash(workspace)] == [ids[1]]

    purge(plan_purge(workspace))
    assert list_trash(workspace) == []
    assert list((workspace / ".pseudoclaude/trash").iterdir()) == []  # no leftovers
    assert sessions_of(workspace) == [keep]  # live sessions are never purged


def test_purge_only_takes_trashed_sessions(workspace: Path) -> None:
    sid = make_session(workspace)
    with pytest.raises(
        SessionNotFoundError, match=f"not in the trash; trash it first with %sessions trash {sid}"
    ):
        plan_purge(workspace, sid)
    with pytest.raises(SessionNotFoundError, match="no trashed session nope"):
        plan_purge(workspace, "nope")
    assert sessions_of(workspace) == [sid]


def test_an_interrupted_purge_is_hidden_and_finished_by_the_next(workspace: Path) -> None:
    sid = make_session(workspace)
    trash_session(workspace, sid)
    leftover = workspace / ".pseudoclaude/trash/.purging-old-abc123"
    (leftover / "tool-results").mkdir(parents=True)
    (leftover / "conversation.jsonl").write_text("{}\n")
    assert [t.id for t in list_trash(workspace)] == [sid]
    purge(plan_purge(workspace))
    assert not leftover.exists()


# --- gc ----------------------------------------------------------------------------------------------


def test_gc_goes_by_last_activity_and_reports_what_it_moved(workspace: Path) -> None:
    now = time.time()
    old_but_active = make_session(
        workspace, "created long ago, used yesterday", first=now - 100 * DAY, last=now - DAY
    )
    idle = make_session(workspace, "idle for weeks", first=now - 40 * DAY, last=now - 35 * DAY)
    fresh = make_session(workspace, "today")
    open_here = make_session(workspace, "open here", first=now - 60 * DAY, last=now - 50 * DAY)
    open_elsewhere = make_session(workspace, "open elsewhere", first=now - 60 * DAY, last=now - 45 * DAY)

    with locked_elsewhere(workspace / ".pseudoclaude/sessions" / open_elsewhere):
        report = gc_sessions(workspace, 30, open_id=open_here, now=now)

    assert [(t.original_id, t.title, t.reason) for t in report.moved] == [(idle, "idle for weeks", "gc")]
    assert report.moved[0].last_activity == pytest.approx(now - 35 * DAY)
    assert sorted((info.id, why) for info, why in report.skipped) == sorted(
        [(open_here, "open in this kernel"), (open_elsewhere, "open in another process")]
    )
    assert sessions_of(workspace) == sorted([old_but_active, fresh, open_here, open_elsewhere])
    assert [t.original_id for t in list_trash(workspace)] == [idle]  # moved, not deleted
    assert (
        json.loads((workspace / ".pseudoclaude/trash" / idle / "trashed.json").read_text())["reason"] == "gc"
    )


def test_gc_with_nothing_idle_moves_nothing(workspace: Path) -> None:
    make_session(workspace)
    report = gc_sessions(workspace, 30)
    assert report.moved == [] and report.skipped == []
    assert len(list_sessions(workspace)) == 1


# --- the magic ----------------------------------------------------------------------------------------


def test_magic_trash_list_restore(ip, workspace: Path) -> None:
    sid = make_session(workspace, "a title")
    out = run(ip, f"sessions trash {sid}")
    assert f"moved session {sid} (a title) to the trash" in out
    assert f"%sessions restore {sid}" in out and f"%sessions purge {sid} --yes" in out
    listing = run(ip, "sessions list")
    assert "no sessions yet" in listing and "1 session in the trash: %sessions list --trash" in listing
    for line in ("sessions list --trash", "sessions trash"):
        shown = run(ip, line)
        assert sid in shown and "a title" in shown and "1 trashed session" in shown
    assert f"restored session {sid}" in run(ip, f"sessions restore {sid}")
    assert "the trash is empty" in run(ip, "sessions trash")
    assert sid in run(ip, "sessions list")


def test_magic_purge_states_then_needs_yes(ip, workspace: Path) -> None:
    sid = make_session(workspace)
    trash_session(workspace, sid)
    size = dir_bytes(workspace / ".pseudoclaude/trash" / sid)
    out = run(ip, f"sessions purge {sid}")
    assert f"would permanently delete 1 trashed session ({size} B): {sid}" in out or (
        f"would permanently delete 1 trashed session ({size / 1024:.1f} KB): {sid}" in out
    )
    assert f"Nothing was deleted; to confirm, run %sessions purge {sid} --yes" in out
    assert [t.id for t in list_trash(workspace)] == [sid]
    assert "permanently deleted 1 trashed session" in run(ip, "sessions purge --all-trash --yes")
    assert list_trash(workspace) == []
    assert "nothing to purge" in run(ip, "sessions purge --all-trash --yes")


def test_magic_gc_reports_id_title_and_last_activity(ip, workspace: Path) -> None:
    now = time.time()
    idle = make_session(workspace, "old work", first=now - 20 * DAY, last=now - 12 * DAY)
    make_session(workspace, "recent work")
    assert "no session idle for more than 30 days; nothing moved" in run(ip, "sessions gc")
    out = run(ip, "sessions gc --days 10")
    assert "moved 1 session idle for more than 10 days to the trash" in out
    stamp = time.strftime("%Y-%m-%d", time.localtime(now - 12 * DAY))
    assert idle in out and "old work" in out and stamp in out
    assert "Nothing was deleted" in out


def test_magic_refuses_to_trash_the_current_session_until_it_is_closed(
    ip, workspace: Path, tmp_path: Path
) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"model": "m", "turns": [{"text": "ok"}]}))
    run(ip, f"agent --provider scripted --script {script} hi")
    sid = current_agent(ip).session.id
    with pytest.raises(UsageError, match="open in this kernel; run %sessions new"):
        ip.run_line_magic("sessions", f"trash {sid}")
    assert sessions_of(workspace) == [sid]
    run(ip, "sessions new")
    assert "moved session" in run(ip, f"sessions trash {sid}")
    assert sessions_of(workspace) == []


@pytest.mark.parametrize(
    "line, needle",
    [
        ("sessions purge", "needs one trashed session ID or --all-trash"),
        ("sessions purge abc --all-trash", "needs one trashed session ID or --all-trash"),
        ("sessions trash --yes abc", "--yes goes with %sessions purge, not trash"),
        ("sessions gc --days 0", "--days must be at least 1"),
        ("sessions list --days 3", "--days goes with %sessions gc"),
        ("sessions restore", "usage: %sessions restore ID"),
        ("sessions export abc", "usage: %sessions export ID PATH"),
        ("sessions import", "usage: %sessions import PATH"),
        ("sessions restore nope", "no trashed session nope"),
        ("sessions trash 20990101-000000-0000", "no session 20990101-000000-0000"),
        ("sessions new abc", "%sessions new takes no arguments, not 1"),
        ("sessions show a b", "%sessions show takes 0-1 arguments, not 2"),
        (
            "sessions search",
            '%sessions search takes at least 1 argument, not 0; usage: %sessions search "text',
        ),
        ("sessions search --yes x", "--yes goes with %sessions purge, not search"),
    ],
)
def test_magic_mistakes_are_usage_errors_with_the_fix(ip, line: str, needle: str) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("sessions", line.partition(" ")[2])
    assert needle in str(info.value)


def test_magic_search_and_reindex_reach_the_history_index(ip, workspace: Path) -> None:
    make_session(workspace, "the zebra crossing")
    assert "reindexed 1 session" in run(ip, "sessions reindex")
    found = run(ip, "sessions search zebra --all")
    assert "zebra" in found
    with pytest.raises(UsageError, match="no current session to search"):
        ip.run_line_magic("sessions", "search zebra")
