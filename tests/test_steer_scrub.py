"""The step scrubber (issue 29, part 5): the timeline's slider over a session's steps.

One scripted session through the real magics — a tool call, a crafted prompt, a compaction —
then the widget: each step's view is ``%context --at STEP``'s HTML, each request is read from
the log once however often it is chosen, and ``%sessions show`` adds the scrubber only to a
session that has steps.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from pseudoclaude_nb.magics import context_steps, current_agent
from pseudoclaude_nb.magics import sessions as sessions_magics
from pseudoclaude_nb.session.steps import request_at, scan
from pseudoclaude_nb.session.timeline import build_timeline
from pseudoclaude_nb.widgets import steps as steps_widget
from pseudoclaude_nb.widgets.steps import StepScrubber
from pseudoclaude_nb.widgets.timeline import SessionTimeline
from tests.scripts import run_magic as run
from tests.scripts import turn
from tests.test_steer_steps import Session

CRAFTED = "look \x1b[2J <b>here</b> & there"


@pytest.fixture
def scripted(ip, workspace: Path) -> Session:
    """Steps 1-2: a tool call and its answer; 3: a crafted prompt; a compaction; 4: a question."""
    (workspace / "notes.txt").write_text("".join(f"note {i:05d} " + "x" * 40 + "\n" for i in range(2000)))
    s = Session(ip, workspace)
    ip.run_line_magic("config", "PseudoClaude.spill_bytes = 500000")  # kept in full: the summary frees it
    s.agent("read notes.txt", turn("", ("read_file", {"path": "notes.txt"}, "r1")), turn("read it"))
    s.agent(CRAFTED, turn("answer two " + "words " * 100), summary=True)
    ip.run_line_magic("config", "PseudoClaude.recent_tokens = 50")
    assert "compacted: ~" in run(ip, "compact")
    s.agent("question three", turn("answer three"))
    return s


@pytest.fixture
def counted(monkeypatch) -> Counter:
    """How many times the widget read each step's request from the log."""
    calls: Counter = Counter()

    def counting(path, n=None, *, index=None):
        calls[n] += 1
        return request_at(path, n, index=index)

    monkeypatch.setattr(steps_widget, "request_at", counting)
    return calls


def context_at_html(ip, monkeypatch, n: int) -> str:
    """What ``%context --at n`` displays in a notebook, as HTML."""
    shown: list = []
    monkeypatch.setattr(context_steps, "in_notebook", lambda shell: True)
    monkeypatch.setattr(context_steps, "display", lambda data, raw=False: shown.append(data))
    run(ip, f"context --at {n}")
    [bundle] = shown
    return bundle["text/html"]


def test_the_slider_shows_each_steps_request_as_context_at_does(
    scripted: Session, counted: Counter, monkeypatch
) -> None:
    ip, path = scripted.ip, scripted.dir
    steps = len(scan(path).steps)
    assert steps == len(scripted.sent) == 4
    widget = SessionTimeline(
        build_timeline(path), steps=True, now=context_steps.now_tokens(current_agent(ip))
    )
    scrubber = widget.scrubber
    assert isinstance(scrubber, StepScrubber) and scrubber in widget.children
    assert (scrubber.slider.min, scrubber.slider.max, scrubber.slider.value) == (1, steps, steps)
    assert not scrubber.slider.continuous_update  # a replay when let go, not one per step passed
    assert counted == {steps: 1}  # it opens at the last step; nothing else is read yet
    for n in [*range(1, steps + 1), *range(steps, 0, -1)]:
        scrubber.slider.value = n
        page = context_at_html(ip, monkeypatch, n)
        assert scrubber.request.value == page, f"step {n}"
        req = request_at(path, n)
        noun = "message" if len(req.rows) == 1 else "messages"
        line = f"step {n} of {steps} — {len(req.rows)} {noun}, ~{req.tokens:,} tokens"
        assert scrubber.label.value == f"<small>{line}</small>"
        bundle = widget._repr_mimebundle_()
        assert bundle["text/plain"].endswith("\n" + line) and bundle["text/html"].endswith(page)
        assert scrubber._repr_mimebundle_()["text/plain"] == line
    assert counted == dict.fromkeys(range(1, steps + 1), 1)  # each step read once, however often shown
    # After the compaction the summary is what step 4 received; step 3 still had the crafted prompt.
    assert "[compact]" in scrubber.view(4).html and "[compact]" not in scrubber.view(3).html
    page = scrubber.view(3).html
    assert "look \\x1b[2J &lt;b&gt;here&lt;/b&gt; &amp; there" in page
    assert "<b>here</b>" not in page and "\x1b" not in page


def test_choosing_a_usage_entry_moves_the_slider_to_its_step(scripted: Session, counted: Counter) -> None:
    timeline = build_timeline(scripted.dir)
    widget = SessionTimeline(timeline, steps=True)
    (second, _tokens) = timeline.usage[1]
    widget.select(second)
    assert widget.scrubber.slider.value == 2 and "step 2 of 4" in widget.scrubber.label.value
    assert "usage" in widget.detail.value  # the entry itself still shows, as before
    widget.select(0)  # not a usage entry: the slider stays
    assert widget.scrubber.slider.value == 2
    assert counted == {4: 1, 2: 1}


def test_the_timeline_numbers_its_usage_entries_as_context_at_does(scripted: Session) -> None:
    timeline = build_timeline(scripted.dir)
    labelled = [item for item in timeline.items if item.kind == "usage"]
    steps = scan(scripted.dir).steps
    assert [item.label.split(" · ")[0] for item in labelled] == [f"step {s.number}" for s in steps]
    assert [item.line for item in labelled] == [s.line for s in steps]
    # Read one at a time, from the end, the numbers are the same.
    last = timeline.read([timeline.usage[-1][0]])[0]
    assert last.label.startswith(f"step {len(steps)} · usage ")


def test_sessions_show_adds_the_scrubber_only_to_a_session_with_steps(scripted: Session, monkeypatch) -> None:
    ip = scripted.ip
    shown: list = []
    monkeypatch.setattr(sessions_magics, "in_notebook", lambda shell: True)
    monkeypatch.setattr(sessions_magics, "display", lambda obj, *a, **k: shown.append(obj))
    run(ip, "sessions show")
    [widget] = shown
    assert isinstance(widget, SessionTimeline) and widget.scrubber is not None
    assert widget.scrubber.slider.max == widget.scrubber.slider.value == 4
    assert widget._repr_mimebundle_()["text/plain"].endswith(widget.scrubber.text())
    assert "step 4 of 4 — " in widget.scrubber.text()
    assert widget.scrubber.request.value == context_at_html(ip, monkeypatch, 4)  # today's NOW figures too
    # A fork at step 2 is a new session with no model response of its own yet: no steps.
    source = current_agent(ip).session.id
    assert "→ new session" in run(ip, f"sessions fork {source} --at 2")
    assert current_agent(ip).session.id != source
    shown.clear()
    run(ip, "sessions show")
    [widget] = shown
    assert isinstance(widget, SessionTimeline) and widget.scrubber is None
    assert not any(isinstance(c, StepScrubber) for c in widget.children)
    assert "step " not in widget._repr_mimebundle_()["text/plain"].splitlines()[-1]


def test_a_scrubber_without_steps_says_so(tmp_path: Path, counted: Counter) -> None:
    (tmp_path / "conversation.jsonl").write_bytes(b"")  # a log the provider never answered
    scrubber = StepScrubber(tmp_path)
    assert scrubber.steps == 0 and scrubber.current is None and scrubber.request.value == ""
    assert scrubber._repr_mimebundle_()["text/plain"] == "no steps yet: no model response is logged"
    assert "no steps yet" in scrubber.label.value and not counted
