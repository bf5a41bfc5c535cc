"""The lab's plots (matplotlib, the ``lab`` and ``test`` extras): for the notebooks.

Each function draws one figure from a ``LabReport`` and returns it; ``display(fig)`` shows it
(after ``%matplotlib inline``). The figures are not pyplot's: no backend shows them on its
own, so a cell shows each exactly once, where it says so. matplotlib is imported only here,
so the lab itself (and the CLI) runs without it.

A saved PNG cannot follow the notebook's theme, so each figure reads on light and dark alike
(``_finish``): no background of its own, text and axes in the grey the widgets' pictures use,
mid-tone lines, and the legend beside the axes, never over a line. Every plot draws every arm
of the report — a strategy of the person's too — and names an arm that failed, or that the
budget stopped, as such (a failed arm has no bar: what it spent until then compares with nothing).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from typing import Any

from ..errors import ConfigError
from ..widgets.picture import PICTURE_TEXT
from .experiments import LabReport
from .model import NEWEST, summarizer_label
from .run import NONE, ArmResult


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


def _base_runs(report: LabReport) -> list[ArmResult]:
    """One run per arm: the worst-case summarizer (or the real model's), nothing pinned."""
    return [r for r in report.side_by_side if not r.arm.pins and r.arm.summarizer in (NEWEST, "real")]


def _status(r: ArmResult) -> str:
    return " (failed)" if r.failed else " (stopped at the budget)" if r.stopped else ""


def context_curves(report: LabReport) -> Any:
    """Prompt tokens of every agent request, per arm: the window each strategy keeps."""
    fig, ax = _figure()
    for r in _base_runs(report):
        ax.plot(range(1, len(r.per_step) + 1), r.per_step, label=r.arm.label + _status(r), linewidth=1.4)
    ax.set(xlabel="agent request", ylabel="prompt tokens", title="Context per request, one task per arm")
    return _finish(fig, ax)


def _tick(r: ArmResult) -> str:
    # "compact\n(60K window)": labels side by side never run into each other.
    return r.arm.label.replace(" (", "\n(", 1) + (
        "\nfailed" if r.failed else "\nstopped" if r.stopped else ""
    )


def costs(report: LabReport) -> Any:
    """The task's cost per arm, with and without prompt caching."""
    results = _base_runs(report)
    fig, ax = _figure()
    xs = range(len(results))
    shown = [0.0 if r.failed else 1.0 for r in results]
    ax.bar(
        [x - 0.2 for x in xs],
        [r.dollars_uncached * k for r, k in zip(results, shown, strict=True)],
        0.4,
        label="no caching",
    )
    ax.bar(
        [x + 0.2 for x in xs],
        [r.dollars * k for r, k in zip(results, shown, strict=True)],
        0.4,
        label="prompt caching",
    )
    ax.set_xticks(list(xs), [_tick(r) for r in results])
    ax.set(ylabel=f"dollars ({report.price_model})", title="What the task cost")
    return _finish(fig, ax)


def fidelity(report: LabReport) -> Any:
    """Must-keep facts each arm's final context holds, per summarizer (and the spec pinned):
    the range between the worst-case summary and the careful one."""
    fig, ax = _figure()
    names = [n for n in report.arms if any(r.arm.name == n for r in report.side_by_side)]
    variants: list[tuple[str, bool]] = []
    for r in report.side_by_side:
        key = (r.arm.summarizer, r.arm.pins)
        if r.arm.name != NONE and key not in variants:
            variants.append(key)
    width = 0.8 / max(len(variants), 1)
    for i, (kind, pins) in enumerate(variants):
        heights, xs = [], []
        for x, name in enumerate(names):
            run = next(
                (
                    r
                    for r in report.side_by_side
                    if r.arm.name == name and r.arm.pins == pins and r.arm.summarizer == kind
                ),
                None,
            )
            if run is None or run.failed or name == NONE:
                continue
            xs.append(x - 0.4 + width * (i + 0.5))
            heights.append(sum(run.kept.values()))
        label = (
            "the real model's summaries" if kind == "real" else summarizer_label(kind, report.budget)
        ) + (", spec pinned" if pins else "")
        ax.bar(xs, heights, width, label=label, color=f"C{i}")
    # none summarizes nothing: one bar, whatever the summarizer.
    none = next((r for r in report.side_by_side if r.arm.name == NONE), None)
    if none is not None and NONE in names:
        ax.bar(
            [names.index(NONE)], [sum(none.kept.values())], 0.8 / 3, color="gray", label="no summary (none)"
        )
    runs = {r.arm.name: r for r in _base_runs(report)}
    ax.set_xticks(list(range(len(names))), [_tick(runs[n]) if n in runs else n for n in names])
    most = max((len(r.kept) for r in report.side_by_side), default=0)
    ax.set_yticks(list(range(most + 1)))
    ax.set(ylabel=f"must-keep facts kept (of {most})", title="What the final context kept")
    return _finish(fig, ax)


def sweep(report: LabReport, name: str | None = None) -> Any:
    """Each arm's cost over none's against task length: below 1 it pays. ``name``: one arm, in
    every window, with and without caching; None: every managed arm, with caching."""
    fig, ax = _figure()
    names = [name] if name is not None else [n for n in report.arms if n != NONE]
    windows = sorted({r.arm.window for r in report.sweep if r.arm.name in names})
    lengths = sorted({r.modules for r in report.sweep})
    modes = (True, False) if name is not None else (True,)
    for k, arm in enumerate(names):
        for cached in modes:
            for i, w in enumerate(windows):
                xs, ys = [], []
                for modules in lengths:
                    base = next(r for r in report.sweep if r.arm.name == NONE and r.modules == modules)
                    ours = next(
                        (
                            r
                            for r in report.sweep
                            if r.arm.name == arm and r.arm.window == w and r.modules == modules
                        ),
                        None,
                    )
                    if ours is None or ours.failed or base.failed:
                        continue
                    xs.append(base.steps)
                    ys.append(
                        ours.dollars / base.dollars
                        if cached
                        else ours.dollars_uncached / base.dollars_uncached
                    )
                failed = any(r.failed for r in report.sweep if r.arm.name == arm and r.arm.window == w)
                where = f"{w // 1000}K window"
                label = (
                    f"{where}, {'caching' if cached else 'no caching'}"
                    if name is not None
                    else (f"{arm}, {where}" if len(windows) > 1 else arm)
                ) + (" (failed)" if failed else "")
                color = f"C{i}" if name is not None else f"C{k}"
                style = ("-" if cached else ":") if name is not None else "-"
                ax.plot(
                    xs, ys, style, marker="osD^v"[(i if name is None else 0) % 5], color=color, label=label
                )
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_xscale("log")
    steps = sorted({r.steps for r in report.sweep if r.arm.name == NONE})
    ax.set_xticks(steps, [str(n) for n in steps])
    ax.minorticks_off()
    ax.set(xlabel="task length (agent steps of the unmanaged run)", ylabel=f"{name or 'arm'} ÷ none")
    ax.set_title(f"Where {name or 'each arm'} pays: below the line" + ("" if name else " (prompt caching)"))
    return _finish(fig, ax)


def drift(report: LabReport) -> Any:
    """The share of the spec in the context after each replace: each arm with the worst-case
    summarizer, the careful one, and the spec pinned."""
    fig, ax = _figure()
    names = list(dict.fromkeys(r.arm.name for r in report.drift))
    for r in report.drift:
        shown = r.drift[: report.sizes.drift_generations]
        k = names.index(r.arm.name)
        careful = r.arm.summarizer != NEWEST
        # Pinned runs dashed and hollow, careful ones dotted; a marker per strategy: lines at
        # 100 % lie on each other.
        ax.plot(
            range(1, len(shown) + 1),
            [100 * v for v in shown],
            linestyle="--" if r.arm.pins else ":" if careful else "-",
            marker="osD^v"[k % 5],
            markersize=max(9 - 2 * k, 3),
            markerfacecolor="none" if r.arm.pins or careful else f"C{k}",
            color=f"C{k}",
            label=r.arm.label + _status(r),
        )
    generations = range(1, report.sizes.drift_generations + 1)
    ax.set_xticks(list(generations), [str(g) for g in generations])
    ax.set(xlabel="replace (summary or handoff)", ylabel="% of the spec in context", ylim=(-5, 105))
    ax.set_title("Drift of the original spec")
    return _finish(fig, ax)
