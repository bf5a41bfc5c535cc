"""The lab's four plots (matplotlib, the ``lab`` and ``test`` extras): for the notebook.

Each function draws one figure from a ``LabReport`` and returns it; ``display(fig)`` shows it
(after ``%matplotlib inline``). The figures are not pyplot's: no backend shows them on its
own, so a cell shows each exactly once, where it says so. matplotlib is imported only here,
so the lab itself (and the CLI) runs without it.

A saved PNG cannot follow the notebook's theme, so each figure reads on light and dark alike
(``_finish``): no background of its own, text and axes in the grey the widgets' pictures use,
mid-tone lines, and the legend beside the axes, never over a line.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from typing import Any

from ..errors import ConfigError
from ..widgets.picture import PICTURE_TEXT
from .experiments import LabReport
from .run import NONE


def _figure() -> tuple[Any, Any]:
    """A new figure of the lab's size and its one axes."""
    # A first use builds matplotlib's font cache and says so on stderr; a notebook cell (and
    # the notebook tests, which fail on stderr) should not show that.
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)
    # An optional extra, imported by name as image_fit imports Pillow: the core never needs it.
    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigError(
            "the lab's plots need matplotlib: pip install -e '.[lab]' (or pip install matplotlib); "
            "the tables need nothing more (python -m pseudoclaude_nb lab)"
        )
    figure: Any = importlib.import_module("matplotlib.figure")
    fig = figure.Figure(figsize=(9, 3.6))  # room for the legend beside the axes
    return fig, fig.subplots()


def _finish(fig: Any, ax: Any) -> Any:
    """Transparent, grey text and axes, the legend outside the axes on the right."""
    fig.patch.set_alpha(0)
    ax.set_facecolor("none")
    for spine in ax.spines.values():
        spine.set_color(PICTURE_TEXT)
    ax.tick_params(colors=PICTURE_TEXT, which="both")
    for text in (ax.xaxis.label, ax.yaxis.label, ax.title):
        text.set_color(PICTURE_TEXT)
    legend = ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    for text in legend.get_texts():
        text.set_color(PICTURE_TEXT)
    fig.tight_layout()
    return fig


def context_curves(report: LabReport) -> Any:
    """Prompt tokens of every agent request, per arm: the window each strategy keeps."""
    fig, ax = _figure()
    for r in report.side_by_side:
        if not r.arm.pins:
            ax.plot(range(1, len(r.per_step) + 1), r.per_step, label=r.arm.label, linewidth=1.4)
    ax.set(xlabel="agent request", ylabel="prompt tokens", title="Context per request, one task per arm")
    return _finish(fig, ax)


def costs(report: LabReport) -> Any:
    """The task's cost per arm, with and without prompt caching."""
    results = [r for r in report.side_by_side if not r.arm.pins]
    fig, ax = _figure()
    xs = range(len(results))
    ax.bar([x - 0.2 for x in xs], [r.dollars_uncached for r in results], 0.4, label="no caching")
    ax.bar([x + 0.2 for x in xs], [r.dollars for r in results], 0.4, label="prompt caching")
    # "compact\n(60K window)": four labels side by side never run into each other.
    ax.set_xticks(list(xs), [r.arm.label.replace(" (", "\n(", 1) for r in results])
    ax.set(ylabel=f"dollars ({report.price_model})", title="What the task cost")
    return _finish(fig, ax)


def sweep(report: LabReport, name: str = "rollover") -> Any:
    """``name``'s cost over none's against task length, per window: below 1 it pays."""
    fig, ax = _figure()
    windows = sorted({r.arm.window for r in report.sweep if r.arm.name == name})
    for cached, style in ((True, "-"), (False, ":")):
        for i, w in enumerate(windows):
            xs, ys = [], []
            for modules in sorted({r.modules for r in report.sweep}):
                base = next(r for r in report.sweep if r.arm.name == NONE and r.modules == modules)
                ours = next(
                    r
                    for r in report.sweep
                    if r.arm.name == name and r.arm.window == w and r.modules == modules
                )
                xs.append(base.steps)
                ys.append(
                    ours.dollars / base.dollars if cached else ours.dollars_uncached / base.dollars_uncached
                )
            label = f"{w // 1000}K window, {'caching' if cached else 'no caching'}"
            ax.plot(xs, ys, style, marker="o", color=f"C{i}", label=label)
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_xscale("log")
    lengths = sorted({r.steps for r in report.sweep if r.arm.name == NONE})
    ax.set_xticks(lengths, [str(n) for n in lengths])
    ax.minorticks_off()
    ax.set(xlabel="task length (agent steps of the unmanaged run)", ylabel=f"{name} ÷ none")
    ax.set_title(f"Where {name} pays: below the line")
    return _finish(fig, ax)


def drift(report: LabReport) -> Any:
    """The share of the spec in the context after each replace, with and without pins."""
    fig, ax = _figure()
    names = list(dict.fromkeys(r.arm.name for r in report.drift))
    for r in report.drift:
        shown = r.drift[: report.sizes.drift_generations]
        k = names.index(r.arm.name)
        # Pinned runs dashed and hollow, a marker per strategy: lines at 100 % lie on each other.
        ax.plot(
            range(1, len(shown) + 1),
            [100 * v for v in shown],
            linestyle="--" if r.arm.pins else "-",
            marker="osD^v"[k % 5],
            markersize=9 - 2 * k,
            markerfacecolor="none" if r.arm.pins else f"C{k}",
            color=f"C{k}",
            label=r.arm.label,
        )
    generations = range(1, report.sizes.drift_generations + 1)
    ax.set_xticks(list(generations), [str(g) for g in generations])
    ax.set(xlabel="replace (summary or handoff)", ylabel="% of the spec in context", ylim=(-5, 105))
    ax.set_title("Drift of the original spec")
    return _finish(fig, ax)
