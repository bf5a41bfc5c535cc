"""Widgets that *observe* the agent: a live context gauge, the session timeline, spills.

Core ipywidgets only (HTML with inline SVG, Select, Button), so they render in
JupyterLab, Notebook 7, VS Code and Colab; each has a readable ``text/plain`` form.
Each name is imported when first asked for: ipywidgets loads when a widget is shown,
not with the extension (issue 30).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
    from .curves import UsageCurves, curves_text, usage_per_step
    from .gauge import ContextGauge, GaugeState, gauge_text
    from .spills import SpillBrowser, spills_text
    from .timeline import SessionTimeline, timeline_text

__all__ = [
    "ContextGauge",
    "GaugeState",
    "SessionTimeline",
    "SpillBrowser",
    "UsageCurves",
    "curves_text",
    "gauge_text",
    "spills_text",
    "timeline_text",
    "usage_per_step",
]

__getattr__, __dir__ = exports(
    __name__,
    {
        ".curves": ("UsageCurves", "curves_text", "usage_per_step"),
        ".gauge": ("ContextGauge", "GaugeState", "gauge_text"),
        ".spills": ("SpillBrowser", "spills_text"),
        ".timeline": ("SessionTimeline", "timeline_text"),
    },
)
