"""A hostile workspace: a shipped ``.pseudoclaude/`` full of links, FIFOs, devices and hard links.

Every test hashes every file of a decoy folder outside the workspace before and after, and
asserts nothing there changed; operations that would read a FIFO or a device must refuse at
once (each test runs under a short alarm, so a hang fails instead of blocking the suite).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import zipfile
from pathlib import Path

import pytest

from pseudoclaude_nb.context.spill import write_spill
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.errors import SessionError, SessionLockedError, UnsafePathError
from pseudoclaude_nb.memory.store import MemoryStore, Topic
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session import entries
from pseudoclaude_nb.session.archive import ArchiveError, export_session, import_session
from pseudoclaude_nb.session.catalog import list_sessions
from pseudoclaude_nb.session.entries import SpillEntry
from pseudoclaude_nb.session.loader import load_session
from pseudoclaude_nb.session.timeline import build_timeline
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import ensure_state_dir, new_session_dir, sessions_dir


@pytest.fixture(autouse=True)
def _no_hang():
    """A FIFO read would block forever: fail after 20 s instead."""

    def boom(*_a):
        raise TimeoutError("the operation hung (a FIFO or device was read)")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture
def decoy(tmp_path: Path) -> Path:
    d = tmp_path / "decoy"
    (d / "sub").mkdir(parents=True)
    (d / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (d / "lock-target").write_text("precious\n")
    (d / "sub" / "note.txt").write_text("do not touch\n")
    return d


def snapshot(folder: Path) -> dict[str, str]:
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[str(p.relative_to(folder))] = "dir" if p.is_dir() else "other"
    return out


def good_session(workspace: Path, text: str = "hello") -> Path:
    d = new_session_dir(workspace)
    with SessionWriter(d) as w:
        conv = Conversation()
        w.attach(conv)
        conv.append(Message(role="user", content=text))
    return d


def shipped_session(workspace: Path, name: str = "20991231-235959-beef") -> Path:
    """A far-future session, as a cloned repository could carry it (resume --last would pick it)."""
    ensure_state_dir(workspace)
    d = sessions_dir(workspace) / name
    d.mkdir()
    line = entries.encode(entries.message_entry(Message(role="user", content="shipped")))
    (d / "conversation.jsonl").write_bytes(line)
    return d


def test_symlinked_lock_is_refused_and_its_target_untouched(workspace, decoy):
    before = snapshot(decoy)
    d = shipped_session(workspace)
    (d / "writer.lock").symlink_to(decoy / "lock-target")
    with pytest.raises(UnsafePathError, match="writer.lock"):
        SessionWriter(d)
    assert [s.status for s in list_sessions(workspace) if s.id == d.name] == ["unsafe"]
    assert snapshot(decoy) == before


def test_symlinked_log_is_never_appended_or_read(workspace, decoy):
    before = snapshot(decoy)
    good = good_session(workspace)
    d = shipped_session(workspace)
    (d / "conversation.jsonl").unlink()
    (d / "conversation.jsonl").symlink_to(decoy / "passwd")
    with pytest.raises(UnsafePathError, match="symbolic link"):
        SessionWriter(d)
    with pytest.raises(SessionError, match="conversation.jsonl"):
        load_session(d)
    with pytest.raises(SessionError):
        build_timeline(d)
    with pytest.raises(SessionError):
        export_session(workspace, d.name, workspace / "out.zip")
    listed = list_sessions(workspace)
    # The unsafe one lists last (no activity): resume --last picks the good one.
    assert [s.id for s in listed] == [good.name, d.name] and listed[1].status == "unsafe"
    assert snapshot(decoy) == before


def test_symlinked_spill_folder_and_spill_file_are_not_written_through(workspace, decoy):
    before = snapshot(decoy)
    d = good_session(workspace)
    (d / "tool-results").symlink_to(decoy / "sub")
    with pytest.raises(UnsafePathError, match="tool-results"):
        write_spill(d, "c1", "bash", "x" * 100)
    assert snapshot(decoy) == before
    (d / "tool-results").unlink()
    (d / "tool-results").mkdir()
    (d / "tool-results" / "c2.txt").symlink_to(decoy / "sub" / "note.txt")
    write_spill(d, "c2", "bash", "new body")  # the link itself is replaced, not its target
    assert not (d / "tool-results" / "c2.txt").is_symlink()
    assert (d / "tool-results" / "c2.txt").read_text() == "new body"
    assert snapshot(decoy) == before


def test_symlinked_state_dir_is_refused(workspace, decoy):
    before = snapshot(decoy)
    (workspace / ".pseudoclaude").symlink_to(decoy / "sub", target_is_directory=True)
    with pytest.raises(UnsafePathError, match=r"\.pseudoclaude"):
        new_session_dir(workspace)
    assert snapshot(decoy) == before


def test_symlinked_memory_folder_is_refused(workspace, decoy):
    before = snapshot(decoy)
    ensure_state_dir(workspace)
    (workspace / ".pseudoclaude" / "memory").symlink_to(decoy / "sub", target_is_directory=True)
    store = MemoryStore(workspace / ".pseudoclaude" / "memory", "project")
    topic = Topic("pm", "uses pnpm", "fact", "project", "user", "2026-01-01T00:00:00Z", "", "active")
    with pytest.raises(UnsafePathError, match="memory"):
        store.put(topic)
    assert store.topics() == []
    assert snapshot(decoy) == before


def test_fifo_log_is_refused_without_hanging(workspace, decoy):
    d = shipped_session(workspace)
    (d / "conversation.jsonl").unlink()
    os.mkfifo(d / "conversation.jsonl")
    with pytest.raises(SessionError, match="FIFO"):
        load_session(d)
    with pytest.raises(UnsafePathError):
        SessionWriter(d)
    assert [s.status for s in list_sessions(workspace)] == ["unsafe"]
    with pytest.raises(SessionError):
        build_timeline(d)


def test_device_as_log_and_fifo_meta_are_refused(workspace):
    d = shipped_session(workspace)
    (d / "conversation.jsonl").unlink()
    (d / "conversation.jsonl").symlink_to("/dev/zero")
    with pytest.raises(SessionError):
        load_session(d)
    d2 = shipped_session(workspace, "20991231-235958-cafe")
    os.mkfifo(d2 / "meta.json")
    assert {s.id: s.status for s in list_sessions(workspace)}[d2.name] == "unsafe"


def test_hard_linked_log_is_refused(workspace, decoy):
    before = snapshot(decoy)
    d = shipped_session(workspace)
    (d / "conversation.jsonl").unlink()
    os.link(decoy / "passwd", d / "conversation.jsonl")
    with pytest.raises(UnsafePathError, match="hard link"):
        SessionWriter(d)
    assert snapshot(decoy) == before


def test_import_of_dev_zero_or_a_fifo_is_refused_at_once(workspace, tmp_path):
    link = tmp_path / "zero.zip"
    link.symlink_to("/dev/zero")
    with pytest.raises(ArchiveError, match="regular file"):
        import_session(workspace, link)
    fifo = tmp_path / "pipe.zip"
    os.mkfifo(fifo)
    with pytest.raises(ArchiveError, match="regular file"):
        import_session(workspace, fifo)


def test_spill_browser_never_opens_a_path_outside_the_session(workspace, decoy):
    pytest.importorskip("ipywidgets")
    from pseudoclaude_nb.widgets.spills import spill_rows

    d = good_session(workspace)
    secret = decoy / "passwd"
    with SessionWriter(d) as w:
        for path in (str(secret), "../../../../decoy/passwd", "tool-results/../../../x", "meta.json"):
            w.record(SpillEntry.new(call_id="c", tool="bash", path=path, bytes=1, sha256="0" * 64))
    rows = spill_rows(d)
    assert len(rows) == 4
    assert all("root:" not in r["preview"] for r in rows)
    assert all("outside" in r["preview"] for r in rows)


def test_deleting_writer_lock_while_held_does_not_let_a_second_writer_in(workspace):
    d = good_session(workspace)
    with SessionWriter(d):
        (d / "writer.lock").unlink()
        with pytest.raises(SessionLockedError):
            SessionWriter(d)


def test_a_crash_during_the_torn_tail_mend_reads_as_recovered(workspace):
    d = good_session(workspace)
    log = d / "conversation.jsonl"
    good = log.read_bytes()
    torn = entries.encode(entries.message_entry(Message(role="user", content="cut off")))[:40]
    note = {"v": 1, "type": "note", "kind": entries.TORN_NOTE, "id": "n", "ts": 1.0, "text": "t"}
    mend = b"\n" + entries.encode(note)
    for cut in range(1, len(mend)):
        log.write_bytes(good + torn + mend[:cut])  # the mend itself was cut by a crash
        SessionWriter(d).close()  # the next open mends again
        loaded = load_session(d, full=True)
        assert not loaded.incomplete, f"mend cut at byte {cut}: {loaded.problems()}"
        assert loaded.torn_tail and [m.content for m in loaded.messages] == ["hello"]


def test_crash_leftovers_are_cleaned_when_the_session_opens(workspace):
    d = good_session(workspace)
    (d / "tool-results").mkdir()
    old = [d / ".meta.json.1234.tmp", d / "tool-results" / ".spill-abc", d / "tool-results" / ".import-x"]
    for p in old:
        p.write_text("leftover")
        os.utime(p, (1_000_000, 1_000_000))
    young = d / "tool-results" / ".spill-young"
    young.write_text("in flight")
    SessionWriter(d).close()
    assert not any(p.exists() for p in old) and young.exists()


def test_an_abandoned_import_folder_is_removed_on_listing(workspace):
    good = good_session(workspace)
    dead = sessions_dir(workspace) / "20260101-000000-dead"
    (dead / "tool-results").mkdir(parents=True)
    (dead / "tool-results" / "c.txt").write_text("half an import")
    (dead / "meta.json").write_text(json.dumps({"id": "x"}))
    os.utime(dead, (1_000_000, 1_000_000))
    assert [s.id for s in list_sessions(workspace)] == [good.name]
    assert not dead.exists()


def test_meta_json_with_wrong_types_still_lists(workspace):
    d = good_session(workspace)
    list_sessions(workspace)
    meta = json.loads((d / "meta.json").read_text())
    meta.update(title=["x"], physical_messages="7", created="yesterday", last_activity=10**400 and 1e308)
    (d / "meta.json").write_text(json.dumps(meta))
    [info] = list_sessions(workspace)  # a sidecar with wrong types is rebuilt from the log
    assert info.title == "hello" and info.physical_messages == 1 and 0 < info.created <= info.last_activity


def test_import_manifest_nested_100000_deep_and_a_zip_bomb_are_rejected(workspace, tmp_path):
    deep = tmp_path / "deep.zip"
    with zipfile.ZipFile(deep, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", "[" * 100_000 + "]" * 100_000)
    with pytest.raises(ArchiveError, match="nests deeper"):
        import_session(workspace, deep)
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", "{}")
        zf.writestr("conversation.jsonl", b"\n" * (30 << 20))
    with pytest.raises(ArchiveError, match="inflates"):
        import_session(workspace, bomb)
    assert not sessions_dir(workspace).exists() or not any(sessions_dir(workspace).iterdir())
