"""Incremental meta.json sidecars (issue 18): equal to a full rebuild, reading only new bytes."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import Message, ToolCall, ToolResult
from pseudoclaude_nb.session import catalog, entries, load_session, sidecar
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir

FIELDS = (
    "title",
    "first_model",
    "last_model",
    "physical_messages",
    "effective_messages",
    "bytes",
    "created",
    "last_activity",
    "status",
)


def _full(d: Path) -> dict:
    result = load_session(d, full=True)
    out = {k: v for k, v in catalog.meta_from_load(result).items() if k in FIELDS}
    if result.first_ts is None:  # no timestamp at all: both fall back to the file's mtime
        out["created"] = out["last_activity"] = "mtime"
    return out


def _inc(meta: dict) -> dict:
    return {k: meta[k] for k in FIELDS}


def _same(meta: dict, d: Path) -> None:
    result = load_session(d, full=True)
    assert sidecar.plausible(meta, meta["bytes"])  # else it would be rebuilt at every listing
    assert meta["effective_from"] == result.effective_from_byte
    assert meta["problems"] == result.problems()
    full = _full(d)
    got = _inc(meta)
    if full["created"] == "mtime":
        got["created"] = got["last_activity"] = "mtime"
    assert got == full


CALL_IDS = ["c1", "c2", "c3"]


def _message(draw, n: int) -> Message:
    kind = draw(st.sampled_from(["user", "assistant", "calls", "result", "user-calls", "empty-calls"]))
    ts = 1000.0 + n
    if kind == "user":
        return Message(
            role="user", content=draw(st.sampled_from(["hi", "", "fix  the\nbug", "x" * 90])), ts=ts
        )
    if kind == "assistant":
        return Message(role="assistant", content=draw(st.sampled_from(["ok", ""])), ts=ts)
    if kind in ("calls", "empty-calls", "user-calls"):
        ids = draw(st.lists(st.sampled_from(CALL_IDS), min_size=1, max_size=3))
        calls = tuple(ToolCall(id=i, name="t", arguments={}) for i in ids)
        role = "user" if kind == "user-calls" else "assistant"
        content = "" if kind == "empty-calls" else "let me"
        return Message(role=role, content=content, tool_calls=calls, ts=ts)
    cid = draw(st.sampled_from(CALL_IDS + ["zz"]))
    return Message(role="user", tool_result=ToolResult(call_id=cid, content="out"), ts=ts)


def _line(msg: Message, **kw) -> bytes:
    return entries.encode(entries.message_entry(msg, **kw))


@st.composite
def operations(draw):
    """Raw byte chunks to append, with a refresh (``None``) or a rewrite (``b"!"+data``) between."""
    ops: list[bytes | None] = []
    for n in range(1, draw(st.integers(1, 25)) + 1):
        what = draw(
            st.sampled_from(
                [
                    "msg",
                    "msg",
                    "msg",
                    "replace",
                    "usage",
                    "note",
                    "garbage",
                    "torn",
                    "mend",
                    "frag",
                    "cutmend",
                    "twocrashes",
                    "refresh",
                    "refresh",
                    "crash",
                    "rewrite",
                    "blank",
                ]
            )
        )
        if what == "msg":
            model = draw(st.sampled_from([None, "m-a", "m-b"]))
            ops.append(_line(_message(draw, n), model=model))
        elif what == "replace":
            msgs = [_message(draw, n + k) for k in range(draw(st.integers(0, 4)))]
            rid = f"r{n}"
            data = entries.encode(entries.ReplaceEntry.new("compact", rid, len(msgs)).raw)
            written = draw(st.integers(0, len(msgs)))  # fewer than count: cut off (torn replace)
            data += b"".join(_line(m, replace_id=rid) for m in msgs[:written])
            ops.append(data)
        elif what == "usage":
            model = draw(st.sampled_from([None, "m-c"]))
            ops.append(
                entries.encode(
                    {
                        "v": 1,
                        "type": "usage",
                        "id": f"u{n}",
                        "ts": 1000.0 + n,
                        "input_tokens": 5,
                        "messages": 1,
                        "model": model,
                    }
                )
            )
        elif what == "note":
            ops.append(entries.encode(entries.NoteEntry.new("hello").raw))
        elif what == "garbage":
            ops.append(draw(st.sampled_from([b"{not json\n", b"[1,2]\n", b'{"v":1,"type":"message"}\n'])))
        elif what == "torn":
            full = _line(_message(draw, n))
            ops.append(full[: draw(st.integers(1, len(full) - 2))])  # no newline: a crash mid-line
        elif what == "mend":
            note = entries.NoteEntry.new("torn", "warning").raw
            note = {"v": note.pop("v"), "type": note.pop("type"), "kind": entries.TORN_NOTE, **note}
            ops.append(b"\n" + entries.encode(note))
        elif what == "frag":
            head = b'{"v":1,"type":"note","kind":"' + entries.TORN_NOTE.encode() + b'"'
            ops.append(head[: draw(st.integers(3, len(head)))] + b"\n")
        elif what == "cutmend":  # a crash during a mend: its note cut short, no newline
            head = b'{"v":1,"type":"note","kind":"' + entries.TORN_NOTE.encode() + b'"'
            ops.append(b"\n" + head[: draw(st.integers(3, len(head)))])
        elif what == "twocrashes":  # torn line, a mend cut short, then the mend that held
            full = _line(_message(draw, n))
            head = b'{"v":1,"type":"note","kind":"' + entries.TORN_NOTE.encode() + b'"'
            note = entries.NoteEntry.new("torn", "warning").raw
            note = {"v": note.pop("v"), "type": note.pop("type"), "kind": entries.TORN_NOTE, **note}
            ops.append(
                full[:10] + b"\n" + head[: draw(st.integers(3, len(head)))] + b"\n" + entries.encode(note)
            )
        elif what == "blank":
            ops.append(b"\n")
        elif what == "refresh":
            ops.append(None)
        elif what == "crash":
            ops.append(b"#" + str(draw(st.integers(1, 200))).encode())  # cut this many bytes off the end
        else:
            ops.append(b"!" + _line(Message(role="user", content="rewritten", ts=5.0)))
    return ops


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations())
def test_incremental_sidecar_equals_full_rebuild(tmp_path_factory, ops):
    d = tmp_path_factory.mktemp("s")
    log = d / "conversation.jsonl"
    log.write_bytes(b"")
    for op in ops:
        if op is None:
            _same(sidecar.refresh(d), d)
        elif op.startswith(b"#"):
            size = log.stat().st_size
            os.truncate(log, max(0, size - int(op[1:])))
        elif op.startswith(b"!"):
            before = log.stat().st_mtime_ns
            log.write_bytes(op[1:])  # another log under the same name (an import, a hand repair)
            # ... written later: a clock coarser than this loop must not make it look unchanged.
            os.utime(log, ns=(before + 10**7, before + 10**7))
        else:
            with open(log, "ab") as f:
                f.write(op)
    got = sidecar.refresh(d)
    _same(got, d)
    # And the stored state reloads: a second refresh of an unchanged log reads nothing.
    assert sidecar.refresh(d) == got


def test_a_log_rewritten_to_the_same_size_is_not_taken_for_the_old_one(tmp_path):
    """Found by the property above: the size matched, so the old sidecar was returned as is."""
    d = tmp_path / "s"
    d.mkdir()
    log = d / "conversation.jsonl"
    log.write_bytes(b"{broken\n" + _line(Message(role="user", content="first", ts=1.0)))
    assert sidecar.refresh(d)["problems"] == ["recovery incomplete: line 1 unreadable"]
    size, before = log.stat().st_size, log.stat().st_mtime_ns
    new = _line(Message(role="user", content="second", ts=2.0))
    log.write_bytes(new + b"{" + b"x" * (size - len(new) - 2) + b"\n")
    os.utime(log, ns=(before + 10**7, before + 10**7))
    assert log.stat().st_size == size
    meta = sidecar.refresh(d)
    assert meta["problems"] == ["recovery incomplete: line 2 unreadable"]
    _same(meta, d)


def test_writer_keeps_the_sidecar_current_by_bytes_replace_and_close(workspace):
    d = new_session_dir(workspace)
    log = d / "conversation.jsonl"
    with SessionWriter(d, model="m", meta_bytes=400) as w:
        conv = Conversation()
        w.attach(conv)
        conv.append(Message(role="user", content="m0", ts=1.0))
        assert not (d / "meta.json").exists()  # an append alone does not touch the sidecar
        for i in range(1, 9):
            conv.append(Message(role="user" if i % 2 == 0 else "assistant", content=f"m{i}" * 40, ts=1.0 + i))
        assert (d / "meta.json").exists()  # synced once 400 bytes were behind
        conv.append(Message(role="user", content="short", ts=10.0))
        meta = json.loads((d / "meta.json").read_text())
        assert 0 < meta["offset"] < log.stat().st_size  # ... and not for the short append since
        conv.replace("compact", [Message(role="user", content="summary", ts=20.0)])
        w.wait_meta()  # a replace brings it up to date off the caller's thread
        meta = json.loads((d / "meta.json").read_text())
        assert meta["bytes"] == log.stat().st_size
        conv.append(Message(role="assistant", content="after", ts=21.0))
        assert json.loads((d / "meta.json").read_text())["bytes"] < log.stat().st_size
        w.settle_meta()  # what the agent calls when a run ends
        assert json.loads((d / "meta.json").read_text())["bytes"] == log.stat().st_size
        conv.append(Message(role="user", content="last", ts=22.0))
    meta = json.loads((d / "meta.json").read_text())  # close syncs
    _same(meta, d)
    assert meta["effective_messages"] == 3 and meta["physical_messages"] == 13


def test_a_corrupt_stored_state_is_rebuilt(workspace):
    d = new_session_dir(workspace)
    with SessionWriter(d) as w:
        conv = Conversation()
        w.attach(conv)
        conv.append(Message(role="user", content="a", ts=1.0))
    meta = json.loads((d / "meta.json").read_text())
    meta["replay"]["acc"] = "nonsense"
    meta["bytes"] = 0
    (d / "meta.json").write_text(json.dumps(meta))
    _same(sidecar.refresh(d), d)


def test_state_stays_small_for_a_long_log(workspace):
    d = new_session_dir(workspace)
    with SessionWriter(d, fsync=False) as w:
        conv = Conversation()
        w.attach(conv)
        for i in range(3000):
            conv.append(
                Message(role="user" if i % 2 == 0 else "assistant", content=f"message {i}", ts=1.0 + i)
            )
    assert (d / "meta.json").stat().st_size < 2000
