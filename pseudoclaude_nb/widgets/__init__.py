"""Widgets that *observe* the agent: a live context gauge, the session timeline, spills.

Core ipywidgets only (HTML with inline SVG, Select, Button), so they render in
JupyterLab, Notebook 7, VS Code and Colab; each has a readable ``text/plain`` form.
"""

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
