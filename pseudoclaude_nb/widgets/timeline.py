"""The session timeline: the physical log in order, the effective window highlighted.

An inline SVG overview (binned: at most 200 columns of counts per kind, replace markers with
their reason, spills, the tokens-per-step curve with the strategy's lines and each compaction
or rollover drawn as a drop, before → after) above a page of entries; choosing an entry
reads it from the log by its offset and shows its content. Picture and widget state stay
bounded at any log size.
With ``steps=True`` a step scrubber (``widgets.steps``) sits below: a slider over the
session's steps showing the request of the chosen one, as ``%context --at STEP`` does;
choosing a usage entry in the list moves it to that step.
Only core ipywidgets (HTML, Select, IntSlider, VBox), so it renders wherever widgets do.
"""

from __future__ import annotations

import bisect
import datetime as dt
import html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ipywidgets

from ..session.timeline import Timeline
from ..session.timeline.items import KINDS, Item
from ..textsafe import printable
from .picture import picture
from .settle import Settles
from .steps import Now, StepScrubber
from .theme import BRAND, ERROR, FG1, FG2, MONO, WARN, fill, spaced, stroke

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

Marks = Sequence[tuple[str, int]]  # (label, tokens): the Layer 2 line, or rollover's limits
Scale = Callable[[int], float]  # a bin or a token count to its place in the picture


@dataclass(frozen=True)
class Drop:
    """A compaction or rollover commit of the log: where the estimate stood before and after."""

    # Where it happened: in a timeline its replace marker (the compact or rollover entry follows
    # the snapshot); in UsageCurves the request it came before (0-based).
    index: int
    kind: str  # compact | rollover
    before: int
    after: int

    @property
    def label(self) -> str:
        return f"~{self.before:,} → ~{self.after:,}"


MAX_DROPS = 200  # drops read from a log (one read each); a longer run's later ones are left out
DETAILED_DROPS = 24  # up to this many, each drop is its own titled line and dot; past it, one path


def drops(t: Timeline) -> list[Drop]:
    """The log's successful compactions and rollover commits, read by offset (only those entries)."""
    at: list[int] = []
    for kind in ("compact", "rollover"):
        code, i = KINDS.index(kind), -1
        while len(at) < 2 * MAX_DROPS and (i := t.kinds.find(code, i + 1)) >= 0:
            at.append(i)
    out = []
    replaces = sorted(t.reasons)
    for it, index in zip(t.read(sorted(at)[:MAX_DROPS]), sorted(at)[:MAX_DROPS], strict=True):
        try:
            entry = json.loads(it.detail)
        except ValueError:
            continue
        before, after = entry.get("before_tokens"), entry.get("after_tokens")
        if it.kind == "compact" and not entry.get("ok"):
            continue  # a failed compaction replaced nothing: no drop
        if it.kind == "rollover" and entry.get("phase") != "commit":
            continue
        if type(before) is int and type(after) is int and before >= 0 and after >= 0:
            r = bisect.bisect_left(replaces, index)
            out.append(Drop(replaces[r - 1] if r else index, it.kind, before, after))
    return out


def timeline_svg(t: Timeline, width: int = 720, marks: Marks = ()) -> str:
    """The overview: at most ``session.timeline.BINS`` columns of counts, whatever the log's size.

    ``marks``: the strategy's lines (a session's log does not record them), drawn across the
    curve; each drop of the log is drawn where it happened, labelled before → after.
    """
    bins = t.bins
    n = max(len(bins), 1)
    left, right = 80, 10
    span = width - left - right
    curve_top, curve_h = 8, 50
    rows_top = curve_top + curve_h + 14
    row_h = 14
    height = rows_top + row_h * len(ROWS) + 18
    bar = max(1.0, min(4.0, span / n - 0.5))

    def x(b: int) -> float:
        return left + span * (b + 0.5) / n

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'class="pc-timeline-svg" '
        f'role="img" aria-label="session {html.escape(t.session_id)}: {t.count} log entries">'
    ]
    first_eff = next((b for b, bn in enumerate(bins) if bn.effective), None)
    if first_eff is not None:
        x0 = left + span * first_eff / n
        out.append(
            f'<rect class="pc-effective" x="{x0:.1f}" y="{rows_top - 4}" width="{left + span - x0:.1f}" '
            f'height="{row_h * len(ROWS) + 4}" {fill(BRAND, 0.12)}><title>effective window: what the model '
            f"sees next ({t.effective_messages} messages)</title></rect>"
        )
    # One group carries what the row labels share.
    out.append(f'<g font-size="10" text-anchor="end" {fill(FG1)}>')
    for r, name in enumerate(ROWS):
        out.append(
            f'<text class="pc-row-label" x="{left - 6}" y="{rows_top + r * row_h + 9}">{name.replace("_", " ")}</text>'
        )
    out.append("</g>")
    curve = [(b, bn.peak_tokens) for b, bn in enumerate(bins) if bn.peak_tokens]
    fallen = drops(t) if curve else []
    # The scale holds the lines and the drops' "before" too: the line a run crossed is in the picture.
    peak = max([tok for _, tok in curve] + [v for _, v in marks] + [d.before for d in fallen], default=0)

    def cy(tok: int) -> float:
        return curve_top + curve_h - curve_h * tok / peak

    if curve and peak:
        out.extend(_lines_and_drops(marks, fallen, [bn.first for bn in bins], x, cy, left + span))
        pts = " ".join(f"{x(b):.1f},{cy(tok):.1f}" for b, tok in curve)
        out.append(
            f'<polyline class="pc-curve" points="{pts}" fill="none" {stroke(FG2, "stroke-width:1.5")}/>'
        )
        # The points are one path of round dots (a zero-length stroke each, a few bytes a
        # point); their figures are in the tooltip of each bin's column, drawn last.
        dots = "".join(f"M{x(b):.1f} {cy(tok):.1f}h0" for b, tok in curve)
        out.append(
            f'<path class="pc-usage-points" d="{dots}" fill="none" '
            f"{stroke(FG2, 'stroke-width:5;stroke-linecap:round')}/>"
        )
        out.append(
            f'<text class="pc-axis-label" x="{left - 6}" y="{curve_top + 8}" font-size="10" text-anchor="end" '
            f"{fill(FG1)}>{peak:,}</text>"
        )
        out.append(
            f'<text class="pc-axis-label" x="{left - 6}" y="{curve_top + curve_h}" font-size="10" '
            f'text-anchor="end" {fill(FG1)}>tokens/step</text>'
        )
    kind_paths: dict[tuple[str, bool], list[str]] = {}  # (kind, effective): the path of its marks
    strips: list[str] = []
    w = f"{bar:.1f}"
    replace_lines: list[str] = []
    replace_labels: list[str] = []
    label_free = 0.0  # where the next replace label may start
    for b, bn in enumerate(bins):
        where = f"#{bn.first_line}" if bn.first_line == bn.last_line else f"#{bn.first_line}–{bn.last_line}"
        if bn.replaces:
            reasons = ", ".join(bn.replaces)
            replace_lines.append(
                f'<line class="pc-replace" x1="{x(b):.1f}" y1="{curve_top}" x2="{x(b):.1f}" '
                f'y2="{rows_top + row_h * len(ROWS)}"><title>{where} replace ({html.escape(reasons)})</title></line>'
            )
            if x(b) >= label_free:  # labels that would overlap the one before are left out
                replace_labels.append(
                    f'<text class="pc-replace-label" x="{x(b) + 3:.1f}" y="{height - 4}">'
                    f"{html.escape(bn.replaces[0])}</text>"
                )
                label_free = x(b) + 8 + 6 * len(bn.replaces[0])
        # The marks of one kind are one path (a few bytes a mark); a bin's tooltip is on a
        # transparent strip over its column, drawn last: the picture stays small at any size.
        shown = [(r, kind, bn.counts[kind]) for r, kind in enumerate(ROWS) if bn.counts.get(kind, 0)]
        if shown:
            # A mark is a vertical stroke as wide as the bar (half the bytes of a filled box).
            for r, kind, _count in shown:
                kind_paths.setdefault((kind, bool(bn.effective)), []).append(
                    f"M{x(b):.1f} {rows_top + r * row_h}v10"
                )

        if bn.images:  # issue-14: a bin whose messages carry image parts gets a dot above its marks
            noun = "image" if bn.images == 1 else "images"
            out.append(
                f'<circle class="pc-image-mark" cx="{x(b):.1f}" cy="{rows_top - 2}" r="2" {fill(WARN)}>'
                f"<title>{where}: {bn.images:,} {noun}</title></circle>"
            )
    for (kind, effective), paths in kind_paths.items():
        dim = "" if effective else ' stroke-opacity="0.35"'
        out.append(
            f'<path class="pc-item pc-{kind}" fill="none" stroke="{COLORS[kind]}" stroke-width="{w}"{dim} '
            f'd="{"".join(paths)}"/>'
        )
    if replace_lines:  # one group carries the style every marker shares
        out.append(f'<g class="pc-replaces" {stroke(ERROR, "stroke-width:2")}>{"".join(replace_lines)}</g>')
        out.append(f'<g font-size="10" {fill(ERROR)}>{"".join(replace_labels)}</g>')
    # Each tooltip is on a transparent strip over its columns, drawn last: one a bin, or one for
    # every few bins of a long log (at most TIPS; the list below has every entry).
    per = -(-n // TIPS)
    for g in range(0, len(bins), per):
        strip = _tooltip(bins[g : g + per])
        if strip:
            mid = (x(g) + x(min(g + per, len(bins)) - 1)) / 2
            strips.append(
                f'<path d="M{mid:.1f} {rows_top}v{row_h * len(ROWS)}"><title>{strip}</title></path>'
            )
    if strips:  # one group carries the transparent stroke, its columns wide, every strip shares
        out.append(
            f'<g class="pc-bins" stroke="transparent" stroke-width="{span * per / n:.1f}">{"".join(strips)}</g>'
        )
    out.append("</svg>")
    return spaced("".join(out))


TIPS = 50  # tooltip strips at most: a bin's counts, or a few bins' together


def _tooltip(group: list[Any]) -> str:
    """What a strip over ``group``'s columns says (its lines, whether effective, the counts per
    kind, the largest step); '' for columns with nothing to count."""
    counts = {kind: sum(bn.counts.get(kind, 0) for bn in group) for kind in ROWS}
    shown = ", ".join(f"{count:,} {kind.replace('_', ' ')}" for kind, count in counts.items() if count)
    if not shown:
        return ""
    first, last = group[0].first_line, group[-1].last_line
    where = f"#{first}" if first == last else f"#{first}–{last}"
    live = sum(1 for bn in group if bn.effective)
    state = "" if not live else " (effective)" if live == len(group) else " (partly effective)"
    peak = max(bn.peak_tokens for bn in group)
    usage = f"; steps up to {peak:,} tokens" if peak else ""
    return f"{where}{state}: {shown}{usage}"


def _lines_and_drops(
    marks: Marks, fallen: list[Drop], firsts: list[int], x: Scale, cy: Scale, right: float
) -> list[str]:
    """The strategy's lines across the curve (dashed, labelled at the right) and each drop as a
    vertical segment from its "before" to its "after", labelled where there is room."""
    out = []
    for label, value in marks:
        out.append(
            f'<line class="pc-mark" x1="{x(0) - 4:.1f}" y1="{cy(value):.1f}" x2="{right:.1f}" y2="{cy(value):.1f}" '
            f"{stroke(FG1, 'stroke-dasharray:3,2')}><title>{html.escape(label)}: {value:,} tokens</title></line>"
            f'<text class="pc-mark-label" x="{right:.1f}" y="{cy(value) - 2:.1f}" font-size="9" text-anchor="end" '
            f"{fill(FG1)}>{html.escape(label)} {value:,}</text>"
        )
    label_free = 0.0
    many = len(fallen) > DETAILED_DROPS
    if many:
        # One path for every drop: a long session's hundreds of compactions stay a few KB of
        # SVG (each drop as its own titled line and dot was ~350 bytes, three times over in
        # the display bundle and the widget state).
        path = " ".join(
            f"M{x(max(bisect.bisect_right(firsts, d.index) - 1, 0)):.1f} {cy(d.before):.1f}V{cy(d.after):.1f}"
            for d in fallen
        )
        out.append(
            f'<path class="pc-drop" d="{path}" fill="none" {stroke(ERROR, "stroke-width:2")}>'
            f"<title>{len(fallen):,} compactions and rollovers</title></path>"
        )
    for d in fallen:
        px = x(max(bisect.bisect_right(firsts, d.index) - 1, 0))
        what = "compacted" if d.kind == "compact" else "rolled over"
        if not many:
            out.append(
                f'<line class="pc-drop" x1="{px:.1f}" y1="{cy(d.before):.1f}" x2="{px:.1f}" y2="{cy(d.after):.1f}" '
                f"{stroke(ERROR, 'stroke-width:2')}><title>{what}: {d.label} tokens</title></line>"
                f'<circle cx="{px:.1f}" cy="{cy(d.before):.1f}" r="2.5" {fill(ERROR)}/>'
            )
        if px >= label_free:
            anchor = "end" if px > right - 90 else "start"
            out.append(
                f'<text class="pc-drop-label" x="{px + (-4 if anchor == "end" else 4):.1f}" '
                f'y="{(cy(d.before) + cy(d.after)) / 2 + 3:.1f}" font-size="9" text-anchor="{anchor}" {fill(ERROR)}>{d.label}</text>'
            )
            label_free = px + 8 + 5.5 * len(d.label)
    return out


TEXT_LIMIT = 30  # entries listed in the text forms (the first and last 15); the rest is summed up, with where


def _listed(t: Timeline, limit: int = TEXT_LIMIT) -> list[Item | None]:
    """The entries the text forms list (labels only): all of a short log; of a longer one the
    first and last ``limit // 2``, ``None`` where the others are left out (a few more than
    ``limit`` are all listed: leaving out three would say less than listing them)."""
    if t.count <= limit + limit // 2:
        return list(t.read(range(t.count), detail=False))
    half = limit // 2
    first, last = t.read(range(half), detail=False), t.read(range(t.count - half, t.count), detail=False)
    return [*first, None, *last]


def _more(t: Timeline, listed: list[Item | None]) -> str:
    left = t.count - sum(1 for it in listed if it is not None)
    return f"… {left:,} more entries (the timeline's pages in a notebook; the log is .pseudoclaude/sessions/{t.session_id}/conversation.jsonl)"


def timeline_text(t: Timeline, items: list[Item | None] | None = None) -> str:
    listed = _listed(t) if items is None else items
    lines = [f"session {t.session_id}: {t.count} log entries, {t.effective_messages} effective messages"]
    lines += [f"! {p}" for p in t.problems]
    for it in listed:
        if it is None:
            lines.append(_more(t, listed))
            continue
        mark = "▶" if it.effective else " "
        lines.append(f"{mark} {it.line:>5}  {it.kind:<11} {it.label}")
    return printable("\n".join(lines))  # a log's text, maybe a cloned one's: escapes as text


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


PAGE = 40  # entries in the list at a time: the widget's state stays small at any log size


class SessionTimeline(Settles, ipywidgets.VBox):
    """The overview, a page of entries (a slider picks the page) and the chosen entry's content.

    Entries are read from the log by their offsets: only the shown page and the chosen entry.
    ``steps``: add the step scrubber below (if the session has steps); ``now`` is passed to it.
    """

    def __init__(
        self,
        timeline: Timeline,
        *,
        marks: Marks = (),
        steps: bool = False,
        now: Now | Callable[[], Now] = None,
        **kwargs: Any,
    ) -> None:
        self.timeline = timeline
        # The plain parts share one layout and one style model: each model is ~1 KB of state
        # on the wire, whatever it holds (issue 48).
        from ipywidgets.widgets.widget_string import HTMLStyle

        shared = {"layout": ipywidgets.Layout(), "style": HTMLStyle()}
        sliders = {"layout": shared["layout"], "style": ipywidgets.SliderStyle()}
        self.scrubber = (
            StepScrubber(timeline.path, now=now, timeline=timeline, shared=shared, sliders=sliders)
            if steps and timeline.usage
            else None
        )
        self._svg = timeline_svg(timeline, marks=marks)  # drawn once, for the widget and its saved form
        self.overview = ipywidgets.HTML(
            value=f"{LIST_CSS}<div class='pc-timeline'>{self._svg}</div>", **shared
        )
        pages = max(1, -(-timeline.count // PAGE))
        # Open where the effective window starts (what the model sees next), not at entry 1.
        start = timeline.first_effective
        self.page = ipywidgets.IntSlider(
            value=0 if start is None else start // PAGE,
            min=0,
            max=pages - 1,
            description="page",
            **sliders,
        )
        self.page_label = ipywidgets.HTML(**shared)
        self.entries = ipywidgets.Select(options=[], rows=12, layout={"width": "calc(100% - 8px)"})
        self.entries.add_class("pc-timeline-list")
        self.detail = ipywidgets.HTML(value="<i>choose an entry to see its content</i>", **shared)
        self._items: list[Item] = []
        self._first = 0
        self.entries.observe(self._show, names="value")
        self.page.observe(lambda change: self._load_page(change["new"]), names="value")
        self._load_page(self.page.value)
        # The page slider and its label only when there is more than one page.
        paging = [self.page, self.page_label] if pages > 1 else []
        children = [self.overview, *paging, self.entries, self.detail]
        kwargs.setdefault("layout", shared["layout"])
        super().__init__(children=[*children, *([self.scrubber] if self.scrubber else [])], **kwargs)
        if start is not None:
            self.select(start)

    def close(self) -> None:
        self.page.close()  # not among the children of a one-page timeline
        self.page_label.close()
        super().close()

    def _load_page(self, page: int) -> None:
        t = self.timeline
        self._first = first = page * PAGE
        self._items = t.read(range(first, min(first + PAGE, t.count)), detail=False)
        self.entries.value = None
        self.entries.options = [(_option(it), first + i) for i, it in enumerate(self._items)]
        self.entries.rows = min(12, max(len(self._items), 1))
        if t.count > PAGE:
            last = first + len(self._items)
            self.page_label.value = f"<small>entries {first + 1:,}–{last:,} of {t.count:,}</small>"

    def select(self, index: int) -> None:
        page = index // PAGE
        if page != self.page.value:
            self.page.value = page  # loads the page
        self.entries.value = index

    def _show(self, change: dict[str, Any]) -> None:
        index = change["new"]
        if index is not None:
            self.detail.value = _detail_html(self.timeline.read([index])[0])  # in full
            if self.scrubber is not None and self.timeline.kind(index) == "usage":
                # A usage entry: show its step's request (numbered as %context --at numbers them).
                self.scrubber.slider.value = self.timeline.step_of(index)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        """The view, ``text/plain`` and ``text/html`` (not made when ``exclude`` names it: a
        live output's, ``widgets.settle``)."""
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        listed = _listed(self.timeline)  # read once for both text forms
        bundle["text/plain"] = timeline_text(self.timeline, listed)
        if self.scrubber is not None:
            bundle["text/plain"] += "\n" + self.scrubber.text()
        if "text/html" in (kwargs.get("exclude") or ()):
            return bundle
        bundle["text/html"] = timeline_html(self.timeline, items=listed, svg=self._svg)
        if self.scrubber is not None:
            shown = self.scrubber.current  # None: a long request not read yet (its label says how)
            bundle["text/html"] += (
                shown.html
                if shown is not None
                else f"<div><small>{html.escape(self.scrubber.text())}</small></div>"
            )
        return bundle


def timeline_summary(t: Timeline) -> str:
    """The overview in one sentence (its picture's ``alt``)."""
    replaces, steps = len(t.reasons), len(t.usage)
    return (
        f"session timeline: {t.count:,} log entries, {t.effective_messages:,} messages in the "
        f"effective window, {steps:,} requests" + (f", {replaces:,} replaces" if replaces else "")
    )


def timeline_html(
    t: Timeline, limit: int = TEXT_LIMIT, items: list[Item | None] | None = None, svg: str | None = None
) -> str:
    """The saved-notebook form: the overview as a picture (``svg``, drawn if not given) and the
    entry list as text."""
    listed = _listed(t, limit) if items is None else items
    rows = [_option(it) if it is not None else _more(t, listed) for it in listed]
    drawn = picture(
        timeline_svg(t) if svg is None else svg, timeline_summary(t), "pc-picture pc-timeline-picture"
    )
    return (
        f"<div class='pc-timeline pc-timeline-static'>{drawn}"
        f"<pre style='max-height:16em;overflow:auto;font-size:85%'>{html.escape(chr(10).join(rows))}</pre></div>"
    )
