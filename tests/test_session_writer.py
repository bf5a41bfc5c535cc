"""The session writer (SPEC §6.2): durability, model stamps, torn tails, the lock, failures."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.errors import HookError, SessionLockedError, SessionWriteError
from pseudoclaude_nb.messages import Message, ToolCall, Usage
from pseudoclaude_nb.session import load_session
from pseudoclaude_nb.session import writer as writer_mod
from pseudoclaude_nb.session.entries import TORN_NOTE, NoteEntry, UsageEntry
from pseudoclaude_nb.session.writer import SessionWriter, is_locked
from pseudoclaude_nb.workspace import new_session_dir


def entries_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


@pytest.fixture
def sdir(workspace: Path) -> Path:
    return new_session_dir(workspace)


@pytest.fixture
def opened(sdir: Path):
    """A writer attached to a fresh conversation; closed after the test."""
    w = SessionWriter(sdir, model="model-a")
    conv = Conversation()
    w.attach(conv)
    yield w, conv
    w.close()


class Counter:
    """Counts os.write / os.fsync on one file descriptor, calling the real functions."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fd_of) -> None:
        self.writes: list[int] = []
        self.fsyncs = 0
        real_write, real_fsync = os.write, os.fsync
        self.fd_of = fd_of

        def write(fd, data):
            if fd == self.fd_of():
                self.writes.append(len(data))
            return real_write(fd, data)

        def fsync(fd):
            if fd == self.fd_of():
                self.fsyncs += 1
            return real_fsync(fd)

        monkeypatch.setattr(writer_mod.os, "write", write)
        monkeypatch.setattr(writer_mod.os, "fsync", fsync)

    def reset(self) -> None:
        self.writes.clear()
        self.fsyncs = 0


# --- entries and durability -------------------------------------------------------------------


def test_one_message_entry_per_append(opened):
    w, conv = opened
    u = conv.add_user("hello ☕")
    a = conv.add_assistant_tool_calls("", [ToolCall(id="c1", name="bash", arguments={"command": "ls"})])
    r = conv.add_tool_result("c1", "out")
    lines = entries_of(w.path)
    assert [e["type"] for e in lines] == ["message"] * 3
    assert [e["id"] for e in lines] == [u.id, a.id, r.id]
    for e in lines:
        assert e["v"] == 1 and isinstance(e["ts"], float)
    assert lines[0]["role"] == "user" and lines[0]["content"] == "hello ☕"
    assert lines[1]["tool_calls"] == [{"id": "c1", "name": "bash", "arguments": {"command": "ls"}}]
    assert lines[2]["tool_result"] == {"call_id": "c1", "content": "out", "is_error": False}
    # UTF-8, not \u escapes, and newline-terminated.
    raw = w.path.read_bytes()
    assert "☕".encode() in raw and raw.endswith(b"\n")


def test_append_is_one_write_and_one_fsync(opened, monkeypatch):
    w, conv = opened
    counter = Counter(monkeypatch, lambda: w._fd)
    for i in range(5):
        counter.reset()
        conv.add_user(f"message {i} " + "x" * 5000)
        assert len(counter.writes) == 1
        assert counter.fsyncs == 1


def test_a_short_write_goes_on_with_the_rest_before_the_fsync(opened, monkeypatch):
    """``os.write`` may write less than it was given (a signal, a nearly full disk)."""
    w, conv = opened
    real_write, real_fsync = os.write, os.fsync
    calls: list[str] = []

    def short(fd, data):
        if fd != w._fd:
            return real_write(fd, data)
        calls.append("write")
        return real_write(fd, bytes(data[:700]))

    def fsync(fd):
        calls.append("fsync")
        return real_fsync(fd)

    monkeypatch.setattr(writer_mod.os, "write", short)
    monkeypatch.setattr(writer_mod.os, "fsync", fsync)
    big = conv.add_user("long " + "y" * 5000)
    small = conv.add_user("short")
    assert calls.count("fsync") == 2 and calls.count("write") > 8 and calls[-1] == "fsync"
    assert [e["content"] for e in entries_of(w.path)] == [big.content, small.content]


def test_replace_of_1000_messages_is_one_write_and_one_fsync(opened, monkeypatch):
    w, conv = opened
    conv.add_user("before")
    msgs = [Message(role="user" if i % 2 == 0 else "assistant", content=f"m{i}") for i in range(1000)]
    counter = Counter(monkeypatch, lambda: w._fd)
    conv.replace("compact", msgs)
    assert len(counter.writes) == 1
    assert counter.fsyncs == 1
    lines = entries_of(w.path)
    marker = lines[1]
    assert marker["type"] == "replace" and marker["reason"] == "compact" and marker["count"] == 1000
    snapshot = lines[2:]
    assert len(snapshot) == 1000
    assert all(e["replace_id"] == marker["replace_id"] for e in snapshot)
    assert [e["id"] for e in snapshot] == [m.id for m in msgs]
    assert counter.writes[0] == w.path.stat().st_size - len(w.path.read_bytes().split(b"\n", 1)[0]) - 1


def test_usage_and_note_are_one_write_each(opened, monkeypatch):
    w, conv = opened
    conv.add_user("x")
    counter = Counter(monkeypatch, lambda: w._fd)
    w.record(
        UsageEntry.new(
            Usage(input_tokens=5, output_tokens=2, cache_read_input_tokens=9), messages=1, model="model-a"
        )
    )
    w.record(NoteEntry.new("hello", "warning"))
    assert len(counter.writes) == 2 and counter.fsyncs == 2
    usage, note = entries_of(w.path)[1:]
    assert usage["type"] == "usage" and usage["input_tokens"] == 5 and usage["cache_read_input_tokens"] == 9
    assert usage["messages"] == 1 and usage["model"] == "model-a"
    assert note["type"] == "note" and note["text"] == "hello" and note["level"] == "warning"


def test_fsync_false_never_fsyncs(sdir, monkeypatch):
    w = SessionWriter(sdir, fsync=False)
    conv = Conversation()
    w.attach(conv)
    counter = Counter(monkeypatch, lambda: w._fd)
    try:
        conv.add_user("a")
        conv.replace("edit", [Message(role="user", content="b")])
        w.record(NoteEntry.new("n"))
        assert len(counter.writes) == 3
        assert counter.fsyncs == 0
    finally:
        w.close()
    assert [m.content for m in load_session(sdir).messages] == ["b"]


# --- model stamps ---------------------------------------------------------------------------------


def test_first_message_carries_model_later_ones_do_not(opened):
    w, conv = opened
    conv.add_user("a")
    conv.add_assistant("b")
    conv.add_user("c")
    lines = entries_of(w.path)
    assert lines[0]["model"] == "model-a"
    assert "model" not in lines[1] and "model" not in lines[2]


def test_set_model_restamps_only_on_change(opened):
    w, conv = opened
    conv.add_user("a")
    w.set_model("model-a")  # unchanged: no new stamp
    conv.add_assistant("b")
    w.set_model("model-b")
    conv.add_user("c")
    conv.add_assistant("d")
    lines = entries_of(w.path)
    assert [e.get("model") for e in lines] == ["model-a", None, "model-b", None]
    loaded = load_session(w.dir)
    assert loaded.first_model == "model-a" and loaded.last_model == "model-b"


def test_writer_without_model_stamps_nothing_until_set(sdir):
    with SessionWriter(sdir) as w:
        conv = Conversation()
        w.attach(conv)
        conv.add_user("a")
        w.set_model("m")
        conv.add_assistant("b")
    assert [e.get("model") for e in entries_of(sdir / "conversation.jsonl")] == [None, "m"]


def test_detach_and_close_stop_writing(opened):
    w, conv = opened
    conv.add_user("logged")
    w.detach()
    conv.add_user("not logged")
    assert [e["content"] for e in entries_of(w.path)] == ["logged"]
    w.close()
    with pytest.raises(SessionWriteError, match="closed"):
        w.record(NoteEntry.new("after close"))


# --- torn tail -----------------------------------------------------------------------------------


def _torn_log(sdir: Path) -> tuple[Path, Message]:
    with SessionWriter(sdir, model="m") as w:
        conv = Conversation()
        w.attach(conv)
        first = conv.add_user("survives")
    log = sdir / "conversation.jsonl"
    with open(log, "ab") as f:
        f.write(b'{"v":1,"type":"message","id":"abc","ts":1.0,"role":"assi')  # a crash mid-line
    return log, first


def test_torn_tail_is_mended_on_open(sdir):
    log, first = _torn_log(sdir)
    before = load_session(sdir)
    assert before.torn_tail and not before.incomplete and before.bad_lines == []
    assert [m.id for m in before.messages] == [first.id]

    with SessionWriter(sdir) as w:
        conv = Conversation(before.messages)
        w.attach(conv)
        second = conv.add_assistant("after the crash")

    raw = log.read_bytes()
    lines = raw.split(b"\n")
    assert lines[1].endswith(b'"role":"assi')  # the torn line, now ended by \n
    note = json.loads(lines[2])
    assert note["type"] == "note" and note["kind"] == TORN_NOTE
    assert json.loads(lines[3])["id"] == second.id  # not fused with the torn line

    loaded = load_session(sdir)
    assert [m.id for m in loaded.messages] == [first.id, second.id]
    assert loaded.torn_tail is True
    assert loaded.incomplete is False
    assert loaded.bad_lines == []


def test_clean_log_gets_no_note(sdir):
    with SessionWriter(sdir) as w:
        conv = Conversation()
        w.attach(conv)
        conv.add_user("a")
    size = (sdir / "conversation.jsonl").stat().st_size
    with SessionWriter(sdir):
        pass
    assert (sdir / "conversation.jsonl").stat().st_size == size


def test_log_file_mode_is_private(sdir):
    with SessionWriter(sdir):
        pass
    assert ((sdir / "conversation.jsonl").stat().st_mode & 0o777) == 0o600


# --- the lock --------------------------------------------------------------------------------------


def test_second_writer_is_refused_with_id_and_pid(opened):
    w, conv = opened
    conv.add_user("hello")
    assert is_locked(w.dir)
    with pytest.raises(SessionLockedError) as info:
        SessionWriter(w.dir)
    err = info.value
    assert w.id in str(err)
    assert f"pid {os.getpid()}" in str(err)
    assert err.pid == os.getpid() and err.session_id == w.id
    # The refused writer wrote nothing and the holder still works.
    conv.add_assistant("still writing")
    loaded = load_session(w.dir)  # read-only view while locked
    assert [m.content for m in loaded.messages] == ["hello", "still writing"]


def test_lock_released_on_close(sdir):
    w = SessionWriter(sdir)
    assert is_locked(sdir)
    w.close()
    assert not is_locked(sdir)
    w.close()  # idempotent
    with SessionWriter(sdir) as again:
        assert is_locked(sdir)
        again.record(NoteEntry.new("reopened"))
    assert not is_locked(sdir)
    assert (sdir / "writer.lock").exists()


def test_is_locked_without_lock_file(tmp_path):
    assert is_locked(tmp_path) is False


# --- failures ---------------------------------------------------------------------------------------


class FailingWrite:
    """os.write that fails once with ENOSPC, optionally after writing part of the data."""

    def __init__(self, monkeypatch, fd_of, *, partial: bool, err: int = errno.ENOSPC) -> None:
        self.armed = False
        self.failures = 0
        real = os.write

        def write(fd, data):
            if self.armed and fd == fd_of():
                self.armed = False
                self.failures += 1
                if partial:
                    real(fd, bytes(data[: len(data) // 2]))
                raise OSError(err, os.strerror(err))
            return real(fd, data)

        monkeypatch.setattr(writer_mod.os, "write", write)


def _assert_log_matches(conv: Conversation, sdir: Path):
    loaded = load_session(sdir)
    mem = conv.messages()
    assert [m.id for m in loaded.messages] == [m.id for m in mem]
    assert loaded.messages == mem
    return loaded


@pytest.mark.parametrize("partial", [False, True], ids=["nothing-written", "half-written"])
def test_disk_full_fails_clearly_keeps_memory_and_resyncs(opened, monkeypatch, partial):
    w, conv = opened
    conv.add_user("one")
    conv.add_assistant("two")
    failing = FailingWrite(monkeypatch, lambda: w._fd, partial=partial)
    failing.armed = True
    with pytest.raises(HookError) as info:
        conv.add_user("three " + "y" * 300)
    cause = info.value.__cause__
    assert isinstance(cause, SessionWriteError)
    assert str(w.path) in str(cause)
    assert "free some disk space" in str(cause)
    assert "No space left on device" in str(cause)
    assert isinstance(cause.__cause__, OSError) and cause.__cause__.errno == errno.ENOSPC
    assert w.failed is cause
    # Memory keeps the message the log could not take.
    assert [m.content[:5] for m in conv.messages()] == ["one", "two", "three"]

    conv.add_assistant("four")  # the disk has room again
    assert w.failed is None
    lines = entries_of_tolerant(w.path)
    replaces = [e for e in lines if e.get("type") == "replace"]
    assert replaces and replaces[-1]["reason"] == "resync"
    assert replaces[-1]["count"] == 4
    _assert_log_matches(conv, w.dir)

    conv.add_user("five")  # back to plain appends
    assert entries_of_tolerant(w.path)[-1]["content"] == "five"
    assert entries_of_tolerant(w.path)[-1].get("replace_id") is None
    _assert_log_matches(conv, w.dir)


def entries_of_tolerant(path: Path) -> list[dict]:
    out = []
    for line in path.read_bytes().split(b"\n"):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def test_failed_then_replace_converges(opened, monkeypatch):
    w, conv = opened
    conv.add_user("one")
    failing = FailingWrite(monkeypatch, lambda: w._fd, partial=True)
    failing.armed = True
    with pytest.raises(HookError):
        conv.add_assistant("two")
    kept = [Message(role="user", content="summary")]
    conv.replace("compact", kept)
    assert w.failed is None
    _assert_log_matches(conv, w.dir)


def test_failed_then_usage_entry_resyncs_first(opened, monkeypatch):
    w, conv = opened
    conv.add_user("one")
    failing = FailingWrite(monkeypatch, lambda: w._fd, partial=True)
    failing.armed = True
    with pytest.raises(HookError):
        conv.add_assistant("two")
    w.record(UsageEntry.new(Usage(input_tokens=3, output_tokens=1), messages=2, model="model-a"))
    assert w.failed is None
    loaded = _assert_log_matches(conv, w.dir)
    assert loaded.usage_anchor == (4, 2)


def test_failed_fsync_also_fails_the_writer(opened, monkeypatch):
    w, conv = opened
    conv.add_user("one")
    real_fsync = os.fsync
    state = {"armed": True}

    def fsync(fd):
        if state["armed"] and fd == w._fd:
            state["armed"] = False
            raise OSError(errno.EIO, "Input/output error")
        return real_fsync(fd)

    monkeypatch.setattr(writer_mod.os, "fsync", fsync)
    with pytest.raises(HookError) as info:
        conv.add_assistant("two")
    assert isinstance(info.value.__cause__, SessionWriteError)
    assert "check the folder" in str(info.value.__cause__)
    conv.add_user("three")
    _assert_log_matches(conv, w.dir)


def test_permission_error_on_open_is_a_session_write_error(sdir, monkeypatch):
    real_open = os.open

    def deny_log(path, flags, mode=0o777, **kw):
        if str(path).endswith("conversation.jsonl"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, mode, **kw)

    with monkeypatch.context() as m:
        m.setattr(writer_mod.os, "open", deny_log)
        with pytest.raises(SessionWriteError, match="conversation.jsonl") as info:
            SessionWriter(sdir)
    assert "Permission denied" in str(info.value)
    assert not is_locked(sdir)  # the lock was released
    SessionWriter(sdir).close()


def test_recovery_writes_a_single_resync(opened, monkeypatch):
    w, conv = opened
    conv.add_user("one")
    failing = FailingWrite(monkeypatch, lambda: w._fd, partial=False)
    failing.armed = True
    with pytest.raises(HookError):
        conv.add_assistant("two")
    conv.add_user("three")
    replaces = [e for e in entries_of_tolerant(w.path) if e.get("type") == "replace"]
    assert len(replaces) == 1


def test_recovered_partial_write_is_not_reported_incomplete(opened, monkeypatch):
    w, conv = opened
    conv.add_user("one")
    failing = FailingWrite(monkeypatch, lambda: w._fd, partial=True)
    failing.armed = True
    with pytest.raises(HookError):
        conv.add_assistant("two")
    conv.add_user("three")
    loaded = _assert_log_matches(conv, w.dir)
    assert loaded.incomplete is False
    assert loaded.bad_lines == []
