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
from pseudoclaude_nb.widgets.timeline import SessionTimeline, timeline_svg  # noqa: E402


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
            out.append(entries.encode(entries.replace_entry(rng.choice(["compact", "rollover"]), rid, 1)))
            m = Message(role="user", content="summary", ts=1.0 + i)
            out.append(entries.encode(entries.message_entry(m, replace_id=rid)))
            continue
        elif r < 0.8:
            out.append(rng.choice([b"{not json\n", b"\n", b"[1]\n", entries.encode(entries.note_entry("n"))]))
            continue
        else:
            out.append(
                entries.encode(
                    entries.spill_entry(
                        call_id=f"c{i}", tool="t", path="tool-results/x.txt", bytes=10, sha256="0"
                    )
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
    assert widget.page.value == 65_999 // 200 and len(widget.entries.options) <= 200


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
            out.append(entries.encode(entries.replace_entry("compact", rid, 1)))
            m = Message(role="user", content=f"summary {i}", ts=1.0 + i)
            out.append(entries.encode(entries.message_entry(m, replace_id=rid)))
            continue
        m = Message(role="user" if i % 2 == 0 else "assistant", content=f"message {i} " + "z" * 300, ts=1.0 + i)
        out.append(entries.encode(entries.message_entry(m)))
        out.append(entries.encode({"v": 1, "type": "usage", "id": f"u{i}", "ts": 1.0, "input_tokens": i, "messages": 2}))
    (d / "conversation.jsonl").write_bytes(b"".join(out))
    t = build_timeline(d)
    widget = SessionTimeline(t)
    bundle = widget._repr_mimebundle_()
    state = sum(len(json.dumps(w.get_state(), default=str).encode()) for w in _states(widget))
    total = state + len(bundle["text/html"].encode()) + len(bundle["text/plain"].encode())
    assert total <= 300_000, total
    assert timeline_svg(t).count('class="pc-replace"') == len(t.bins)  # every marker is still drawn
