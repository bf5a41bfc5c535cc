"""The strategy lab's figures as bench rows (``pseudoclaude_nb.lab``; issue 31).

The lab itself is the package's (``python -m pseudoclaude_nb lab``); this section runs it at
the bench's size and keeps its numbers with the other results: one row per arm (its cost
with caching over the unmanaged arm's), where rollover starts to pay per window, the
spec's share after the drift run's last replace, and one sanity row — caching never costs
more than no caching, and every run ended ``done``. The tables go into ``results.md``.
"""

from __future__ import annotations

from typing import Any

from pseudoclaude_nb.lab import experiments, report
from pseudoclaude_nb.lab.model import NEWEST
from pseudoclaude_nb.lab.run import NONE

from .common import Row, Sizes


def lab_rows(sizes: Sizes) -> tuple[list[Row], dict[str, Any], str]:
    """(rows, every figure as JSON, the tables as Markdown)."""
    lab = experiments.run_lab(experiments.QUICK if sizes.name == "quick" else experiments.FULL)
    rows: list[Row] = []
    base = lab.find(lab.side_by_side, NONE)
    for r in lab.side_by_side:
        if r.arm.pins or r.arm.summarizer != NEWEST:
            continue
        pinned = next((p for p in lab.side_by_side if p.arm.pins and p.arm.name == r.arm.name), None)
        careful = next(
            (c for c in lab.side_by_side if c.arm.summarizer != NEWEST and c.arm.name == r.arm.name), None
        )
        rows.append(
            Row(
                key=f"lab_{r.arm.name}",
                what=f"strategy lab: {r.arm.label}, {lab.sizes.modules} modules",
                target="",
                value=round(r.dollars / base.dollars, 3) if base.dollars else None,
                unit="× none's cost (cached)",
                ok=None,
                detail={
                    "dollars_cached": round(r.dollars, 4),
                    "dollars_uncached": round(r.dollars_uncached, 4),
                    "replaces": r.replace_count,
                    "peak_context": r.peak_context,
                    "input_tokens": r.input_tokens,
                    "cache_read": r.cache_read,
                    "cache_write": r.cache_write,
                    "facts_kept": f"{sum(r.kept.values())}/{len(r.kept)}",
                    "facts_kept_pinned": f"{sum(pinned.kept.values())}/{len(pinned.kept)}" if pinned else "-",
                    "facts_kept_careful": f"{sum(careful.kept.values())}/{len(careful.kept)}"
                    if careful
                    else "-",
                },
            )
        )
    if "rollover" in lab.arms:
        for window, modules in report.break_even(lab).items():
            rows.append(
                Row(
                    key=f"lab_break_even_{window // 1000}k",
                    what=f"strategy lab: rollover costs no more than none (cached), {window // 1000}K window, from",
                    target="",
                    value=modules,
                    unit="modules",
                    ok=None,
                    detail={"first_rollover_at_step": report.first_replace(lab, "rollover", window)},
                    note="" if modules is not None else "never within the sweep",
                )
            )
    for r in lab.drift:
        last = (
            r.drift[lab.sizes.drift_generations - 1] if len(r.drift) >= lab.sizes.drift_generations else None
        )
        rows.append(
            Row(
                key=f"lab_drift_{r.arm.name}{'_pinned' if r.arm.pins else ''}"
                + ("" if r.arm.summarizer == NEWEST else f"_{r.arm.summarizer}"),
                what=f"strategy lab: spec kept after replace {lab.sizes.drift_generations}, {r.arm.label}",
                target="",
                value=round(last, 3) if last is not None else None,
                unit="of the spec",
                ok=None,
                detail={"replaces": r.replace_count},
            )
        )
    every = lab.side_by_side + lab.sweep + lab.drift
    cheaper = all(r.dollars <= r.dollars_uncached for r in every)
    done = all(s == "done" for r in every for s in r.statuses)
    rows.append(
        Row(
            key="lab_sanity",
            what="strategy lab: caching never costs more than no caching, and every run ends done",
            target="both hold",
            value=len(every),
            unit="runs",
            ok=cheaper and done,
            detail={"cached_le_uncached": cheaper, "all_done": done, "seconds": round(lab.seconds, 1)},
        )
    )
    tables = report.render(lab).split("\n", 1)[1]  # without its title: results.md has its own
    return rows, lab.to_dict(), tables
