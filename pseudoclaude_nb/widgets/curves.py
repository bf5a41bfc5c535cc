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


def curves_svg(
    curves: dict[str, list[int]],
    width: int = 640,
    height: int = 220,
    *,
    falls: dict[str, list[Drop]] | None = None,
    marks: Marks = (),
) -> str:
    """The curves; ``falls`` (drops per session) as vertical segments labelled before → after,
    ``marks`` as dashed lines across. The scale holds both: the line a run crossed is drawn."""
    falls = falls or {}
    left, right, top, bottom = 60, 150, 12, 28
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

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" class="pc-curves">',
        f'<line class="pc-axis" x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" '
        f"{stroke(AXIS)}/>",
        f'<line class="pc-axis" x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" {stroke(AXIS)}/>',
        f'<text class="pc-axis-label" x="{left - 6}" y="{top + 8}" font-size="10" text-anchor="end" '
        f"{fill(FG1)}>{peak:,}</text>",
        f'<text class="pc-axis-label" x="{left - 6}" y="{height - bottom}" font-size="10" text-anchor="end" '
        f"{fill(FG1)}>0</text>",
        f'<text class="pc-axis-label" x="{(left + width - right) / 2:.0f}" y="{height - 8}" font-size="10" '
        f'text-anchor="middle" {fill(FG1)}>request (step)</text>',
    ]
    for label, value in marks:
        out.append(
            f'<line class="pc-mark" x1="{left}" y1="{y(value):.1f}" x2="{width - right}" y2="{y(value):.1f}" '
            f"{stroke(FG1, 'stroke-dasharray:3,2')}><title>{html.escape(label)}: {value:,} tokens</title></line>"
            f'<text class="pc-mark-label" x="{width - right - 2}" y="{y(value) - 3:.1f}" font-size="10" '
            f'text-anchor="end" {fill(FG1)}>{html.escape(label)} {value:,}</text>'
        )
    for k, (name, points) in enumerate(curves.items()):
        color = PALETTE[k % len(PALETTE)]
        if points:
            path = " ".join(f"{x(i):.1f},{y(t):.1f}" for i, t in enumerate(points))
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for d in falls.get(name, []):
            # Between the request before it and the one after; its label to the left of the
            # segment (the curve goes on to the right of it).
            px = x(max(d.index - 0.5, 0))
            what = "compacted" if d.kind == "compact" else "rolled over"
            out.append(
                f'<line class="pc-drop" x1="{px:.1f}" y1="{y(d.before):.1f}" x2="{px:.1f}" y2="{y(d.after):.1f}" '
                f'stroke="{color}" stroke-width="2" stroke-dasharray="4,2"><title>{html.escape(name)} {what}: '
                f"{d.label} tokens</title></line>"
                f'<circle cx="{px:.1f}" cy="{y(d.before):.1f}" r="3" fill="{color}"/>'
                f'<text class="pc-drop-label" x="{px - 4:.1f}" y="{y(d.before) - 4:.1f}" font-size="10" '
                f'text-anchor="end" fill="{color}">{d.label}</text>'
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
        bundle["text/html"] = self.value
        return bundle
