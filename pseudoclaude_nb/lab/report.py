"""The lab's tables: each a ``Table`` headed by what it measured (the task, the window, the arms,
the prices), shown as an HTML table in a notebook and as Markdown in a terminal and the docs.

Pure functions of a ``LabReport``: no run, no I/O. ``break_even`` is the sweep's answer to
the first open question, ``render`` the whole report. Every table is built from the report's
arms, whatever they are (a strategy of the registry, or one of the person's own).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..cost import money
from .experiments import LabReport
from .run import NONE, ArmResult
from .task import MUST_KEEP


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown pipe table; the first column left-aligned, the others right-aligned."""
    cells = [[str(c) for c in headers], *([str(c) for c in row] for row in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        out = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))]
        return "| " + " | ".join(out) + " |"

    rule = "| " + " | ".join([":" + "-" * (widths[0] - 1), *("-" * (w - 1) + ":" for w in widths[1:])]) + " |"
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


@dataclass(frozen=True)
class Table:
    """One table of the lab: ``caption`` says what was measured, so two tables never seem to
    disagree (a fact kept in a 60K window and lost in a 20K one are both true)."""

    caption: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    @classmethod
    def of(cls, caption: str, headers: Sequence[object], rows: Sequence[Sequence[object]]) -> Table:
        return cls(caption, tuple(str(h) for h in headers), tuple(tuple(str(c) for c in r) for r in rows))

    def markdown(self) -> str:
        return table(self.headers, self.rows)

    def __str__(self) -> str:
        return f"{self.caption}\n\n{self.markdown()}"

    def html(self) -> str:
        """The table as HTML a sanitizer keeps (no ``<style>``): one row per line, numbers right."""
        cell = "padding:2px 6px;white-space:nowrap;"  # a row never wraps; a heading may
        head = "".join(
            f"<th style='padding:2px 6px;vertical-align:bottom;text-align:{'left' if i == 0 else 'right'}'>"
            f"{html.escape(h)}</th>"
            for i, h in enumerate(self.headers)
        )
        body = "".join(
            "<tr>"
            + "".join(
                f"<td style='{cell}text-align:{'left' if i == 0 else 'right'}'>{html.escape(c)}</td>"
                for i, c in enumerate(row)
            )
            + "</tr>"
            for row in self.rows
        )
        return (
            "<div class='pc-lab-table' style='overflow-x:auto'><table style='border-collapse:collapse;font-size:90%'>"
            f"<caption style='text-align:left;caption-side:top;padding:2px 0'>{html.escape(self.caption)}</caption>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
        )

    def _repr_mimebundle_(self, **_: Any) -> dict[str, str]:
        return {"text/html": self.html(), "text/plain": str(self)}


def _arms(results: Sequence[ArmResult]) -> str:
    return ", ".join(dict.fromkeys(r.arm.name for r in results))


def _kept(r: ArmResult) -> str:
    return f"{sum(r.kept.values())}/{len(r.kept)}"


def side_by_side(report: LabReport) -> Table:
    s = report.sizes
    rows = []
    for r in report.side_by_side:
        if r.arm.pins:
            continue
        pinned = next((p for p in report.side_by_side if p.arm.pins and p.arm.name == r.arm.name), None)
        rows.append(
            [
                r.arm.label,
                r.steps + r.summaries,
                r.replace_count,
                f"{r.peak_context:,}",
                f"{r.input_tokens:,}",
                f"{r.cache_read:,}",
                f"{r.cache_write:,}",
                money(r.dollars),
                money(r.dollars_uncached),
                _kept(r),
                _kept(pinned) if pinned is not None else "–",
            ]
        )
    return Table.of(
        f"One task of {s.modules} modules, each arm ({_arms(report.side_by_side)}); the managed arms in a "
        f"{s.window // 1000}K window, none in one the task never fills; priced as {report.price_model}.",
        [
            "arm",
            "requests",
            "replaces",
            "peak context",
            "input tokens",
            "cache read",
            "cache write",
            "cost, caching",
            "cost, no caching",
            "facts kept",
            "spec pinned",
        ],
        rows,
    )


def facts(report: LabReport) -> Table:
    """Which must-keep fact each arm's final context holds (✓) or lost (–)."""
    s = report.sizes
    results = [r for r in report.side_by_side if r.arm.name != NONE or not r.arm.pins]
    headers = ["fact", *(_short(r) for r in results)]
    stated = [f for f in MUST_KEEP if any(f.key in r.kept for r in results)]
    rows = [[f"{f.kind}: {f.needle}", *("✓" if r.kept.get(f.key) else "–" for r in results)] for f in stated]
    return Table.of(
        f"Must-keep facts in the final context (✓ kept, – lost) of the side-by-side runs: {s.modules} "
        f"modules, the managed arms in a {s.window // 1000}K window, without and with the spec pinned.",
        headers,
        rows,
    )


def _short(r: ArmResult) -> str:
    return r.arm.name + (" + pins" if r.arm.pins else "")


def _sweep_cell(r: ArmResult, base: ArmResult, cached: bool) -> str:
    ours, theirs = (r.dollars, base.dollars) if cached else (r.dollars_uncached, base.dollars_uncached)
    return f"{ours / theirs:.2f}× ({r.replace_count})" if theirs else "–"


def sweep(report: LabReport, *, cached: bool = True) -> Table:
    """Each arm's cost over ``none``'s for the same task (replaces in brackets)."""
    windows = sorted({r.arm.window for r in report.sweep if r.arm.name != NONE})
    managed = [n for n in report.arms if n != NONE]
    headers = ["modules", "steps", "none", *(f"{n} {w // 1000}K" for w in windows for n in managed)]
    rows = []
    for modules in sorted({r.modules for r in report.sweep}):
        base = next(r for r in report.sweep if r.arm.name == NONE and r.modules == modules)
        cells: list[object] = [modules, base.steps, money(base.dollars if cached else base.dollars_uncached)]
        for w in windows:
            for n in managed:
                r = next(
                    x for x in report.sweep if x.arm.name == n and x.arm.window == w and x.modules == modules
                )
                cells.append(_sweep_cell(r, base, cached))
        rows.append(cells)
    return Table.of(
        f"Each arm's cost over none's for the same task, {'with' if cached else 'without'} prompt "
        f"caching (replaces in brackets), in {_windows(windows)} windows; priced as {report.price_model}.",
        headers,
        rows,
    )


def _windows(windows: Sequence[int]) -> str:
    shown = [f"{w // 1000}K" for w in windows]
    return " and ".join(shown) if len(shown) < 3 else ", ".join(shown[:-1]) + " and " + shown[-1]


def break_even(
    report: LabReport, name: str = "rollover", *, against: str = NONE, cached: bool = True
) -> dict[int, int | None]:
    """Window -> the shortest swept task (modules) from which ``name`` costs no more than
    ``against`` at every longer swept length too; None: it never does within the sweep."""
    out: dict[int, int | None] = {}
    windows = sorted({r.arm.window for r in report.sweep if r.arm.name == name})
    lengths = sorted({r.modules for r in report.sweep})
    for w in windows:
        paying: int | None = None
        for modules in reversed(lengths):
            ours = _find(report.sweep, name, w, modules)
            theirs = _find(report.sweep, against, None if against == NONE else w, modules)
            a, b = (
                (ours.dollars, theirs.dollars) if cached else (ours.dollars_uncached, theirs.dollars_uncached)
            )
            if a > b:
                break
            paying = modules
        out[w] = paying
    return out


def _find(results: list[ArmResult], name: str, window: int | None, modules: int) -> ArmResult:
    return next(
        r
        for r in results
        if r.arm.name == name and r.modules == modules and (window is None or r.arm.window == window)
    )


def first_replace(report: LabReport, name: str, window: int) -> int | None:
    """The step before which ``name`` first replaced the context in ``window`` (the longest swept task)."""
    runs = sorted(
        (r for r in report.sweep if r.arm.name == name and r.arm.window == window), key=lambda r: r.modules
    )
    return runs[-1].replaced_at[0] if runs and runs[-1].replaced_at else None


def break_even_table(report: LabReport, name: str = "rollover") -> Table:
    """Per window: when ``name`` first replaces, and from which swept length it pays."""
    against = [a for a in (NONE, "compact") if a in report.arms and a != name]
    headers = ["window", f"first {name} at step"]
    headers += [f"≤ {a}, {'caching' if c else 'no caching'}" for a in against for c in (True, False)]
    found = {(a, c): break_even(report, name, against=a, cached=c) for a in against for c in (True, False)}
    rows = []
    windows = sorted({r.arm.window for r in report.sweep if r.arm.name == name})
    for w in windows:
        first = first_replace(report, name, w)
        cells: list[object] = [f"{w // 1000}K", first if first is not None else "none in the sweep"]
        for a in against:
            for c in (True, False):
                modules = found[(a, c)][w]
                steps = next(
                    (r.steps for r in report.sweep if r.arm.name == NONE and r.modules == modules), None
                )
                cells.append(f"from {modules} modules ({steps} steps)" if modules is not None else "never")
        rows.append(cells)
    return Table.of(
        f"Where {name} starts to pay, in {_windows(windows)} windows: the shortest swept task from which "
        f"it costs no more than {' or '.join(against)} at every longer length; priced as {report.price_model}.",
        headers,
        rows,
    )


def drift(report: LabReport) -> Table:
    """The share of the spec the context holds after each replace, per drift arm."""
    s = report.sizes
    generations = s.drift_generations
    headers = ["after replace", *(_short(r) for r in report.drift)]
    rows = []
    for g in range(generations):
        rows.append([g + 1, *(f"{r.drift[g]:.0%}" if g < len(r.drift) else "–" for r in report.drift)])
    rows.append(["replaces in all", *(r.replace_count for r in report.drift)])
    rows.append(["facts kept at the end", *(_kept(r) for r in report.drift)])
    return Table.of(
        f"The spec's share of the context after each replace: {s.drift_modules} modules, each arm "
        f"({_arms(report.drift)}) in a {s.drift_window // 1000}K window, without and with the spec pinned.",
        headers,
        rows,
    )


def _break_even_block(report: LabReport) -> list[str]:
    if "rollover" not in report.arms:
        return []
    return [str(break_even_table(report))]


def render(report: LabReport) -> str:
    s = report.sizes
    parts = [
        f"# Strategy lab ({s.name}): {', '.join(report.arms)}",
        "",
        f"Prices: {report.price_model} (prices.json). The lab's summaries and handoffs keep the "
        f"{report.budget} facts mentioned last. Measured in {report.seconds:.1f} s.",
        "",
        f"## Side by side: {s.modules} modules, managed arms in a {s.window // 1000}K window",
        "",
        str(side_by_side(report)),
        "",
        str(facts(report)),
        "",
        "## Sweep: cost over none's, with and without prompt caching",
        "",
        str(sweep(report, cached=True)),
        "",
        str(sweep(report, cached=False)),
        "",
        *_break_even_block(report),
        "",
        f"## Drift: {s.drift_modules} modules in a {s.drift_window // 1000}K window, the spec's share after each replace",
        "",
        str(drift(report)),
    ]
    return "\n".join(parts) + "\n"
