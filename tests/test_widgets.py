"""The widgets: pure renderings, live updates during a real run, text forms."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.events import ContextState
from pseudoclaude_nb.messages import Usage
from pseudoclaude_nb.session.timeline import build_timeline
from pseudoclaude_nb.widgets import (
    ContextGauge,
    GaugeState,
    SessionTimeline,
    SpillBrowser,
    UsageCurves,
    gauge_text,
)
from pseudoclaude_nb.widgets.curves import curves_svg
from pseudoclaude_nb.widgets.gauge import gauge_html, gauge_svg
from pseudoclaude_nb.widgets.timeline import timeline_svg


def demo_session(workspace: Path) -> tuple[Agent, list[str]]:
    agent = Agent(
        PseudoClaude(workspace=str(workspace), provider="demo", permission_mode="auto", fsync=False)
    )
    gauge = ContextGauge()
    seen: list[str] = []
    gauge.widget.observe(lambda change: seen.append(change["new"]), names="value")
    summary = agent.run("Add a stats module", listeners=[gauge])
    assert summary.status == "done"
    return agent, seen


def test_gauge_updates_during_one_run_and_ends_with_the_context(workspace: Path) -> None:
    agent, seen = demo_session(workspace)
    estimates = [int(m.group(1)) for v in seen if (m := re.search(r"data-estimated='(\d+)'", v))]
    assert len(set(estimates)) > 5, "the gauge changes with every step"
    assert "compacting…" in " ".join(seen), "it says so while Layer 2 runs"
    final = agent.session.context.state()
    assert f"data-estimated='{final.estimated_tokens}'" in seen[-1]
    assert "data-spills='1'" in seen[-1] and "data-compactions='1'" in seen[-1]
    agent.close()


def test_gauge_text_and_svg_show_marks_anchor_and_breaker() -> None:
    state = GaugeState(
        estimated_tokens=30_000,
        anchor_tokens=20_000,
        context_window=50_000,
        marks=(("Layer 2", 17_000),),
        last_usage=Usage(input_tokens=5, cache_read_input_tokens=19_000, cache_creation_input_tokens=100),
        spills=2,
        compactions=1,
        breaker_open=True,
    )
    text = gauge_text(state)
    assert "~30,000 / 50,000 (60%)" in text and "Layer 2 17,000" in text
    assert "cache read 19,000 / write 100" in text and "breaker OPEN" in text
    bar = text[text.index("▕") + 1 : text.index("▏")]
    assert bar.count("█") == 12 and bar.count("▓") == 6  # 40% measured + 20% estimated of 30 cells
    svg = gauge_svg(state)
    assert 'width="216.0"' in svg and 'width="324.0"' in svg  # anchor and estimate, of a 540-wide bar
    assert ">Layer 2 17,000</text>" in svg and "--jp-error-color1" in svg  # over the line: red


def test_gauge_follows_events() -> None:
    gauge = ContextGauge()
    gauge(ContextState(1000, 900, 10_000, 5_000, False, 0, 0))
    assert gauge.state.estimated_tokens == 1000 and gauge.state.marks == (("Layer 2", 5_000),)
    assert gauge.widget._repr_mimebundle_()["text/plain"].startswith("context ▕")


def test_timeline_marks_the_effective_window_and_replace_reason(workspace: Path) -> None:
    agent, _ = demo_session(workspace)
    timeline = build_timeline(agent.session.dir)
    kinds = [it.kind for it in timeline.items]
    assert kinds.count("replace") == 1 and kinds.count("spill") == 1 and kinds.count("compact") == 1
    replace_at = kinds.index("replace")
    assert not any(it.effective for it in timeline.items[:replace_at])
    assert all(it.effective for it in timeline.items[replace_at:])
    assert timeline.items[replace_at].reason == "compact"
    assert len(timeline.usage_curve) == 11  # one point per step
    svg = timeline_svg(timeline)
    assert svg.count("<polyline") == 1 and "pc-replace" in svg and ">compact</text>" in svg

    widget = SessionTimeline(timeline)
    widget.select(replace_at)
    assert "reason: compact" in widget.detail.value and "ts: 20" in widget.detail.value
    text = widget._repr_mimebundle_()["text/plain"]
    assert text.startswith(f"session {agent.session.id}: {len(timeline.items)} log entries, 15 effective")
    agent.close()


def test_spill_browser_lists_spills_and_shows_the_full_text(workspace: Path) -> None:
    agent, _ = demo_session(workspace)
    browser = SpillBrowser(agent.session.dir)
    (row,) = browser.rows
    assert row["tool"] == "read_file" and row["bytes"] == 110_069
    browser.show(row)
    assert "row 1999" in browser.full.value  # line 2000 of the 110 KB read: the full text, not the preview
    assert "110,069 bytes" in browser._repr_mimebundle_()["text/plain"]
    assert json.loads(json.dumps(browser.rows, default=str))
    agent.close()


def test_usage_curves_compare_sessions_from_their_logs(workspace: Path) -> None:
    agent, _ = demo_session(workspace)
    widget = UsageCurves({"demo": agent.session.dir})
    (points,) = widget.curves.values()
    assert len(points) == 11 and all(p > 0 for p in points)
    text = widget._repr_mimebundle_()["text/plain"]
    assert f"total {sum(points):>9,} tokens" in text and f"peak {max(points):>7,}" in text
    svg = curves_svg({"a": [10, 20, 5], "b": [20, 20, 20]})
    assert svg.count("<polyline") == 2 and "a: 35 total" in svg and "b: 60 total" in svg
    agent.close()


def test_a_picture_is_an_image_of_its_svg_with_a_summary_for_alt() -> None:
    """Saved forms hold no inline SVG (an untrusted notebook's sanitizer strips it): an ``<img>``
    whose data URI is the drawing, with its own text colour and font, and no tooltips."""
    from pseudoclaude_nb.widgets.picture import PICTURE_TEXT, picture
    from tests.picture_support import first_drawing

    svg = gauge_svg(GaugeState(estimated_tokens=20_000, context_window=50_000, marks=(("Layer 2", 17_000),)))
    shown = picture(svg, "context gauge: it's ~20,000 <of> 50,000")
    assert "<svg" not in shown and shown.startswith("<img class='pc-picture'")
    assert "alt='context gauge: it&#x27;s ~20,000 &lt;of&gt; 50,000'" in shown
    assert "width='560' height=" in shown
    drawn = first_drawing(shown)
    assert (
        drawn.startswith(f'<svg style="color:{PICTURE_TEXT};font-family:')
        and ">Layer 2 17,000</text>" in drawn
    )
    timeline_like = (
        '<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"><rect><title>hi</title></rect></svg>'
    )
    assert "<title>" not in first_drawing(picture(timeline_like, "x"))


def test_a_picture_holds_what_an_image_draws() -> None:
    """An image sees no theme: each ``var()`` chain is saved as the value it falls back to, a
    lone fill style as an attribute (not where the shape has a fill already: two would make the
    picture invalid), whole coordinates without ``.0``; nothing else of the drawing changes."""
    from pseudoclaude_nb.widgets.picture import drawn

    svg = (
        '<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="9" height="9">\n'
        '<rect x="1.0" y="2.5" width="3" height="3" style="fill:var(--a, var(--b, rgba(1, 2, 3, 0.5)))"/>\n'
        '<path d="M0 0" fill="none" style="fill:var(--c, #123456);stroke:red"/>'
        '<text x="4.0" style="fill:var(--jp-ui-font-color1, currentColor)">a, b 1.0</text></svg>'
    )
    assert drawn(svg) == (
        '<?xml version="1.0"?><svg style="color:#797979;font-family:system-ui,sans-serif" '
        'xmlns="http://www.w3.org/2000/svg" width="9" height="9">'
        '<rect x="1" y="2.5" width="3" height="3" fill="rgba(1,2,3,0.5)"/>'
        '<path d="M0 0" fill="none" style="fill:#123456;stroke:red"/>'
        '<text x="4" fill="currentColor">a, b 1.0</text></svg>'
    )


# A saved gauge's picture is bytes in the notebook at the end of every run (issue 47: a 13-step
# run's budget is ~13 KB). Drawn as it is now, the most a gauge draws (three limit lines, a
# peak, a measured and an estimated part, labels on two rows) is ~1,420 B of data URL and one
# Layer 2 line ~850 B; the bounds leave ~6 % for a label or an attribute more. The base64 form
# of the same drawings was 3,300 and 1,900 B; one theme var() chain back per element costs
# 60-100 B each (seven elements): either fails here.
GAUGE_PICTURE_MOST, GAUGE_PICTURE_ONE_LINE = 1_500, 900


def test_a_saved_gauge_picture_stays_small() -> None:
    from tests.picture_support import SOURCE, drawing

    limits = (("remind", 152_000), ("base", 167_000), ("hard", 180_000))
    crowded = GaugeState(
        estimated_tokens=152_000,
        anchor_tokens=150_000,
        context_window=200_000,
        marks=limits,
        peak_tokens=181_234,
    )
    compacted = GaugeState(
        estimated_tokens=15_020,
        anchor_tokens=15_020,
        context_window=60_000,
        marks=(("Layer 2", 27_000),),
        peak_tokens=27_749,
        compactions=2,
    )
    for state, bound in ((crowded, GAUGE_PICTURE_MOST), (compacted, GAUGE_PICTURE_ONE_LINE)):
        (src,) = SOURCE.findall(gauge_html(state, saved=True))
        assert len(src.encode()) <= bound, (len(src.encode()), bound)
        drawn = drawing(src)  # still the whole drawing: every label, the peak, the bar
        assert "var(" not in drawn and drawn.count("<text") == len(state.marks) + 1
        assert all(f">{label} {value:,}</text>" in drawn for label, value in state.marks)
        assert f">peak ~{state.peak_tokens:,}</text>" in drawn
    # The crowded one's estimated part shows beside its measured part; the compacted one's is as
    # wide as its measured part and hidden under it: not drawn.
    assert 'class="pc-gauge-suffix"' in drawing(SOURCE.findall(gauge_html(crowded, saved=True))[0])
    assert 'class="pc-gauge-suffix"' not in drawing(SOURCE.findall(gauge_html(compacted, saved=True))[0])


def test_usage_curves_number_their_requests_and_keep_labels_apart() -> None:
    """The x axis says the request numbers the prose names; no drop label overlaps another label."""
    import re

    from pseudoclaude_nb.widgets.curves import CHAR
    from pseudoclaude_nb.widgets.timeline import Drop

    curves = {"compact": [4_000, 12_000, 20_000, 27_000, 14_000, 22_000, 27_700, 15_000]}
    falls = {"compact": [Drop(4, "compact", 27_374, 14_811), Drop(7, "compact", 27_751, 15_000)]}
    svg = curves_svg(curves, falls=falls, marks=[("Layer 2", 27_000), ("remind", 12_000)])
    assert re.findall(r'<text x="[\d.]+" y="\d+">(\d+)</text>', svg) == [str(n) for n in range(1, 9)]
    labels = re.findall(
        r'<text class="pc-(?:drop|mark)-label" x="([\d.]+)" y="([\d.]+)"[^>]*text-anchor="(\w+)"[^>]*>([^<]+)<',
        svg,
    )
    boxes = []
    for x, y, anchor, text in labels:
        w = CHAR * len(text)
        x0 = {"start": float(x), "middle": float(x) - w / 2, "end": float(x) - w}[anchor]
        boxes.append((x0, float(y) - 9, x0 + w, float(y) + 2))
    assert len(boxes) == 4
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
