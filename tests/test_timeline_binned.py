"""The binned timeline (issue 18): counts equal to the log's, a bounded picture, entries by offset."""

from __future__ import annotations

import json
import random
from pathlib import Path

import orjson
import pytest

from pseudoclaude_nb.messages import Message, ToolCall, ToolResult
from pseudoclaude_nb.session import entries, load_session
from pseudoclaude_nb.session.timeline import build_timeline

ipywidgets = pytest.importorskip("ipywidgets")
from pseudoclaude_nb.widgets.timeline import PAGE, SessionTimeline, timeline_svg  # noqa: E402


def oracle_kind(raw: bytes) -> str:
    """An entry's kind from its fully parsed line: the rules of the timeline, written plainly."""
    try:
        e = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return "bad"
    if not isinstance(e, dict):
        return "bad"
    if e.get("type") == "message":
        if isinstance(e.get("tool_result"), dict):
            return "tool_result"
        if e.get("tool_calls"):
            return "tool_call"
        return "user" if e.get("role") == "user" else "assistant"
    return (
        e.get("type")
        if e.get("type") in ("usage", "replace", "spill", "compact", "rollover", "note")
        else "unknown"
    )


def random_log(d: Path, seed: int, n: int) -> None:
    rng = random.Random(seed)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        r = rng.random()
        body = "x" * rng.choice([5, 50, 5000, 9000]) + ' "tool_result": {"a": 1} '
        if r < 0.3:
            m = Message(role=rng.choice(["user", "assistant"]), content=body, ts=1.0 + i)
        elif r < 0.45:
            m = Message(
                role="assistant",
                content=rng.choice(["", body]),
                ts=1.0 + i,
                tool_calls=(ToolCall(id=f"c{i}", name="read_file", arguments={"p": body}),),
            )
        elif r < 0.6:
            m = Message(role="user", tool_result=ToolResult(call_id=f"c{i - 1}", content=body), ts=1.0 + i)
        elif r < 0.7:
            out.append(
                entries.encode(
                    {
                        "v": 1,
                        "type": "usage",
                        "id": f"u{i}",
                        "ts": 1.0 + i,
                        "input_tokens": rng.randint(1, 9000),
                        "messages": 1,
                    }
                )
            )
            continue
        elif r < 0.75:
            rid = f"r{i}"
            out.append(
                entries.encode(entries.ReplaceEntry.new(rng.choice(["compact", "rollover"]), rid, 1).raw)
            )
            m = Message(role="user", content="summary", ts=1.0 + i)
            out.append(entries.encode(entries.message_entry(m, replace_id=rid)))
            continue
        elif r < 0.8:
            out.append(
                rng.choice([b"{not json\n", b"\n", b"[1]\n", entries.encode(entries.NoteEntry.new("n").raw)])
            )
            continue
        else:
            out.append(
                entries.encode(
                    entries.SpillEntry.new(
                        call_id=f"c{i}", tool="t", path="tool-results/x.txt", bytes=10, sha256="0"
                    ).raw
                )
            )
            continue
        out.append(entries.encode(entries.message_entry(m)))
    data = b"".join(out)
    if seed % 2:
        data += b'{"v":1,"type":"message","id":"torn'  # a crash mid-line
    (d / "conversation.jsonl").write_bytes(data)


@pytest.mark.parametrize("seed", range(6))
def test_binned_counts_equal_the_log(tmp_path: Path, seed: int) -> None:
    d = tmp_path / "s"
    random_log(d, seed, 700)
    t = build_timeline(d)
    raw_lines = (d / "conversation.jsonl").read_bytes().split(b"\n")
    want = [(n, oracle_kind(raw)) for n, raw in enumerate(raw_lines, 1) if raw.strip()]
    # Every entry, in order, with its line and kind (long lines classified by their keys only).
    assert [(t.lines[i], t.kind(i)) for i in range(t.count)] == want
    totals: dict[str, int] = {}
    for b in t.bins:
        for k, c in b.counts.items():
            totals[k] = totals.get(k, 0) + c
    expected: dict[str, int] = {}
    for _, k in want:
        expected[k] = expected.get(k, 0) + 1
    assert totals == expected
    assert len(t.bins) <= 200 and sum(b.end - b.first for b in t.bins) == t.count
    # The effective window and counts agree with a full load.
    loaded = load_session(d, full=True)
    assert t.effective_messages == len(loaded.messages) and t.problems == loaded.problems()
    eff_lines = {t.lines[i] for i in range(t.count) if t.offsets[i] >= t.effective_from}
    assert eff_lines == {n for n, _ in want if n >= loaded.effective_from_line}
    assert sum(b.effective for b in t.bins) == len(eff_lines)
    # Usage points: one per usage line, with its tokens.
    usage = [json.loads(raw) for raw in raw_lines if raw.startswith(b'{"v":1,"type":"usage"')]
    assert [tok for _, tok in t.usage_curve] == [u["input_tokens"] for u in usage]
    # An entry read by its offset is the line's entry.
    for i in random.Random(seed).sample(range(t.count), 20):
        item = t.items[i]
        assert item.line == t.lines[i] and item.kind == t.kind(i)


def test_picture_and_widget_state_stay_bounded(tmp_path: Path) -> None:
    d = tmp_path / "big"
    d.mkdir()
    lines = []
    for i in range(60_000):
        m = Message(
            role="user" if i % 2 == 0 else "assistant", content=f"message {i} " + "y" * 200, ts=1.0 + i
        )
        lines.append(entries.encode(entries.message_entry(m)))
        if i % 10 == 0:
            lines.append(
                entries.encode(
                    {"v": 1, "type": "usage", "id": f"u{i}", "ts": 1.0, "input_tokens": i, "messages": i}
                )
            )
    (d / "conversation.jsonl").write_bytes(b"".join(lines))
    t = build_timeline(d)
    assert t.count == 66_000
    svg = timeline_svg(t)
    widget = SessionTimeline(t)
    state = json.dumps([widget.overview.value, list(widget.entries.options), widget.detail.value])
    assert len(svg) < 300_000 and len(state.encode()) <= 300_000
    widget.select(65_999)
    assert "message 59999" in widget.detail.value
    assert widget.page.value == 65_999 // PAGE and len(widget.entries.options) <= PAGE


def _states(widget) -> list:
    return [widget, *(w for child in getattr(widget, "children", ()) for w in _states(child))]


def test_the_whole_output_stays_bounded_with_replaces_in_every_column(tmp_path: Path) -> None:
    """Every widget's state plus the display bundle's text forms (what a saved notebook keeps)."""
    d = tmp_path / "many"
    d.mkdir()
    out = []
    for i in range(30_000):
        if i % 100 == 0:  # a compaction in every column of the picture
            rid = f"r{i}"
            out.append(entries.encode(entries.ReplaceEntry.new("compact", rid, 1).raw))
            m = Message(role="user", content=f"summary {i}", ts=1.0 + i)
            out.append(entries.encode(entries.message_entry(m, replace_id=rid)))
            continue
        m = Message(
            role="user" if i % 2 == 0 else "assistant", content=f"message {i} " + "z" * 300, ts=1.0 + i
        )
        out.append(entries.encode(entries.message_entry(m)))
        out.append(
            entries.encode(
                {"v": 1, "type": "usage", "id": f"u{i}", "ts": 1.0, "input_tokens": i, "messages": 2}
            )
        )
    (d / "conversation.jsonl").write_bytes(b"".join(out))
    t = build_timeline(d)
    widget = SessionTimeline(t)
    bundle = widget._repr_mimebundle_()
    state = sum(len(json.dumps(w.get_state(), default=str).encode()) for w in _states(widget))
    total = state + len(bundle["text/html"].encode()) + len(bundle["text/plain"].encode())
    assert total <= 300_000, total
    assert timeline_svg(t).count('class="pc-replace"') == len(t.bins)  # every marker is still drawn


# --- the fast classifier against a full parse (issue 18: lines classified in place) ----------


def _writer(entry: dict) -> bytes:
    return entries.encode(entry)


def _varied_lines(rng: random.Random, n: int) -> list[bytes]:
    """Lines as the writer writes them and as other tools or hands do: every kind, other key
    orders, spaces, unicode, CRLF, blank lines, damage, a crash's torn line and its mending note."""
    from pseudoclaude_nb.messages import ImagePart, NotebookMark, Reasoning, Usage

    out: list[bytes] = []
    rid = None
    for i in range(n):
        text = rng.choice(["", "hi", "x" * rng.choice([10, 400, 5000]), '压缩 猫咪 "quoted" \\ back', "a\nb"])
        model = rng.choice([None, "m1", "claude-x"])
        r = rng.random()
        if r < 0.12:
            m = Message(role="user", content=text or "q", ts=1.0 + i)
            if rng.random() < 0.2:
                m = m.model_copy(update={"notebook": NotebookMark(chars=1, cells=2)})
            if rng.random() < 0.1:
                m = m.model_copy(update={"host": "remind"})
            if rng.random() < 0.1:
                m = m.model_copy(
                    update={
                        "parts": (
                            ImagePart(path="images/a.png", media_type="image/png", bytes=3, sha256="0"),
                        )
                    }
                )
            out.append(_writer(entries.message_entry(m, replace_id=rid, model=model)))
        elif r < 0.24:
            m = Message(role="assistant", content=text, ts=1.0 + i)
            if rng.random() < 0.15:
                m = m.model_copy(
                    update={"reasoning": (Reasoning(kind="thinking", text="hm", signature="s"),)}
                )
            if rng.random() < 0.1:
                m = m.model_copy(update={"stop_reason": "max_tokens"})
            out.append(_writer(entries.message_entry(m, replace_id=rid, model=model)))
        elif r < 0.36:
            args = rng.choice(
                [{"p": text}, {}, {"nested": {"tool_calls": [{"id": "z"}], "tool_result": None}}]
            )
            m = Message(
                role="assistant",
                content=rng.choice(["", text]),
                ts=1.0 + i,
                tool_calls=(ToolCall(id=f"c{i}", name="read_file", arguments=args),),
            )
            out.append(_writer(entries.message_entry(m, replace_id=rid, model=model)))
        elif r < 0.50:
            result = ToolResult(
                call_id=f"c{i}",
                content=text,
                is_error=rng.random() < 0.2,
                spilled=rng.choice([None, None, f"tool-results/c{i}.txt"]),
            )
            m = Message(role="user", tool_result=result, ts=1.0 + i)
            if rng.random() < 0.1:
                m = m.model_copy(
                    update={
                        "parts": (
                            ImagePart(path="images/b.png", media_type="image/png", bytes=3, sha256="1"),
                        )
                        * 2
                    }
                )
            out.append(_writer(entries.message_entry(m, replace_id=rid, model=model)))
        elif r < 0.60:
            u = Usage(
                input_tokens=rng.randint(0, 10**6),
                output_tokens=rng.randint(0, 999),
                cache_read_input_tokens=rng.choice([0, 5000]),
                cache_creation_input_tokens=rng.choice([0, 0, 12]),
            )
            out.append(_writer(entries.UsageEntry.new(u, messages=i, model=model).raw))
        elif r < 0.64:
            rid = rng.choice([f"{rng.getrandbits(128):032x}", f"r{i:031d}"[-32:]])  # the writer's, or not
            out.append(_writer(entries.ReplaceEntry.new(rng.choice(["compact", "rollover"]), rid, 2).raw))
        elif r < 0.67:
            out.append(
                _writer(
                    entries.SpillEntry.new(
                        call_id="c", tool="t", path="tool-results/c.txt", bytes=9, sha256="0"
                    ).raw
                )
            )
        elif r < 0.70:
            out.append(
                _writer(
                    entries.CompactEntry.new(
                        trigger="auto", before_tokens=9, after_tokens=3, ok=True, error=None
                    ).raw
                )
            )
        elif r < 0.72:
            out.append(_writer(entries.NoteEntry.new("a note").raw))
        elif r < 0.74:
            out.append(_writer({"v": 1, "type": "later-kind", "id": "o", "ts": 1.0}))
        else:
            # Hand-written or another tool's lines.
            e = rng.choice(
                [
                    {
                        "role": "user",
                        "v": 1,
                        "type": "message",
                        "id": f"h{i}",
                        "ts": 1.0,
                        "content": "reordered",
                    },
                    {
                        "v": 1,
                        "type": "message",
                        "id": f"h{i}",
                        "ts": 2,
                        "role": "assistant",
                        "content": "hi",
                        "tool_calls": [],
                        "reasoning": [{"kind": "thinking", "text": "t"}],
                        "tool_result": None,
                    },
                    {
                        "v": 1,
                        "type": "message",
                        "id": f"h{i}",
                        "ts": 1.5,
                        "role": "assistant",
                        "content": "",
                        "tool_result": None,
                        "tool_calls": [{"id": "c", "name": "n", "arguments": {}}],
                    },
                    {
                        "v": 1,
                        "type": "message",
                        "id": f"h{i}",
                        "ts": "3",
                        "role": "user",
                        "content": "ts as text",
                        "tool_calls": [],
                        "tool_result": None,
                    },
                    {
                        "v": 1,
                        "type": "message",
                        "id": f"h{i}",
                        "ts": 1.0,
                        "role": "user",
                        "content": "",
                        "tool_calls": [],
                        "tool_result": {"call_id": "c", "content": "r", "is_error": False},
                        "parts": [
                            {
                                "type": "image",
                                "path": "images/c.png",
                                "media_type": "image/png",
                                "bytes": 1,
                                "sha256": "2",
                            }
                        ],
                    },
                    {
                        "v": 1,
                        "type": "message",
                        "id": f"h{i}",
                        "ts": 1.0,
                        "role": "robot",
                        "content": "bad role",
                    },
                    {
                        "v": 1,
                        "type": "usage",
                        "id": "u",
                        "ts": 1.0,
                        "input_tokens": 5,
                        "output_tokens": 1.5,
                        "cache_creation_input_tokens": "7",
                        "cache_read_input_tokens": 10**30,
                        "messages": 1,
                    },
                    {
                        "v": 1,
                        "type": "usage",
                        "id": "u",
                        "ts": 1.0,
                        "input_tokens": 11,
                        "output_tokens": 2,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                        "messages": 1,
                        "x": {
                            "input_tokens": 900,
                            "output_tokens": 9,
                            "cache_creation_input_tokens": 9,
                            "cache_read_input_tokens": 9,
                        },
                    },
                    {"v": 1, "type": "replace", "id": "x", "ts": 1.0, "reason": "compact"},  # no count: bad
                ]
            )
            style = rng.random()
            if style < 0.4:
                line = json.dumps(e).encode()  # spaces after the separators
            elif style < 0.7:
                line = json.dumps(e, ensure_ascii=False, separators=(",", ":")).encode()
            else:
                try:
                    line = orjson.dumps(e)
                except TypeError:  # a number orjson does not write
                    line = json.dumps(e, separators=(",", ":")).encode()
            tail = rng.choice([b"\n", b"\n", b"\r\n", b"  \n"])
            out.append(line + tail)
            if rng.random() < 0.1:
                out.append(rng.choice([b"\n", b"   \n", b"{not json\n", b"[1]\n", b"null\n", b'"s"\n']))
        if rng.random() < 0.03:  # a crash tore a line; the writer ended it with its note
            torn = rng.choice(
                [
                    _writer(entries.message_entry(Message(role="assistant", content="cut", ts=9.0))),
                    _writer(entries.UsageEntry.new(Usage(input_tokens=5), messages=1, model="m").raw),
                    _writer(entries.SpillEntry.new(call_id="c", tool="t", path="p", bytes=1, sha256="0").raw),
                ]
            )
            note = entries.NoteEntry.new(
                "a line torn by a crash or failed write precedes this note", "warning"
            ).raw
            note = {"v": note.pop("v"), "type": note.pop("type"), "kind": entries.TORN_NOTE, **note}
            out.append(torn[: rng.randint(len(torn) // 2, len(torn) - 2)] + b"\n" + _writer(note))
    return out


def _expected(t) -> tuple[list[str], list[tuple[int, int]], dict[int, str], dict[int, int]]:
    """Every entry's kind, usage points, replace reasons and image parts from its full parse."""
    from pseudoclaude_nb.session.timeline import KINDS

    items = list(t.items)
    kinds = [it.kind if it.kind in KINDS else "unknown" for it in items]
    usage = [(i, it.tokens) for i, it in enumerate(items) if it.kind == "usage"]
    reasons = {i: it.reason for i, it in enumerate(items) if it.kind == "replace"}
    images = {i: it.images for i, it in enumerate(items) if it.images}
    return kinds, usage, reasons, images


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("chunk", [4096, 1 << 20])
def test_fast_classifier_agrees_with_a_full_parse(tmp_path: Path, monkeypatch, seed: int, chunk: int) -> None:
    """In-place classification (the writer's layout) equals a full parse of every line, for
    any mix of lines, chunk boundaries anywhere (lines longer than the buffer too)."""
    from pseudoclaude_nb.session import timeline

    monkeypatch.setattr(timeline, "READ_CHUNK", chunk)
    rng = random.Random(seed)
    d = tmp_path / "s"
    d.mkdir()
    data = b"".join(_varied_lines(rng, 500))
    if seed % 3 == 1:
        data += b'{"v":1,"type":"usage","id":"torn","ts":1.0,"input_tokens":5,'  # a torn tail
    (d / "conversation.jsonl").write_bytes(data)
    t = build_timeline(d)
    raw_lines = data.split(b"\n")
    assert [t.lines[i] for i in range(t.count)] == [n for n, raw in enumerate(raw_lines, 1) if raw.strip()]
    assert [t.offsets[i] for i in range(t.count)] == [
        o for o, raw in zip(_starts(data), raw_lines, strict=True) if raw.strip()
    ]
    kinds, usage, reasons, images = _expected(t)
    assert [t.kind(i) for i in range(t.count)] == kinds
    assert t.usage == usage and t.reasons == reasons and t.images == images
    assert sum(sum(b.counts.values()) for b in t.bins) == t.count
    assert sum(b.images for b in t.bins) == sum(images.values())


def _starts(data: bytes) -> list[int]:
    out, at = [], 0
    for raw in data.split(b"\n"):
        out.append(at)
        at += len(raw) + 1
    return out


def test_lines_written_after_the_sidecar_are_parsed(tmp_path: Path, monkeypatch) -> None:
    """Lines past the offset the sidecar's replay read (a writer appending meanwhile) are not
    trusted to be readable: each is parsed, an invalid message is unreadable."""
    from pseudoclaude_nb.session import sidecar, timeline

    d = tmp_path / "s"
    d.mkdir()
    first = b"".join(_varied_lines(random.Random(3), 200))
    (d / "conversation.jsonl").write_bytes(first)
    meta = sidecar.refresh(d)
    later = [
        entries.encode(entries.message_entry(Message(role="user", content="after", ts=5.0))),
        b'{"v":1,"type":"message","id":"x","ts":1.0,"role":"user","content":"","tool_calls":[],"tool_result":{"a":1}}\n',
        b'{"v":1,"type":"message","id":"y","ts":1.0,"role":"robot","content":"x","tool_calls":[],"tool_result":null}\n',
    ]
    with open(d / "conversation.jsonl", "ab") as f:
        f.write(b"".join(later))
    monkeypatch.setattr(timeline.sidecar, "refresh", lambda _d: meta)
    t = build_timeline(d)
    assert [t.kind(i) for i in range(t.count - 3, t.count)] == ["user", "bad", "bad"]
    assert [t.kind(i) for i in range(t.count)] == _expected(t)[0]


def test_labels_of_plainly_valid_messages_equal_the_validated_ones() -> None:
    """A page is labelled from plainly valid entries without validating them: the same items."""
    from pseudoclaude_nb.session.timeline.items import entry_item

    seen = 0
    for raw in _varied_lines(random.Random(11), 400):
        entry = entries.parse_line(raw)
        if isinstance(entry, entries.MessageEntry) and entry.parsed is None:
            validated = entries.MessageEntry(entry.raw, Message.model_validate(entry.raw))
            for detail in (False, True):
                assert entry_item(7, entry, True, with_detail=detail) == entry_item(
                    7, validated, True, with_detail=detail
                )
            seen += 1
    assert seen > 100
