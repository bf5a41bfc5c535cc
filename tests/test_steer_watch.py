"""Watching it happen (issue 29, part 8): the peak, the line and the drop stay in the picture.

The gauge keeps the run's peak estimate (a tick and "peak ~N") and says "compacting…" from
CompactStarted until Compacted; the timeline and ``UsageCurves`` draw the strategy's line
and each compaction or rollover as a drop labelled before → after; the demo's summary
request takes long enough for a person to see "compacting…" unless the pace is 0.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.events import (
    Compacted,
    CompactStarted,
    ContextState,
    RolloverCommitted,
    RunFinished,
    RunSummary,
    Spilled,
    StepFinished,
)
from pseudoclaude_nb.messages import Message, Usage
from pseudoclaude_nb.providers import make_provider
from pseudoclaude_nb.providers.base import Request
from pseudoclaude_nb.providers.demo_script import DEMO_SUMMARY_SECONDS
from pseudoclaude_nb.session.timeline import build_timeline
from pseudoclaude_nb.widgets import ContextGauge, UsageCurves
from pseudoclaude_nb.widgets.curves import curves_svg
from pseudoclaude_nb.widgets.timeline import SessionTimeline, drops, timeline_svg

LINE = (("Layer 2", 17_000),)


def state(estimated: int, anchor: int | None = None, marks=LINE, **kw) -> ContextState:
    return ContextState(
        estimated,
        estimated if anchor is None else anchor,
        50_000,
        marks[-1][1],
        False,
        1,
        0,
        marks=marks,
        **kw,
    )


def test_gauge_keeps_compacting_until_compacted_then_marks_the_peak_and_the_line() -> None:
    gauge = ContextGauge()
    values: list[str] = []
    gauge.widget.observe(lambda change: values.append(change["new"]), names="value")
    for estimated in (3_000, 12_046):
        gauge(state(estimated))
    gauge(state(20_150, anchor=12_046))
    gauge(CompactStarted("auto", 20_150))
    started = len(values)
    # Whatever arrives while the summary request runs, the gauge keeps saying so.
    gauge(state(20_150, anchor=12_046))
    gauge(Spilled("call_1", "read_file", "x.txt", 60_000, "single"))
    gauge(StepFinished(7, Usage(input_tokens=12_000), Message(role="assistant", content="paging on")))
    during = values[started - 1 :]
    assert len(during) >= 3
    assert all("data-status='compacting…'" in v and "<b>compacting…</b>" in v for v in during)
    assert gauge.widget.text.endswith("· compacting…")

    gauge(Compacted("auto", 20_150, 10_457, ok=True))
    after = gauge.widget.value
    assert "compacting…" not in after and "compacting…" not in gauge.widget.text
    # The peak: a tick on the bar and its label, over the line (red), the line still drawn.
    assert "data-peak='20150'" in after and "data-estimated='10457'" in after
    tick = re.search(
        r'<rect class="pc-gauge-peak" x="([\d.]+)"[^>]*style="fill:var\(--jp-error-color1', after
    )
    assert tick, "a red tick: the peak crossed the line"
    assert float(tick.group(1)) + 1 == pytest.approx(10 + 540 * 20_150 / 50_000, abs=0.1)
    assert ">peak ~20,150</text>" in after and ">Layer 2 17,000</text>" in after
    assert "<title>" not in after  # a sanitized view would print each title beside its label
    assert "compacted ~20,150 → ~10,457" in after
    text = gauge.widget.text
    assert "~10,457 / 50,000 (21%) · peak ~20,150 · Layer 2 17,000 · compacted ~20,150 → ~10,457" in text

    # A lower estimate later does not lower the peak; the finished run's gauge keeps it.
    gauge(state(10_900))
    gauge(RunFinished(RunSummary(status="done")))
    assert "data-peak='20150'" in gauge.widget.value and ">peak ~20,150</text>" in gauge.widget.value
    assert gauge.widget._repr_mimebundle_()["text/plain"] == gauge.widget.text


def test_a_failed_compaction_is_no_drop_and_no_peak_below_the_estimate() -> None:
    gauge = ContextGauge()
    gauge(state(9_000))
    gauge(CompactStarted("auto", 9_000))
    gauge(Compacted("auto", 9_000, 9_000, ok=False, error="empty summary"))
    assert "pc-gauge-peak" not in gauge.widget.value and "peak ~" not in gauge.widget.text
    assert "compacted ~" not in gauge.widget.text and gauge.state.status == "running"


def test_a_gauge_that_sees_only_the_end_of_a_compaction_still_marks_its_peak() -> None:
    gauge = ContextGauge()
    gauge(state(9_000))
    gauge(Compacted("manual", 21_000, 8_000, ok=True))
    assert gauge.state.peak_tokens == 21_000 and ">peak ~21,000</text>" in gauge.widget.value


def test_rollover_gauge_keeps_its_three_marks_the_peak_and_the_handoff() -> None:
    limits = (("remind", 12_000), ("base", 27_000), ("hard", 40_000))
    gauge = ContextGauge()
    gauge(state(15_200, marks=limits, strategy="rollover"))  # the last estimate before the handoff
    gauge(RolloverCommitted("model", 19_336, 3_592, "s1", "m1", 1))
    gauge(state(3_600, marks=limits, strategy="rollover"))
    value = gauge.widget.value
    for label, tokens in limits:
        assert f">{label} {tokens:,}</text>" in value
    assert ">peak ~19,336</text>" in value and "rolled over ~19,336 → ~3,592" in gauge.widget.text


def demo_run(workspace: Path, strategy: str = "compact") -> Agent:
    agent = Agent(
        PseudoClaude(
            workspace=str(workspace), provider="demo", permission_mode="auto", fsync=False, strategy=strategy
        )
    )
    assert agent.run("Add a stats module").status == "done"
    return agent


def _compact_entry(session_dir: Path) -> dict:
    entries = [json.loads(line) for line in (session_dir / "conversation.jsonl").read_text().splitlines()]
    (entry,) = [e for e in entries if e.get("type") == "compact"]
    return entry


def test_timeline_draws_the_line_and_the_compaction_as_a_labelled_drop(workspace: Path) -> None:
    agent = demo_run(workspace)
    entry = _compact_entry(agent.session.dir)
    before, after = entry["before_tokens"], entry["after_tokens"]
    assert before > 17_000 > after
    t = build_timeline(agent.session.dir)
    (drop,) = drops(t)
    assert (drop.kind, drop.before, drop.after) == ("compact", before, after)
    assert t.kind(drop.index) == "replace"  # drawn at its replace marker
    marks = agent.session.context.state().marks
    svg = timeline_svg(t, marks=marks)
    assert svg.count('class="pc-mark"') == 1 and "<title>Layer 2: 17,000 tokens</title>" in svg
    assert ">Layer 2 17,000</text>" in svg
    assert svg.count('class="pc-drop"') == 1 and f">~{before:,} → ~{after:,}</text>" in svg
    # The scale holds the drop's top: the axis reads its "before", above every usage point.
    assert f">{before:,}</text>" in svg
    y1, y2 = map(
        float, re.search(r'class="pc-drop" x1="[\d.]+" y1="([\d.]+)" x2="[\d.]+" y2="([\d.]+)"', svg).groups()
    )
    assert y1 < y2  # drawn downwards: before above after
    widget = SessionTimeline(t, marks=marks)
    assert 'class="pc-mark"' in widget.overview.value and 'class="pc-drop"' in widget.overview.value
    agent.close()


def test_usage_curves_draw_the_line_and_each_sessions_drop(workspace: Path) -> None:
    compact = demo_run(workspace)
    rollover = demo_run(workspace, "rollover")
    marks = compact.session.context.state().marks
    widget = UsageCurves({"compact": compact.session.dir, "rollover": rollover.session.dir}, marks=marks)
    (c,) = widget.drops["compact"]
    (r,) = widget.drops["rollover"]
    entry = _compact_entry(compact.session.dir)
    assert (c.kind, c.before, c.after) == ("compact", entry["before_tokens"], entry["after_tokens"])
    assert r.kind == "rollover" and r.before > r.after
    # Between the request before it and the one after: the usage points either side.
    points = widget.curves["compact"]
    assert points[c.index - 1] > points[c.index]
    svg = widget.value
    assert svg.count('class="pc-drop"') == 2 and svg.count('class="pc-mark"') == 1
    assert f">{c.label}</text>" in svg and f">{r.label}</text>" in svg
    assert f">{max(c.before, max(points)):,}</text>" in svg  # the scale's top
    text = widget._repr_mimebundle_()["text/plain"]
    assert f"compacted before step {c.index + 1}: ~{c.before:,} → ~{c.after:,}" in text
    assert f"rolled over before step {r.index + 1}: {r.label}" in text
    assert text.endswith("lines: Layer 2 17,000")
    compact.close()
    rollover.close()


def test_curves_scale_holds_the_line_above_every_point() -> None:
    svg = curves_svg({"a": [10, 20, 5]}, marks=(("Layer 2", 40),))
    assert ">40</text>" in svg and ">Layer 2 40</text>" in svg
    line_y = float(re.search(r'class="pc-mark" x1="60" y1="([\d.]+)"', svg).group(1))
    assert line_y == pytest.approx(18)  # at the top of the plot: the highest value drawn


def _summary_request() -> Request:
    return Request(
        system="Summarize.",
        messages=[Message(role="user", content="Summarize the conversation so far.")],
        purpose="summary",
    )


def test_demo_summary_request_takes_its_pace_and_none_at_pace_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PSEUDOCLAUDE_DEMO_PACE", "0.001")
    provider = make_provider("demo")
    started = time.monotonic()
    provider.complete(_summary_request())
    assert time.monotonic() - started >= DEMO_SUMMARY_SECONDS >= 1.0

    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    monkeypatch.setenv("PSEUDOCLAUDE_DEMO_PACE", "0")
    make_provider("demo").complete(_summary_request())
    assert slept == []  # the test suite's setting: no wait at all


def test_demo_run_shows_compacting_for_at_least_a_second(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PSEUDOCLAUDE_DEMO_PACE", "0.0001")  # paced, yet the text streams fast
    agent = Agent(
        PseudoClaude(workspace=str(workspace), provider="demo", permission_mode="auto", fsync=False)
    )
    gauge = ContextGauge(live=True)
    shown: list[tuple[float, str]] = []

    class Shown:  # the live gauge's output: each state sent to the front end
        def update(self, data: dict, raw: bool = False) -> None:
            shown.append((time.monotonic(), gauge.state.status))

    gauge.handle = Shown()
    assert agent.run("Add a stats module", listeners=[gauge]).status == "done"
    start = next(t for t, status in shown if status == "compacting…")
    end = next(t for t, status in shown if t > start and status != "compacting…")
    assert end - start >= 1.0, f'"compacting…" was on the gauge for {end - start:.2f} s'
    assert gauge.state.peak_tokens > 17_000 > gauge.state.estimated_tokens
    agent.close()
