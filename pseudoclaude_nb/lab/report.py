"""The lab's tables: each a ``Table`` headed by what it measured (the task, the window, the arms,
the summarizers, the prices), shown as an HTML table in a notebook and as Markdown in a terminal
and the docs.

Pure functions of a ``LabReport``: no run, no I/O. ``break_even`` is the sweep's answer to
the first open question, ``render`` the whole report. Every table is built from the report's
arms, whatever they are (a strategy of the registry, or one of the person's own), and says
which arm failed or was stopped by the budget, and why, under it (``Table.notes``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..cost import money
from .experiments import LabReport
from .model import NEWEST, summarizer_label
from .run import NONE, ArmResult
from .table import Table as Table  # re-exported: report.Table is the lab's table type
from .table import table as table
from .task import MUST_KEEP


def _arms(results: Sequence[ArmResult]) -> str:
    return ", ".join(dict.fromkeys(r.arm.name for r in results))


def _kept(r: ArmResult) -> str:
    return f"{sum(r.kept.values())}/{len(r.kept)}"


def _status(r: ArmResult) -> str:
    """`` (failed)`` or `` (stopped at the budget)`` after an arm that did not play to its end."""
    return " (failed)" if r.failed else " (stopped at the budget)" if r.stopped else ""


def _notes(results: Sequence[ArmResult]) -> list[str]:
    """One line per arm whose runs failed or were stopped, and why (the first such run's)."""
    out: dict[str, list[ArmResult]] = {}
    for r in results:
        if not r.done:
            out.setdefault(r.arm.name, []).append(r)
    lines = []
    for name, runs in out.items():
        r = runs[0]
        which = r.arm.label if len(runs) == 1 else f"{name}: {len(runs)} runs, the first ({r.arm.label})"
        if r.failed:
            lines.append(f"{which}: failed after {r.steps + r.summaries} requests: {r.failed}")
        else:
            lines.append(f"{which}: {r.stopped}")
    return lines


def _summarizers(results: Sequence[ArmResult]) -> list[str]:
    """The summarizers the managed runs had (unpinned), in the order they ran."""
    return list(dict.fromkeys(r.arm.summarizer for r in results if r.arm.name != NONE and not r.arm.pins))


def _runs(report: LabReport, results: Sequence[ArmResult], name: str) -> list[ArmResult]:
    return [r for r in results if r.arm.name == name]


def _summary_words(report: LabReport, kinds: Sequence[str]) -> str:
    if report.real is not None:
        return f"the summaries and handoffs are the real model's ({report.real['model']})"
    return "the lab model's summaries: " + " and ".join(
        f"{summarizer_label(k, report.budget)} ({_SUMMARIZER_WORDS.get(k, k)})" for k in kinds
    )


_SUMMARIZER_WORDS: dict[str, str] = {
    NEWEST: "the facts mentioned last: the worst case",
    "careful": "every must-keep fact seen: the good case",
}


def side_by_side(report: LabReport) -> Table:
    s = report.sizes
    kinds = _summarizers(report.side_by_side)
    pinned_runs = any(r.arm.pins for r in report.side_by_side)
    rows = []
    for name in report.arms:
        runs = _runs(report, report.side_by_side, name)
        base = next((r for r in runs if not r.arm.pins and r.arm.summarizer in (NEWEST, "real")), None)
        if base is None:
            continue
        figures: list[object] = ["–"] * 7
        if not base.failed:  # what a failed arm spent until it failed is no comparison
            figures = [
                base.replace_count,
                f"{base.peak_context:,}",
                f"{base.input_tokens:,}",
                f"{base.cache_read:,}",
                f"{base.cache_write:,}",
                money(base.dollars),
                money(base.dollars_uncached),
            ]
        kept = []
        for kind in kinds:
            r = (
                base
                if name == NONE
                else next((x for x in runs if not x.arm.pins and x.arm.summarizer == kind), None)
            )
            kept.append("–" if r is None else "failed" if r.failed else _kept(r))
        if pinned_runs:
            p = next((x for x in runs if x.arm.pins), None)
            kept.append("–" if p is None else "failed" if p.failed else _kept(p))
        rows.append([base.arm.label + _status(base), base.steps + base.summaries, *figures, *kept])
    headers = [
        "arm",
        "requests",
        "replaces",
        "peak context",
        "input tokens",
        "cache read",
        "cache write",
        "cost, caching",
        "cost, no caching",
        *(f"facts kept, {summarizer_label(k, report.budget)}" for k in kinds),
    ]
    if pinned_runs:
        headers.append(f"spec pinned, {summarizer_label(NEWEST, report.budget)}")
    where = f"in a {s.window // 1000}K window, none in one the task never fills"
    return Table.of(
        f"{_mode(report)}One task of {s.modules} modules, each arm ({', '.join(report.arms)}) {where}; "
        f"{_summary_words(report, kinds)}; priced as {report.price_model}.",
        headers,
        rows,
        _notes(report.side_by_side),
    )


def _mode(report: LabReport) -> str:
    """The caption's opening for a real model's run: which model, and when."""
    if report.real is None:
        return ""
    r = report.real
    return f"Real model: {r['model']} ({r['provider']}), {r['date']}. "


def _short(r: ArmResult) -> str:
    out = r.arm.name + (" + pins" if r.arm.pins else "")
    if r.arm.summarizer not in (NEWEST, "real"):
        out += f", {r.arm.summarizer}"
    return out + (" (failed)" if r.failed else " (stopped)" if r.stopped else "")


def facts(report: LabReport) -> Table:
    """Which must-keep fact each run's final context holds (✓) or lost (–); · never stated there."""
    s = report.sizes
    results = [r for r in report.side_by_side if r.arm.name != NONE or not r.arm.pins]
    headers = ["fact", *(_short(r) for r in results)]
    stated = [f for f in MUST_KEEP if any(f.key in r.kept for r in results)]

    def cell(r: ArmResult, key: str) -> str:
        if r.failed or key not in r.kept:
            return "·"
        return "✓" if r.kept[key] else "–"

    rows = [[f"{f.kind}: {f.needle}", *(cell(r, f.key) for r in results)] for f in stated]
    kinds = _summarizers(report.side_by_side)
    return Table.of(
        f"{_mode(report)}Must-keep facts in the final context (✓ kept, – lost, · not measured: never stated "
        f"in that run, or the run failed) of the side-by-side runs: {s.modules} modules, the managed arms "
        f"in a {s.window // 1000}K window; {_summary_words(report, kinds)}.",
        headers,
        rows,
        _notes(results),
    )


def _sweep_cell(r: ArmResult, base: ArmResult, cached: bool) -> str:
    if r.failed or base.failed:
        return "failed"
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
        f"caching (replaces in brackets), in {_windows(windows)} windows, "
        f"{summarizer_label(NEWEST, report.budget)}; priced as {report.price_model}.",
        headers,
        rows,
        _notes(report.sweep),
    )


def _windows(windows: Sequence[int]) -> str:
    shown = [f"{w // 1000}K" for w in windows]
    return " and ".join(shown) if len(shown) < 3 else ", ".join(shown[:-1]) + " and " + shown[-1]


# Two costs this close are the same cost: an arm that has not acted yet differs from none by a
# few tokens of its settings (13 of 111,543 at 2 modules), which the tables show as 1.00×.
SAME = 0.001


def break_even(
    report: LabReport, name: str = "rollover", *, against: str = NONE, cached: bool = True
) -> dict[int, int | None]:
    """Window -> the shortest swept task (modules) from which ``name`` costs no more than
    ``against`` (to ``SAME``) at every longer swept length too; None: it never does within the
    sweep (a failed run never pays)."""
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
            if a > b * (1 + SAME) or ours.failed or theirs.failed:
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


def break_even_table(report: LabReport, names: Sequence[str] | None = None) -> Table:
    """Per arm and window: when it first replaces, and from which swept length it pays against
    ``none`` and ``compact`` (``names``: the arms to show; default every managed one)."""
    shown = [n for n in (names or report.arms) if n != NONE and n in report.arms]
    against = [a for a in (NONE, "compact") if a in report.arms]
    headers = ["arm", "window", "first replace at step"]
    headers += [f"≤ {a}, {'caching' if c else 'no caching'}" for a in against for c in (True, False)]
    rows = []
    for name in shown:
        found = {
            (a, c): break_even(report, name, against=a, cached=c)
            for a in against
            if a != name
            for c in (True, False)
        }
        for w in sorted({r.arm.window for r in report.sweep if r.arm.name == name}):
            first = first_replace(report, name, w)
            cells: list[object] = [name, f"{w // 1000}K", first if first is not None else "none in the sweep"]
            for a in against:
                for c in (True, False):
                    if a == name:
                        cells.append("–")
                        continue
                    modules = found[(a, c)][w]
                    steps = next(
                        (r.steps for r in report.sweep if r.arm.name == NONE and r.modules == modules), None
                    )
                    cells.append(
                        f"from {modules} modules ({steps} steps)" if modules is not None else "never"
                    )
            rows.append(cells)
    windows = sorted({r.arm.window for r in report.sweep if r.arm.name != NONE})
    return Table.of(
        f"Where each arm starts to pay, in {_windows(windows)} windows: the shortest swept task from which "
        f"it costs no more than {' or '.join(against)} (to 0.1%) at every longer length; priced as "
        f"{report.price_model}.",
        headers,
        rows,
        _notes([r for r in report.sweep if r.arm.name in shown]),
    )


def drift(report: LabReport, results: Sequence[ArmResult] | None = None) -> Table:
    """The share of the spec the context holds after each replace, per drift run (``results``:
    other runs, e.g. a real model's side by side)."""
    s = report.sizes
    runs = list(report.drift if results is None else results)
    # The drift runs follow a set number of replaces; other runs show every replace they made.
    generations = s.drift_generations if results is None else max((len(r.drift) for r in runs), default=0)
    headers = ["after replace", *(_short(r) for r in runs)]
    rows = []
    for g in range(generations):
        rows.append([g + 1, *(f"{r.drift[g]:.0%}" if g < len(r.drift) else "–" for r in runs)])
    rows.append(["replaces in all", *(r.replace_count for r in runs)])
    rows.append(["facts kept at the end", *("·" if r.failed else _kept(r) for r in runs)])
    modules, window = (s.drift_modules, s.drift_window) if results is None else (s.modules, s.window)
    return Table.of(
        f"{_mode(report)}The spec's share of the context after each replace: {modules} modules, each arm "
        f"({_arms(runs)}) in a {window // 1000}K window; {_summary_words(report, _summarizers(runs))}"
        + ("; and the spec pinned." if any(r.arm.pins for r in runs) else "."),
        headers,
        rows,
        _notes(runs),
    )


def render(report: LabReport) -> str:
    s = report.sizes
    if report.real is not None:
        return _render_real(report)
    parts = [
        f"# Strategy lab ({s.name}): {', '.join(report.arms)}",
        "",
        f"Prices: {report.price_model} (prices.json). Two summarizers write the lab model's summaries and "
        f"handoffs: the worst case keeps the {report.budget} facts mentioned last; the careful one keeps every "
        f"must-keep fact it saw. Measured in {report.seconds:.1f} s.",
    ]
    if report.side_by_side:
        parts += [
            "",
            f"## Side by side: {s.modules} modules, managed arms in a {s.window // 1000}K window",
            "",
            str(side_by_side(report)),
            "",
            str(facts(report)),
        ]
    if report.sweep:
        parts += [
            "",
            "## Sweep: cost over none's, with and without prompt caching",
            "",
            str(sweep(report, cached=True)),
            "",
            str(sweep(report, cached=False)),
            "",
            str(break_even_table(report)),
        ]
    if report.drift:
        parts += [
            "",
            f"## Drift: {s.drift_modules} modules in a {s.drift_window // 1000}K window, the spec's share after each replace",
            "",
            str(drift(report)),
        ]
    return "\n".join(parts) + "\n"


def expected(report: LabReport) -> Table:
    """A real model's run: each arm's expected cost (its offline run, priced as the model), what
    it spent, its budget, and how it ended."""
    real = report.real or {}
    rows = []
    for r in report.side_by_side:
        guess = real.get("expected_usd", {}).get(r.arm.name)
        how = "failed" if r.failed else "stopped at the budget" if r.stopped else "done"
        rows.append(
            [
                r.arm.label,
                money(guess) if guess is not None else "–",
                money(r.dollars),
                money(real.get("arm_budget_usd", 0)),
                how,
            ]
        )
    return Table.of(
        f"{_mode(report)}What each arm was expected to cost (played offline by the lab's model, priced as "
        f"{report.price_model}), what it spent, and its budget.",
        ["arm", "expected", "spent", "budget", "ended"],
        rows,
        _notes(report.side_by_side),
    )


def _render_real(report: LabReport) -> str:
    s, real = report.sizes, report.real or {}
    parts = [
        f"# Strategy lab on a real model: {real.get('model')} ({real.get('provider')}), {real.get('date')}",
        "",
        f"Real model: every request went to {real.get('provider')} ({real.get('model')}) through this "
        f"package's provider, prompt cache as in any run; the budget was {money(real.get('budget_usd', 0))} "
        f"({money(real.get('arm_budget_usd', 0))} an arm), {money(real.get('spent_usd', 0))} spent. "
        f"Prices: {report.price_model} (prices.json). Measured in {report.seconds:.1f} s.",
        "",
        str(expected(report)),
        "",
        f"## Side by side: {s.modules} modules, managed arms in a {s.window // 1000}K window",
        "",
        str(side_by_side(report)),
        "",
        str(facts(report)),
    ]
    managed = [r for r in report.side_by_side if r.arm.name != NONE]
    if any(r.drift for r in managed):
        parts += ["", "## Drift: the spec's share after each replace", "", str(drift(report, managed))]
    return "\n".join(parts) + "\n"
