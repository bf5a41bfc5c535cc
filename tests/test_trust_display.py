"""Workspace trust, finding 5: a cloned session's derived files and text are not used or shown as-is.

A cloned repository can ship ``.pseudoclaude/sessions/<id>/`` with a log whose title holds
terminal escapes (OSC 52 sets the clipboard, OSC 0 the window title, ``ESC[2J`` clears the
screen) and markup, a ``meta.json`` with absurd counts and a date in 2099 (which
``resume --last`` would pick), and a sparse 2 GiB ``timeline.idx``. SPEC §19: derived files
are checked against the shape a log of their size can give and rebuilt when they differ;
text from logs is printed with control characters escaped and HTML-escaped in markup.
"""

from __future__ import annotations

import json
import os
import struct
import time
import zlib
from pathlib import Path

import pytest

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.events import Notice, ToolFinished
from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.magics.render import TerminalRenderer
from pseudoclaude_nb.magics.tool_line import tool_result_bundle
from pseudoclaude_nb.messages import Message, ToolCall, ToolResult
from pseudoclaude_nb.session import entries, sidecar
from pseudoclaude_nb.session.catalog import list_sessions
from pseudoclaude_nb.session.timeline import build_timeline
from pseudoclaude_nb.session.timeline import index as timeline_index
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.widgets.timeline import SessionTimeline, timeline_html, timeline_text
from pseudoclaude_nb.workspace import (
    META_NAME,
    TIMELINE_INDEX,
    ensure_state_dir,
    new_session_dir,
    sessions_dir,
)
from tests.scripts import run_magic as run
from tests.test_timeline_index import full_scan, picture

HOSTILE = "fix \x1b]52;c;cm0gLXJmIH4=\x07 \x1b[2J \x1b]0;pwned\x07 <img src=x onerror=alert(1)> \x9b31m done"
Y2099 = 4_102_444_800.0  # 2100-01-01: what a shipped sidecar or log can claim
CLONED = "20991231-235959-beef"  # sorts first by id too


def cloned_session(workspace: Path, *, messages: int = 3) -> Path:
    """A session as a clone carries it: a log dated 2099 whose first prompt is hostile, an hour old on disk."""
    ensure_state_dir(workspace)
    d = sessions_dir(workspace) / CLONED
    d.mkdir()
    texts = [HOSTILE] + [f"more {i} \x1b[31mred\x1b[0m" for i in range(messages - 1)]
    lines = [
        entries.encode(entries.message_entry(Message(role="user", content=t, ts=Y2099 + i)))
        for i, t in enumerate(texts)
    ]
    log = d / "conversation.jsonl"
    log.write_bytes(b"".join(lines))
    an_hour_ago = time.time() - 3600
    os.utime(log, (an_hour_ago, an_hour_ago))
    return d


def crafted_meta(d: Path, **values: object) -> None:
    """A ``meta.json`` that is current for the log as it is (size, mtime, head), with ``values``."""
    meta = sidecar.refresh(d)
    meta.update(values)
    (d / META_NAME).write_text(json.dumps(meta))


def genuine_session(workspace: Path, text: str = "the real latest") -> Path:
    d = new_session_dir(workspace)
    with SessionWriter(d) as w:
        conv = Conversation()
        w.attach(conv)
        conv.append(Message(role="user", content=text))
    return d


def no_escapes(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text


ABSURD = {
    "title": "\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b]0;pwned\x07\x1b[2J<img src=x onerror=alert(1)>" * 200,
    "physical_messages": 10**15,
    "effective_messages": 10**15,
    "created": Y2099,
    "last_activity": Y2099,
}


# --- meta.json: values checked, a bad one rebuilt from the log -------------------------------------


@pytest.mark.parametrize("field", sorted(ABSURD))
def test_a_sidecar_with_an_implausible_value_is_rebuilt_from_the_log(workspace: Path, field: str) -> None:
    d = cloned_session(workspace)
    crafted_meta(d, **{field: ABSURD[field]})
    [info] = list_sessions(workspace)
    assert info.title.startswith("fix \x1b]52;")  # the log's own title (escaped when shown)
    assert len(info.title) <= 80
    assert (info.physical_messages, info.effective_messages) == (3, 3)  # from the log
    assert info.last_activity <= time.time() and info.created <= time.time()  # not 2099
    assert json.loads((d / META_NAME).read_text())[field] != ABSURD[field]  # rewritten


def test_a_crafted_replay_state_is_not_caught_up_from(workspace: Path) -> None:
    """The sidecar's stored state is resumed when its head matches the log: a crafted one is
    noticed by what it yields and replayed afresh (a clone changes the mtime, so it is resumed)."""
    d = cloned_session(workspace)
    meta = sidecar.refresh(d)
    meta["replay"].update(title=ABSURD["title"], physical=10**15, last_ts=Y2099)
    meta["mtime_ns"] = 1  # as after a clone: not current, caught up from its offset
    (d / META_NAME).write_text(json.dumps(meta))
    [info] = list_sessions(workspace)
    assert info.title.startswith("fix ") and len(info.title) <= 80
    assert info.physical_messages == 3 and info.last_activity <= time.time()


def test_plausible_bounds(workspace: Path) -> None:
    d = genuine_session(workspace)
    meta = sidecar.refresh(d)
    size, now = meta["bytes"], time.time()
    assert sidecar.plausible(meta, size, now)
    for bad in (
        {"physical_messages": size},  # more messages than the log's bytes could hold
        {"effective_messages": meta["physical_messages"] + 1},
        {"bytes": size + 1},
        {"last_activity": now + 2 * sidecar.CLOCK_SKEW},
        {"created": float("nan")},
        {"created": 10**400},  # no float holds it: refused, not an OverflowError
        {"created": True},
        {"title": "x" * 81},
        {"first_model": 7},
        {"status": "ok\x1b[2J"},
        {"problems": ["x"] * 50},
        {"effective_from": size + 1},
    ):
        assert not sidecar.plausible({**meta, **bad}, size, now), bad
    assert sidecar.plausible({**meta, "last_activity": now + 3600}, size, now)  # a little clock skew


def test_resume_last_is_never_the_clone_dated_2099(ip, workspace: Path) -> None:
    cloned = cloned_session(workspace)
    crafted_meta(cloned, created=Y2099, last_activity=Y2099)
    real = genuine_session(workspace)
    assert [s.id for s in list_sessions(workspace)][0] == real.name
    out = run(ip, "sessions resume --last")
    assert current_agent(ip).session.id == real.name and f"resumed session {real.name}" in out


# --- what %sessions prints: escaped ---------------------------------------------------------------


def test_sessions_list_show_and_search_print_no_escape(ip, workspace: Path) -> None:
    d = cloned_session(workspace)
    crafted_meta(d, **ABSURD)
    listing = run(ip, "sessions list")
    no_escapes(listing)
    assert "\\x1b]52;c;" in listing  # shown as text, not acted on
    assert CLONED in listing and "3/3" in listing and str(10**15) not in listing
    assert time.strftime("%Y-%m-%d", time.localtime(Y2099)) not in listing

    shown = run(ip, f"sessions show {CLONED}")
    no_escapes(shown)
    assert "3 effective messages of 3 logged" in shown and "\\x1b[2J" in shown and "\\x1b[31mred" in shown

    found = run(ip, "sessions search pwned --all")
    no_escapes(found)
    assert "1 match" in found


def test_html_forms_of_a_cloned_session_escape_markup(workspace: Path) -> None:
    d = cloned_session(workspace)
    t = build_timeline(d)
    markup = timeline_html(t)
    # The one image is the overview picture (a data URI of the package's own drawing).
    assert markup.count("<img") == 1 and "<img class='pc-picture" in markup and "&lt;img src=x" in markup
    bundle = SessionTimeline(t)._repr_mimebundle_()
    assert bundle["text/html"].count("<img") == 1
    for text in (bundle["text/plain"], timeline_text(t)):
        no_escapes(text)
        assert "\\x1b]0;pwned\\x07" in text


def test_tool_lines_and_notices_escape_what_a_tool_read(workspace: Path) -> None:
    call = ToolCall(id="c1", name="read_file", arguments={"path": "README.md"})
    result = ToolResult(call_id="c1", content=HOSTILE)
    bundle = tool_result_bundle(ToolFinished(call, result, 0.1))
    assert "<img" not in bundle["text/html"]
    no_escapes(bundle["text/plain"])

    class Out:
        text = ""

        def write(self, s: str) -> None:
            self.text += s

        def flush(self) -> None:
            pass

    out = Out()
    renderer = TerminalRenderer(out=out)
    renderer(ToolFinished(call, result, 0.1))
    renderer(Notice(HOSTILE, "warn"))
    no_escapes(out.text)
    assert "\\x1b]52;c;" in out.text


# --- timeline.idx: its size checked before anything is read ----------------------------------------


def indexed_session(workspace: Path, monkeypatch) -> Path:
    """A session with a few hundred entries and a good ``timeline.idx``."""
    monkeypatch.setattr(timeline_index, "MIN_BYTES", 0)
    d = genuine_session(workspace, "first")
    with SessionWriter(d) as w:
        conv = Conversation()
        w.attach(conv)
        for i in range(300):
            conv.append(Message(role="user" if i % 2 else "assistant", content=f"line {i} " * 5))
    build_timeline(d)
    assert (d / TIMELINE_INDEX).stat().st_size > 0
    assert build_timeline(d).indexed_bytes > 0  # the index is used as it should be
    return d


@pytest.fixture
def bytes_read(monkeypatch):
    """What the index reader reads; more than a MiB at once fails at once (no 2 GiB read)."""
    seen: list[int] = []
    real = timeline_index._read

    def counted(fd: int, n: int, at: int) -> bytes:
        if n > 1 << 20:
            raise AssertionError(f"the index reader asked for {n:,} bytes")
        out = real(fd, n, at)
        seen.append(len(out))
        return out

    monkeypatch.setattr(timeline_index, "_read", counted)
    return seen


@pytest.mark.parametrize("header", ["consistent", "zeros"])
def test_a_sparse_2_gib_index_is_refused_without_reading_it(
    workspace: Path, monkeypatch, bytes_read, header: str
) -> None:
    d = indexed_session(workspace, monkeypatch)
    expected = full_scan(d)
    index = d / TIMELINE_INDEX
    good = index.read_bytes()
    length = 2 << 30
    fields = list(struct.unpack_from("<8sQQQQQ40s", good))
    if header == "consistent":  # a header whose counts add up to the file's 2 GiB
        fields[3] = (length - 88 - 4 - fields[5]) // 17  # entries
        fields[4] = 0  # usage points
        fields[5] = length - 88 - 4 - 17 * fields[3]  # extras' bytes
        head = struct.pack("<8sQQQQQ40s", *fields)
    else:
        head = b""
    with open(index, "wb") as f:
        f.write(head)
        f.truncate(length)  # sparse: no disk used
    monkeypatch.setattr(timeline_index, "MIN_BYTES", 1 << 62)  # keep the shipped index in place
    bytes_read.clear()
    t = build_timeline(d)
    assert t.indexed_bytes == 0  # refused: the log was scanned
    assert sum(bytes_read) <= 88  # its header at most
    assert picture(t) == expected
    assert index.stat().st_size == length


def test_an_index_larger_than_its_log_is_refused(workspace: Path, monkeypatch, bytes_read) -> None:
    """A well-formed index whose body outweighs the log bytes it claims to cover is not read."""
    d = indexed_session(workspace, monkeypatch)
    expected = full_scan(d)
    index = d / TIMELINE_INDEX
    good = index.read_bytes()
    fields = list(struct.unpack_from("<8sQQQQQ40s", good))
    padding = fields[1] + 1  # extras' bytes beyond every byte the index covers
    fields[5] += padding
    body = struct.pack("<8sQQQQQ40s", *fields) + good[88:-5] + b" " * padding + good[-5:-4]
    index.write_bytes(body + struct.pack("<I", zlib.crc32(body)))
    bytes_read.clear()
    t = build_timeline(d)
    assert t.indexed_bytes == 0 and picture(t) == expected
    assert sum(bytes_read) <= 88
