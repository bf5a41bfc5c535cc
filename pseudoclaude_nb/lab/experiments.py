"""The lab's three experiments, at two sizes: what ``python -m pseudoclaude_nb lab`` runs.

1. **Side by side**: the task under every arm (``none`` and each registry strategy), with
   and without the spec pinned: cost, cache, replaces, peak context, facts kept.
2. **Sweep** (open question 1): task length × window (how often the strategies replace)
   for every arm, to find where rollover stops paying under caching.
3. **Drift** (open question 2): a task long enough for ten and more replaces, under every
   strategy with and without the spec pinned: the share of the spec in the context after
   each replace.

Every figure comes from a run; nothing here is a constant of the answer. ``QUICK`` keeps
the shape at a fraction of the time (tests, the notebook).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .model import DEFAULT_BUDGET as DEFAULT_BUDGET  # re-exported: the CLI's default
from .run import NONE, UNMANAGED_WINDOW, Arm, ArmResult, lab_process, run_arm, strategy_names
from .task import build_task

PRICE_MODEL = "claude-sonnet-4-5"  # $3 input, $15 output, write 1.25x, read 0.1x (prices.json)


@dataclass(frozen=True)
class LabSizes:
    name: str
    modules: int  # the side-by-side task (a module is ~5 steps, ~5,000 tokens)
    window: int  # the managed arms' window there
    sweep_modules: tuple[int, ...]
    sweep_windows: tuple[int, ...]
    drift_modules: int
    drift_window: int
    drift_generations: int  # replaces the drift table follows (the issue: 10)


FULL = LabSizes(
    name="full",
    modules=24,
    window=60_000,
    sweep_modules=(2, 4, 8, 16, 32),
    sweep_windows=(40_000, 80_000, 160_000),
    drift_modules=40,
    drift_window=40_000,
    drift_generations=10,
)
QUICK = LabSizes(
    name="quick",
    modules=8,
    window=60_000,
    sweep_modules=(2, 4, 8),
    sweep_windows=(40_000,),
    drift_modules=14,
    drift_window=40_000,
    drift_generations=3,
)


@dataclass
class LabReport:
    sizes: LabSizes
    price_model: str
    budget: int
    arms: list[str]
    side_by_side: list[ArmResult] = field(default_factory=list)  # pins off and on
    sweep: list[ArmResult] = field(default_factory=list)
    drift: list[ArmResult] = field(default_factory=list)
    seconds: float = 0.0

    def find(
        self, results: list[ArmResult], name: str, *, pins: bool = False, window: int | None = None
    ) -> ArmResult:
        for r in results:
            if r.arm.name == name and r.arm.pins == pins and (window is None or r.arm.window == window):
                return r
        raise KeyError(f"no result for {name} (pins={pins}, window={window})")

    def to_dict(self) -> dict[str, Any]:
        return {
            "sizes": self.sizes.__dict__,
            "price_model": self.price_model,
            "summary_budget": self.budget,
            "arms": self.arms,
            "seconds": round(self.seconds, 1),
            "side_by_side": [r.to_dict() for r in self.side_by_side],
            "sweep": [r.to_dict() for r in self.sweep],
            "drift": [r.to_dict() for r in self.drift],
        }


def run_lab(
    sizes: LabSizes = FULL,
    *,
    price_model: str = PRICE_MODEL,
    budget: int = DEFAULT_BUDGET,
    arms: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> LabReport:
    """Run the three experiments in a temporary folder (removed after); every figure measured."""
    # ``none`` always runs: the sweep's ratios and the break-even are against it.
    names = [NONE, *(n for n in (arms or strategy_names()) if n != NONE)]
    report = LabReport(sizes, price_model, budget, names)
    say = progress or (lambda _text: None)
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="pseudoclaude-lab-"))
    try:
        with lab_process(root / "home"):

            def play(arm: Arm, modules: int) -> ArmResult:
                result = run_arm(arm, build_task(modules), root, price_model=price_model, budget=budget)
                result.modules = modules
                return result

            say(f"side by side: {sizes.modules} modules under {', '.join(names)}, pins off and on")
            for name in names:
                base = _arm(name, sizes.window)
                report.side_by_side.append(play(base, sizes.modules))
                if name != NONE:
                    report.side_by_side.append(play(replace(base, pins=True), sizes.modules))
            say(f"sweep: {len(sizes.sweep_modules)} lengths x {len(sizes.sweep_windows)} windows")
            for modules in sizes.sweep_modules:
                for name in names:
                    windows = (UNMANAGED_WINDOW,) if name == NONE else sizes.sweep_windows
                    for window in windows:
                        report.sweep.append(play(_arm(name, window), modules))
            say(f"drift: {sizes.drift_modules} modules in a {sizes.drift_window // 1000}K window")
            for name in (n for n in names if n != NONE):
                for pins in (False, True):
                    report.drift.append(play(Arm(name, sizes.drift_window, pins), sizes.drift_modules))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report.seconds = time.perf_counter() - started
    return report


def _arm(name: str, window: int) -> Arm:
    return Arm(name, UNMANAGED_WINDOW if name == NONE else window)
