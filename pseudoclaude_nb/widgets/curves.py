"""Tokens per step of several sessions, side by side: how strategies differ in cost.

Each session's curve comes from its log's ``usage`` entries (what the provider reported
for every request), so it shows what was paid, not an estimate.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import ipywidgets

from ..session.timeline import build_timeline
from .theme import AXIS, FG1, fill, stroke

# Mid tones: visible on light and dark backgrounds alike.
PALETTE = ("#1e88e5", "#e53935", "#43a047", "#8e24aa")


def usage_per_step(session_dir: Path) -> list[int]:
    """Prompt + output tokens of every request of a session, in order."""
    return [tokens for _, tokens in build_timeline(session_dir).usage_curve]


def curves_text(curves: dict[str, list[int]]) -> str:
    lines = []
    for name, points in curves.items():
        peak = max(points, default=0)
        lines.append(f"{name:<12} {len(points):>3} steps · total {sum(points):>9,} tokens · peak {peak:>7,}")
    return "\n".join(lines)


def curves_svg(curves: dict[str, list[int]], width: int = 640, height: int = 220) -> str:
    left, right, top, bottom = 60, 150, 12, 28
    steps = max((len(p) for p in curves.values()), default=1)
    peak = max((max(p) for p in curves.values() if p), default=1)

    def x(i: int) -> float:
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
    for k, (name, points) in enumerate(curves.items()):
        color = PALETTE[k % len(PALETTE)]
        if points:
            path = " ".join(f"{x(i):.1f},{y(t):.1f}" for i, t in enumerate(points))
            out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        label = f"{name}: {sum(points):,} total"
        out.append(
            f'<text x="{width - right + 8}" y="{top + 14 + 16 * k}" font-size="11" fill="{color}">'
            f"{html.escape(label)}</text>"
        )
    out.append("</svg>")
    return "".join(out)


class UsageCurves(ipywidgets.HTML):
    """``UsageCurves({"compact": dir1, "rollover": dir2})``: tokens per step, compared."""

    def __init__(self, sessions: dict[str, Path], **kwargs: Any) -> None:
        self.curves = {name: usage_per_step(Path(d)) for name, d in sessions.items()}
        super().__init__(value=curves_svg(self.curves), **kwargs)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = curves_text(self.curves)
        bundle["text/html"] = self.value
        return bundle
