"""Tokens per step of several sessions, side by side: how strategies differ in cost.

Each session's curve comes from its log's ``usage`` entries (what the provider reported
for every request), so it shows what was paid, not an estimate. Its compactions and
rollovers, read from the same log, are drawn as drops (the estimate before → after, between
the two requests they came between); the strategy's lines, which a log does not record, are
given by the caller (``marks``).
"""

from __future__ import annotations

import bisect
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ipywidgets

from ..session.timeline import build_timeline
from .picture import picture
from .settle import Settles
from .theme import AXIS, FG1, fill, spaced, stroke
from .timeline import Drop, Marks, drops

# Mid tones: visible on light and dark backgrounds alike.
PALETTE = ("#1e88e5", "#e53935", "#43a047", "#8e24aa")


@dataclass
class SessionCurve:
    points: list[int]
    drops: list[Drop] = field(default_factory=list)


def session_curve(session_dir: Path) -> SessionCurve:
    """A session's tokens per request and its drops, from one pass over its log."""
    t = build_timeline(session_dir)
    at = [index for index, _ in t.usage_curve]
    return SessionCurve(
        [tokens for _, tokens in t.usage_curve],
        [Drop(bisect.bisect_left(at, d.index), d.kind, d.before, d.after) for d in drops(t)],
    )


def usage_per_step(session_dir: Path) -> list[int]:
    """Prompt + output tokens of every request of a session, in order."""
    return [tokens for _, tokens in build_timeline(session_dir).usage_curve]


def curves_text(
    curves: dict[str, list[int]], falls: dict[str, list[Drop]] | None = None, marks: Marks = ()
) -> str:
    lines = []
    for name, points in curves.items():
        peak = max(points, default=0)
        lines.append(f"{name:<12} {len(points):>3} steps · total {sum(points):>9,} tokens · peak {peak:>7,}")
        for d in (falls or {}).get(name, []):
            what = "compacted" if d.kind == "compact" else "rolled over"
            lines.append(f"{'':<12} {what} before step {d.index + 1}: {d.label}")
    if marks:
        lines.append("lines: " + " · ".join(f"{label} {value:,}" for label, value in marks))
    return "\n".join(lines)


def curves_summary(curves: dict[str, list[int]], falls: dict[str, list[Drop]] | None = None) -> str:
    """The picture in one sentence (its ``alt``): each session's requests, total and drops."""
    parts = []
    for name, points in curves.items():
        dropped = len((falls or {}).get(name, []))
        parts.append(
            f"{name} {len(points)} requests, {sum(points):,} tokens in all"
            + (f", {dropped} drop{'s' if dropped != 1 else ''}" if dropped else "")
        )
    return "tokens per request: " + "; ".join(parts)


Box = tuple[float, float, float, float]  # x0, y0, x1, y1 of a label
CHAR = 5.6  # px per character of a 10px label (digits and arrows included)


def _label_box(x: float, baseline: float, text: str, anchor: str) -> Box:
    w = CHAR * len(text)
    x0 = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
    return (x0, baseline - 9, x0 + w, baseline + 2)


def _free(box: Box, taken: list[Box]) -> bool:
    return all(box[2] <= t[0] or box[0] >= t[2] or box[3] <= t[1] or box[1] >= t[3] for t in taken)


def _along(points: list[tuple[float, float]], every: float = 4.0) -> list[Box]:
    """Small boxes every ``every`` px along a polyline: what a label placed near it must avoid."""
    boxes = []
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        n = max(1, int(max(abs(x1 - x0), abs(y1 - y0)) / every))
        for k in range(n + 1):
            px, py = x0 + (x1 - x0) * k / n, y0 + (y1 - y0) * k / n
            boxes.append((px - 1.5, py - 1.5, px + 1.5, py + 1.5))
    return boxes


def _tick_step(steps: int, most: int = 12) -> int:
    """Every how many requests the x axis is labelled: 1, 2, 5, 10, 20, 50… (at most ``most`` labels)."""
    for step in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000):
        if steps / step <= most:
            return step
    return -(-steps // most)


def curves_svg(
    curves: dict[str, list[int]],
    width: int = 640,
    height: int = 230,
    *,
    falls: dict[str, list[Drop]] | None = None,
    marks: Marks = (),
) -> str:
    """The curves; ``falls`` (drops per session) as vertical segments labelled before → after,
    ``marks`` as dashed lines across. The scale holds both: the line a run crossed is drawn.
    The x axis numbers the requests from 1 (as ``%sessions show`` and ``%context --at`` do);
    a drop's label goes where it overlaps no other label (beside, above or below its segment)."""
    falls = falls or {}
    left, right, top, bottom = 60, 150, 18, 36
    steps = max((len(p) for p in curves.values()), default=1)
    peak = max(
        [max(p) for p in curves.values() if p]
        + [d.before for ds in falls.values() for d in ds]
        + [v for _, v in marks],
        default=1,
    )

    def x(i: float) -> float:
        return left + (width - left - right) * (i / max(steps - 1, 1))

    def y(tokens: int) -> float:
        return top + (height - top - bottom) * (1 - tokens / peak)

    base = height - bottom
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'class="pc-curves">',
        f'<line class="pc-axis" x1="{left}" y1="{base}" x2="{width - right}" y2="{base}" {stroke(AXIS)}/>',
        f'<line class="pc-axis" x1="{left}" y1="{top}" x2="{left}" y2="{base}" {stroke(AXIS)}/>',
        f'<text class="pc-axis-label" x="{left - 6}" y="{top + 8}" font-size="10" text-anchor="end" '
        f"{fill(FG1)}>{peak:,}</text>",
        f'<text class="pc-axis-label" x="{left - 6}" y="{base}" font-size="10" text-anchor="end" '
        f"{fill(FG1)}>0</text>",
        f'<text class="pc-axis-label" x="{(left + width - right) / 2:.0f}" y="{height - 4}" font-size="10" '
        f'text-anchor="middle" {fill(FG1)}>request</text>',
    ]
    every = _tick_step(steps)
    ticks = sorted({1, *range(every, steps + 1, every)}) if steps > 1 else [1]
    out.append(f'<g class="pc-ticks" font-size="9" text-anchor="middle" {fill(FG1)}>')
    for n in ticks:
        out.append(f'<text x="{x(n - 1):.1f}" y="{base + 12}">{n}</text>')
    out.append("</g>")
    out.append(
        f'<path class="pc-tick" d="{"".join(f"M{x(n - 1):.1f} {base}v3" for n in ticks)}" {stroke(AXIS)}/>'
    )
    # What a drop's label must not cover: the other labels, the lines across, the curves and
    # the drops (sampled every few pixels along each as small boxes).
    taken: list[Box] = [(left, y(v) - 1, width - right, y(v) + 1) for _, v in marks]
    for points in curves.values():
        taken += _along([(x(i), y(t)) for i, t in enumerate(points)])
    for ds in falls.values():
        for d in ds:
            px = x(max(d.index - 0.5, 0))
            taken.append((px - 2, y(d.before) - 3, px + 2, y(d.after)))
    for label, value in marks:
        text = f"{label} {value:,}"
        # At the left: a run's context starts small, so the space above a line is free there.
        taken.append(_label_box(left + 4, y(value) - 3, text, "start"))
        out.append(
            f'<line class="pc-mark" x1="{left}" y1="{y(value):.1f}" x2="{width - right}" y2="{y(value):.1f}" '
            f"{stroke(FG1, 'stroke-dasharray:3,2')}><title>{html.escape(label)}: {value:,} tokens</title></line>"
            f'<text class="pc-mark-label" x="{left + 4}" y="{y(value) - 3:.1f}" font-size="10" '
            f'text-anchor="start" {fill(FG1)}>{html.escape(text)}</text>'
        )
    for k, (name, points) in enumerate(curves.items()):
        color = PALETTE[k % len(PALETTE)]
        if points:
            path = " ".join(f"{x(i):.1f},{y(t):.1f}" for i, t in enumerate(points))
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for d in falls.get(name, []):
            # Between the request before it and the one after.
            px = x(max(d.index - 0.5, 0))
            what = "compacted" if d.kind == "compact" else "rolled over"
            out.append(
                f'<line class="pc-drop" x1="{px:.1f}" y1="{y(d.before):.1f}" x2="{px:.1f}" y2="{y(d.after):.1f}" '
                f'stroke="{color}" stroke-width="2" stroke-dasharray="4,2"><title>{html.escape(name)} {what}: '
                f"{d.label} tokens</title></line>"
                f'<circle cx="{px:.1f}" cy="{y(d.before):.1f}" r="3" fill="{color}"/>'
            )
            mid = (y(d.before) + y(d.after)) / 2 + 3
            spots = [  # beside the segment at mid-height, then higher and lower, then above or below it
                (px + dx, mid + dy, anchor)
                for dy in (0, -12, 12, -24, 24)
                for dx, anchor in ((-5, "end"), (5, "start"))
            ] + [(px, y(d.before) - 6, "middle"), (px, y(d.after) + 12, "middle")]
            boxes = [(spot, _label_box(*spot[:2], d.label, spot[2])) for spot in spots]
            inside = [
                (spot, box) for spot, box in boxes if box[0] >= 0 and box[2] <= width - right and box[1] >= 0
            ]
            (lx, ly, anchor), box = next(
                ((spot, box) for spot, box in inside if _free(box, taken)), (inside or boxes)[0]
            )
            taken.append(box)
            out.append(
                f'<text class="pc-drop-label" x="{lx:.1f}" y="{ly:.1f}" font-size="10" '
                f'text-anchor="{anchor}" fill="{color}">{d.label}</text>'
            )
        label = f"{name}: {sum(points):,} total"
        out.append(
            f'<text x="{width - right + 8}" y="{top + 14 + 16 * k}" font-size="11" fill="{color}">'
            f"{html.escape(label)}</text>"
        )
    out.append("</svg>")
    return spaced("".join(out))


class UsageCurves(Settles, ipywidgets.HTML):
    """``UsageCurves({"compact": dir1, "rollover": dir2}, marks=[("Layer 2", 27_000)])``:
    tokens per step, compared, with each session's drops and the strategy's lines."""

    def __init__(self, sessions: dict[str, Path], *, marks: Marks = (), **kwargs: Any) -> None:
        read = {name: session_curve(Path(d)) for name, d in sessions.items()}
        self.curves = {name: c.points for name, c in read.items()}
        self.drops = {name: c.drops for name, c in read.items()}
        self.marks = tuple(marks)
        super().__init__(value=curves_svg(self.curves, falls=self.drops, marks=self.marks), **kwargs)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = curves_text(self.curves, self.drops, self.marks)
        bundle["text/html"] = picture(
            self.value, curves_summary(self.curves, self.drops), "pc-picture pc-curves"
        )
        return bundle
