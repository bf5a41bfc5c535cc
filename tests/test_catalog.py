"""The catalog (SPEC §6.4): list_sessions and its meta.json sidecars."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import Message, ToolCall
from pseudoclaude_nb.session import catalog, list_sessions, load_session, session_info
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir


def make_session(
    workspace: Path, texts: list[str], *, model: str | None = "model-a", ts0: float = 1_000_000.0
) -> Path:
    """A session written through the real writer, with chosen timestamps."""
    d = new_session_dir(workspace)
    with SessionWriter(d, model=model) as w:
        conv = Conversation()
        w.attach(conv)
        for i, text in enumerate(texts):
            role = "user" if i % 2 == 0 else "assistant"
            conv.append(Message(role=role, content=text, ts=ts0 + i))
    return d


def append_raw(d: Path, data: bytes) -> None:
    with open(d / "conversation.jsonl", "ab") as f:
        f.write(data)


def test_no_sessions(workspace):
    assert list_sessions(workspace) == []
    (workspace / ".pseudoclaude" / "sessions").mkdir(parents=True)
    assert list_sessions(workspace) == []


def test_newest_activity_first_not_creation(workspace):
    old_but_active = make_session(workspace, ["old", "x", "y", "z"], ts0=1000.0)
    # Its last message comes latest, though the session started first.
    with SessionWriter(old_but_active) as w:
        conv = Conversation(load_session(old_but_active).messages)
        w.attach(conv)
        conv.append(Message(role="user", content="late", ts=9000.0))
    middle = make_session(workspace, ["middle"], ts0=5000.0)
    newest_created = make_session(workspace, ["newer"], ts0=6000.0)
    infos = list_sessions(workspace)
    assert [i.id for i in infos] == [old_but_active.name, newest_created.name, middle.name]
    assert infos[0].created == 1000.0 and infos[0].last_activity == 9000.0
    assert infos[1].created == infos[1].last_activity == 6000.0


def test_dirs_without_a_log_are_skipped(workspace):
    make_session(workspace, ["a"])
    (workspace / ".pseudoclaude" / "sessions" / "stray-dir").mkdir()
    new_session_dir(workspace)  # claimed but never written
    assert len(list_sessions(workspace)) == 1


def test_fields(workspace):
    long_title = "Fix   the\nbug " + "y" * 100
    d = make_session(workspace, [long_title, "sure", "thanks"], model="model-a")
    with SessionWriter(d, model="model-b") as w:
        conv = Conversation(load_session(d).messages)
        w.attach(conv)
        conv.replace("compact", [Message(role="user", content="summary")])
        conv.append(Message(role="assistant", content="ok"))
    (info,) = list_sessions(workspace)
    assert info.id == d.name and info.path == d
    assert info.title == " ".join(long_title.split())[:80]
    assert len(info.title) == 80
    assert info.first_model == "model-a"
    assert info.last_model == "model-b"
    assert info.physical_messages == 3 + 1 + 1  # three appends, one snapshot entry, one append
    assert info.effective_messages == 2
    assert info.bytes == (d / "conversation.jsonl").stat().st_size
    assert info.status == "ok"
    data = info.to_dict()
    assert data["path"] == str(d) and data["id"] == d.name
    json.dumps(data)  # plain data


def test_meta_json_written_atomically_with_all_fields(workspace):
    d = make_session(workspace, ["hello", "hi"])
    session_info(d)
    meta = json.loads((d / "meta.json").read_text())
    assert meta["version"] == catalog.META_VERSION
    assert meta["id"] == d.name
    assert meta["title"] == "hello"
    assert meta["bytes"] == (d / "conversation.jsonl").stat().st_size
    assert meta["physical_messages"] == meta["effective_messages"] == 2
    assert meta["status"] == "ok"
    assert meta["first_model"] == meta["last_model"] == "model-a"
    assert sorted(p.name for p in d.iterdir() if p.name.startswith(".")) == []  # no temp left


def test_fresh_meta_is_reused_without_reading_the_log(workspace, monkeypatch):
    d = make_session(workspace, ["hello", "hi"])
    first = session_info(d)

    def no_load(path):
        raise AssertionError("the log was replayed although meta.json is fresh")

    monkeypatch.setattr(catalog, "load_session", no_load)
    again = session_info(d)
    assert again == first
    assert [i.id for i in list_sessions(workspace)] == [d.name]


def test_meta_is_rebuilt_when_the_log_grows(workspace, monkeypatch):
    d = make_session(workspace, ["hello", "hi"])
    assert session_info(d).effective_messages == 2
    with SessionWriter(d) as w:
        conv = Conversation(load_session(d).messages)
        w.attach(conv)
        conv.add_user("third")
    calls = []
    real = catalog.load_session
    monkeypatch.setattr(catalog, "load_session", lambda p: calls.append(p) or real(p))
    # The writer brought meta.json up to date on close: nothing to read.
    assert json.loads((d / "meta.json").read_text())["bytes"] == (d / "conversation.jsonl").stat().st_size
    info = session_info(d)
    assert calls == []
    assert info.effective_messages == 3
    meta = json.loads((d / "meta.json").read_text())
    assert meta["effective_messages"] == 3
    assert meta["bytes"] == (d / "conversation.jsonl").stat().st_size


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[1, 2]", b"", json.dumps({"version": 999, "bytes": 0}).encode()],
    ids=["garbage", "not-object", "empty", "other-version"],
)
def test_unreadable_or_foreign_meta_is_rebuilt(workspace, content):
    d = make_session(workspace, ["hello", "hi"])
    if content.startswith(b'{"version": 999'):
        content = json.dumps(
            {"version": 999, "bytes": (d / "conversation.jsonl").stat().st_size, "title": "lie"}
        ).encode()
    (d / "meta.json").write_bytes(content)
    info = session_info(d)
    assert info.title == "hello" and info.effective_messages == 2
    assert json.loads((d / "meta.json").read_text())["version"] == catalog.META_VERSION


def test_missing_meta_is_rebuilt(workspace):
    d = make_session(workspace, ["hello"])
    session_info(d)
    (d / "meta.json").unlink()
    assert session_info(d).title == "hello"
    assert (d / "meta.json").exists()


def test_status_recovered_for_torn_tail(workspace):
    d = make_session(workspace, ["hello", "hi"])
    append_raw(d, b'{"v":1,"type":"mess')
    info = session_info(d)
    assert info.status == "recovered"
    assert info.effective_messages == 2


def test_status_recovered_for_dangling_calls(workspace):
    d = make_session(workspace, ["hello"])
    with SessionWriter(d) as w:
        conv = Conversation(load_session(d).messages)
        w.attach(conv)
        conv.add_assistant_tool_calls("", [ToolCall(id="c1", name="bash", arguments={"command": "ls"})])
    info = session_info(d)
    assert info.status == "recovered"
    assert info.physical_messages == 2 and info.effective_messages == 1


def test_status_incomplete_for_a_bad_middle_line(workspace):
    d = make_session(workspace, ["hello"])
    append_raw(d, b"garbage\n")
    with SessionWriter(d) as w:
        conv = Conversation(load_session(d).messages)
        w.attach(conv)
        conv.add_assistant("after")
    info = session_info(d)
    assert info.status == "incomplete"
    assert info.effective_messages == 2


def test_status_open_while_locked(workspace):
    d = make_session(workspace, ["hello"])
    with SessionWriter(d) as w:
        conv = Conversation(load_session(d).messages)
        w.attach(conv)
        conv.add_assistant("live")
        (info,) = list_sessions(workspace)
        assert info.status == "open"
        assert info.effective_messages == 2
        # The sidecar keeps the log's own status, not the transient lock state.
        assert json.loads((d / "meta.json").read_text())["status"] == "ok"
    assert session_info(d).status == "ok"


def test_bytes_is_the_current_log_size(workspace):
    d = make_session(workspace, ["hello"])
    info = session_info(d)
    assert info.bytes == (d / "conversation.jsonl").stat().st_size > 0


def test_a_stale_sidecar_reads_only_the_bytes_after_its_offset(workspace, monkeypatch):
    from pseudoclaude_nb.session import sidecar

    d = make_session(workspace, ["hello", "hi", "more"])
    before = (d / "conversation.jsonl").stat().st_size
    assert json.loads((d / "meta.json").read_text())["offset"] == before
    line = b'{"v":1,"type":"message","id":"m-x","ts":2000000.0,"role":"user","content":"tail"}\n'
    append_raw(d, line)
    fed = []
    real = sidecar.Replay.feed
    monkeypatch.setattr(sidecar.Replay, "feed", lambda self, data: fed.append(len(data)) or real(self, data))
    monkeypatch.setattr(catalog, "load_session", lambda p: (_ for _ in ()).throw(AssertionError("replayed")))
    info = session_info(d)
    assert fed == [len(line)]
    assert info.effective_messages == 4 and info.last_activity == 2000000.0
    assert json.loads((d / "meta.json").read_text())["offset"] == before + len(line)


def test_the_listing_by_fd_says_what_the_path_checks_say(workspace):
    """``list_sessions`` reads plainly safe, current sessions through one open folder; whatever
    it cannot vouch for goes the checked way. Either way each session's info is the same."""
    import os

    folders = []
    for i in range(6):
        d = new_session_dir(workspace, now=1_790_000_000 + i)
        with SessionWriter(d, model="m", fsync=False) as w:
            conv = Conversation()
            w.attach(conv)
            conv.add_user(f"task {i}")
            conv.add_assistant("done")
        folders.append(d)
    with open(folders[1] / "conversation.jsonl", "ab") as f:  # stale sidecar
        f.write(b'{"v":1,"type":"message","id":"x1","ts":5.0,"role":"user","content":"more"}\n')
    os.link(folders[2] / "meta.json", workspace / "elsewhere.json")  # a hard link: unsafe
    (folders[3] / "tool-results").mkdir()
    (folders[3] / "tool-results" / "a.txt").symlink_to("/etc/hostname")  # a link inside: unsafe
    (folders[4] / "meta.json").unlink()  # no sidecar
    locked = SessionWriter(folders[5], fsync=False)  # open: a writer holds it
    try:
        listed = {s.id: s for s in list_sessions(workspace)}
        assert {d.name: session_info(d) for d in folders} == listed
        assert listed[folders[2].name].status == listed[folders[3].name].status == "unsafe"
        assert listed[folders[5].name].status == "open" and listed[folders[1].name].physical_messages == 3
    finally:
        locked.close()
