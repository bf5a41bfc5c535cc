"""``%sessions show`` of a session whose effective state is long (issue 48).

A session that never compacted (resumed from before compaction existed, or imported) has all
its messages in its effective state. ``show`` lists the first and last 20: it reads those by
offset through the session's timeline instead of replaying every message, and lists exactly
what the replay would. Its timeline's step scrubber does not read the last step's request (the
whole session) until a step is chosen, and its timeline's output stays bounded whatever the
log's length: a picture of 200 columns with at most 50 tooltips, the first and last entries in
its text forms with where the rest is, pages of 40.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.logs import build_session
from pseudoclaude_nb.magics import sessions as sessions_magics
from pseudoclaude_nb.session import loader
from pseudoclaude_nb.session.timeline import build_timeline
from pseudoclaude_nb.widgets import steps as steps_widget
from pseudoclaude_nb.widgets import timeline as timeline_widget
from pseudoclaude_nb.widgets.timeline import SessionTimeline
from tests.scripts import run_magic as run


@pytest.fixture(scope="module")
def long_session(tmp_path_factory) -> tuple[Path, str, int]:
    ws = tmp_path_factory.mktemp("long")
    built = build_session(ws, messages=1_500)
    return ws, built.path.parent.name, built.physical_messages


def test_show_lists_what_a_replay_lists_without_replaying(ip, long_session, monkeypatch) -> None:
    ws, sid, count = long_session
    ip.run_line_magic("config", f"PseudoClaude.workspace = {str(ws)!r}")
    lines = [f"sessions show {sid}", f"sessions show {sid} --tail 7", f"sessions show {sid} --limit 3"]
    monkeypatch.setattr(sessions_magics, "READ_BY_OFFSET", 10**9)  # the replay, as before
    replayed = [run(ip, line) for line in lines]
    monkeypatch.setattr(sessions_magics, "READ_BY_OFFSET", 1_000)

    def no_load(*args, **kwargs):
        raise AssertionError("show replayed the whole effective state")

    monkeypatch.setattr(loader, "load_session", no_load)
    assert [run(ip, line) for line in lines] == replayed
    assert f"{count} effective messages of {count} logged" in replayed[0]
    assert f"… {count - 40:,} more messages" in replayed[0]
    # In a notebook the timeline below it is the one the rows were read through, binned in full.
    shown: list = []
    monkeypatch.setattr(sessions_magics, "in_notebook", lambda shell: True)
    monkeypatch.setattr(sessions_magics, "display", lambda obj, *a, **k: shown.append(obj))
    run(ip, f"sessions show {sid}")
    widget = shown[-1]
    assert isinstance(widget, SessionTimeline) and len(widget.timeline.bins) == 200


def test_show_replays_when_the_sidecar_reports_a_problem(ip, tmp_path: Path, monkeypatch) -> None:
    built = build_session(tmp_path, messages=1_200)
    with built.path.open("ab") as f:
        f.write(b'{"v":1,"type":"message", cut\n')  # an unreadable line: the state is not plainly its lines
    ip.run_line_magic("config", f"PseudoClaude.workspace = {str(tmp_path)!r}")
    calls = []
    real = loader.load_session
    monkeypatch.setattr(loader, "load_session", lambda *a, **k: calls.append(1) or real(*a, **k))
    out = run(ip, f"sessions show {built.path.parent.name}")
    assert calls and "unreadable" in out


def test_the_scrubber_reads_a_long_last_request_only_when_chosen(long_session, monkeypatch) -> None:
    ws, sid, _ = long_session
    asked: list = []
    real = steps_widget.request_at
    monkeypatch.setattr(
        steps_widget, "request_at", lambda path, n, index=None: asked.append(n) or real(path, n, index=index)
    )
    now_asked: list = []
    timeline = build_timeline(ws / ".pseudoclaude" / "sessions" / sid)
    widget = SessionTimeline(timeline, steps=True, now=lambda: now_asked.append(1) or None)
    scrubber = widget.scrubber
    assert scrubber is not None and asked == [] and now_asked == []  # nothing read at open
    last = scrubber.steps
    assert scrubber.text().startswith(f"step {last} of {last} — ") and "%context --at" in scrubber.text()
    assert widget._repr_mimebundle_()["text/plain"].endswith(scrubber.text())
    scrubber.slider.value = 2  # a short request: read when chosen, with today's NOW figures asked once
    assert asked == [2] and now_asked == [1] and "step 2 of" in scrubber.label.value
    scrubber.slider.value = last
    assert asked == [2, last] and now_asked == [1]
    assert f"step {last} of {last} — " in scrubber.text() and "messages, ~" in scrubber.text()


def test_a_long_sessions_timeline_output_is_bounded_and_says_where_the_rest_is(long_session) -> None:
    ws, sid, _ = long_session
    t = build_timeline(ws / ".pseudoclaude" / "sessions" / sid)
    widget = SessionTimeline(t, steps=True)
    bundle = widget._repr_mimebundle_()
    assert t.count > 2_000 and len(t.bins) == 200
    # The picture: 200 columns, at most TIPS tooltips (a few columns each); the list: its first
    # and last entries, and where the others are.
    assert widget._svg.count("<title>") <= timeline_widget.TIPS + 10 and len(widget._svg) < 30_000
    text = bundle["text/plain"].splitlines()
    listed = [line for line in text if line[:1] in ("▶", " ") and line[2:7].strip().isdigit()]
    assert len(listed) == timeline_widget.TEXT_LIMIT
    assert any(f"… {t.count - timeline_widget.TEXT_LIMIT:,} more entries" in line for line in text)
    assert f".pseudoclaude/sessions/{sid}/conversation.jsonl" in bundle["text/plain"]
    assert len(widget.entries.options) <= timeline_widget.PAGE
    assert len(bundle["text/html"]) < 40_000 and len(bundle["text/plain"]) < 8_000
