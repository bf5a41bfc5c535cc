"""The session timeline: the physical log in order, the effective window highlighted.

An inline SVG overview (one tick per entry, replace markers with their reason, spills,
the tokens-per-step curve) above a list of entries; choosing an entry shows its content.
Only core ipywidgets (HTML, Select, VBox), so it renders wherever widgets do.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from typing import Any

import ipywidgets

from ..session.timeline import Item, Timeline
from .theme import BRAND, ERROR, FG1, FG2, MONO, WARN, fill, stroke

COLORS = {
    "user": "#2e7d32",
    "assistant": "#1565c0",
    "tool_call": "#6a1b9a",
    "tool_result": "#8e24aa",
    "spill": "#ef6c00",
    "usage": "#9e9e9e",
    "replace": "#c62828",
    "compact": "#c62828",
    "rollover": "#ad1457",
    "note": "#795548",
    "bad": "#757575",
}
ROWS = ["user", "assistant", "tool_call", "tool_result", "spill"]


def timeline_svg(t: Timeline, width: int = 720) -> str:
    n = max(len(t.items), 1)
    left, right = 80, 10
    span = width - left - right
    curve_top, curve_h = 8, 50
    rows_top = curve_top + curve_h + 14
    row_h = 14
    height = rows_top + row_h * len(ROWS) + 18

    def x(i: int) -> float:
        return left + span * (i + 0.5) / n

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="pc-timeline-svg" '
        f'role="img" aria-label="session {html.escape(t.session_id)}: {len(t.items)} log entries">'
    ]
    effective = [i for i, it in enumerate(t.items) if it.effective]
    if effective:
        x0 = left + span * effective[0] / n
        out.append(
            f'<rect class="pc-effective" x="{x0:.1f}" y="{rows_top - 4}" width="{left + span - x0:.1f}" '
            f'height="{row_h * len(ROWS) + 4}" {fill(BRAND, 0.12)}><title>effective window: what the model '
            f"sees next ({t.effective_messages} messages)</title></rect>"
        )
    for r, name in enumerate(ROWS):
        out.append(
            f'<text class="pc-row-label" x="{left - 6}" y="{rows_top + r * row_h + 9}" font-size="10" '
            f'text-anchor="end" {fill(FG1)}>{name.replace("_", " ")}</text>'
        )
    curve = t.usage_curve
    peak = max((tok for _, tok in curve), default=0)
    if curve and peak:
        pts = " ".join(f"{x(i):.1f},{curve_top + curve_h - curve_h * tok / peak:.1f}" for i, tok in curve)
        out.append(
            f'<polyline class="pc-curve" points="{pts}" fill="none" {stroke(FG2, "stroke-width:1.5")}/>'
        )
        for i, tok in curve:
            out.append(
                f'<circle cx="{x(i):.1f}" cy="{curve_top + curve_h - curve_h * tok / peak:.1f}" r="2.5" '
                f'{fill(FG2)}><title>step usage: {tok:,} tokens</title></circle>'
            )
        out.append(
            f'<text class="pc-axis-label" x="{left - 6}" y="{curve_top + 8}" font-size="10" text-anchor="end" '
            f"{fill(FG1)}>{peak:,}</text>"
        )
        out.append(
            f'<text class="pc-axis-label" x="{left - 6}" y="{curve_top + curve_h}" font-size="10" '
            f'text-anchor="end" {fill(FG1)}>tokens/step</text>'
        )
    for i, it in enumerate(t.items):
        title = f"<title>#{it.line} {html.escape(it.label)}</title>"
        if it.kind in ("replace", "compact", "rollover"):
            if it.kind == "replace":
                out.append(
                    f'<line class="pc-replace" x1="{x(i):.1f}" y1="{curve_top}" x2="{x(i):.1f}" '
                    f'y2="{rows_top + row_h * len(ROWS)}" {stroke(ERROR, "stroke-width:2")}>{title}</line>'
                )
                out.append(
                    f'<text class="pc-replace-label" x="{x(i) + 3:.1f}" y="{height - 4}" font-size="10" {fill(ERROR)}>'
                    f"{html.escape(it.reason)}</text>"
                )
            continue
        if it.kind not in ROWS:
            continue
        y = rows_top + ROWS.index(it.kind) * row_h
        color = COLORS[it.kind]
        opacity = "1" if it.effective else "0.35"
        out.append(
            f'<rect class="pc-item pc-{it.kind}" x="{x(i) - 2:.1f}" y="{y}" width="4" height="10" '
            f'fill="{color}" fill-opacity="{opacity}">{title}</rect>'
        )
        if it.images:  # issue-14: a message with image parts gets a dot above its mark
            out.append(
                f'<circle class="pc-image-mark" cx="{x(i):.1f}" cy="{y - 2}" r="2" {fill(WARN)}>{title}</circle>'
            )
    out.append("</svg>")
    return "".join(out)


def timeline_text(t: Timeline) -> str:
    lines = [f"session {t.session_id}: {len(t.items)} log entries, {t.effective_messages} effective messages"]
    lines += [f"! {p}" for p in t.problems]
    for it in t.items:
        mark = "▶" if it.effective else " "
        lines.append(f"{mark} {it.line:>5}  {it.kind:<11} {it.label}")
    return "\n".join(lines)


ENTRY_KINDS = ("replace", "spill", "usage", "compact", "rollover", "note")


def readable_detail(it: Item) -> str:
    """An entry's content for a person: log entries as ``key: value`` lines, times as dates."""
    if it.kind not in ENTRY_KINDS:
        return it.detail
    try:
        entry = json.loads(it.detail)
    except ValueError:
        return it.detail
    if not isinstance(entry, dict):
        return it.detail
    lines = []
    for key, value in entry.items():
        if key == "ts" and isinstance(value, (int, float)):
            value = dt.datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M:%S")
        elif isinstance(value, (dict, list)):
            value = json.dumps(value, ensure_ascii=False)
        lines.append(f"{key}: {value}")
    return "\n".join(lines)


def _detail_html(it: Item) -> str:
    detail = readable_detail(it)
    text = detail if len(detail) <= 20_000 else detail[:20_000] + f"\n… ({len(detail):,} characters)"
    return (
        f"<div class='pc-detail'><b>line {it.line} · {html.escape(it.kind)}</b>"
        f"<pre style='max-height:24em;overflow:auto;white-space:pre-wrap'>{html.escape(text)}</pre></div>"
    )


# The entry list in the code font, inside the output's width (a 100% list plus its border is cut).
LIST_CSS = (
    "<style>.pc-timeline-list select{font-family:" + MONO + ";font-size:12px}"
    ".pc-timeline-list{box-sizing:border-box;max-width:100%}</style>"
)


def _option(it: Item) -> str:
    return f"{it.line:>5} {'▶' if it.effective else ' '} {it.kind:<11} {it.label}"


class SessionTimeline(ipywidgets.VBox):
    def __init__(self, timeline: Timeline, **kwargs: Any) -> None:
        self.timeline = timeline
        self.overview = ipywidgets.HTML(
            value=f"{LIST_CSS}<div class='pc-timeline'>{timeline_svg(timeline)}</div>"
        )
        options = [(_option(it), i) for i, it in enumerate(timeline.items)]
        self.entries = ipywidgets.Select(
            options=options, rows=min(12, max(len(options), 1)), layout={"width": "calc(100% - 8px)"}
        )
        self.entries.add_class("pc-timeline-list")
        self.detail = ipywidgets.HTML(value="<i>choose an entry to see its content</i>")
        self.entries.observe(self._show, names="value")
        super().__init__(children=[self.overview, self.entries, self.detail], **kwargs)
        # Open where the effective window starts (what the model sees next), not at entry 1.
        start = next((i for i, it in enumerate(timeline.items) if it.effective), None)
        if start is not None:
            self.select(start)

    def select(self, index: int) -> None:
        self.entries.value = index

    def _show(self, change: dict[str, Any]) -> None:
        index = change["new"]
        if index is not None:
            self.detail.value = _detail_html(self.timeline.items[index])

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = timeline_text(self.timeline)
        bundle["text/html"] = timeline_html(self.timeline)
        return bundle


def timeline_html(t: Timeline, limit: int = 400) -> str:
    """The saved-notebook form: the overview picture and the entry list as text."""
    rows = [_option(it) for it in t.items[:limit]]
    if len(t.items) > limit:
        rows.append(f"… {len(t.items) - limit:,} more entries")
    return (
        f"<div class='pc-timeline-static'>{timeline_svg(t)}"
        f"<pre style='max-height:16em;overflow:auto;font-size:85%'>{html.escape(chr(10).join(rows))}</pre></div>"
    )
