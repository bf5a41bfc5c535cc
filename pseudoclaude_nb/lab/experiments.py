"""The lab's three experiments, at two sizes: what ``python -m pseudoclaude_nb lab`` runs.

1. **Side by side**: the task under every arm (``none``, each registry strategy and any of
   the person's own, ``arms``), with the worst-case summarizer, with the careful one, and
   with the spec pinned: cost, cache, replaces, peak context, facts kept.
2. **Sweep** (open question 1): task length × window (how often the strategies replace)
   for every arm, to find where each strategy starts to pay under caching.
3. **Drift** (open question 2): a task long enough for ten and more replaces, under every
   strategy with the worst-case summarizer, the careful one, and the spec pinned: the share
   of the spec in the context after each replace.

Every figure comes from a run; nothing here is a constant of the answer. ``QUICK`` keeps
the shape at a fraction of the time (tests, the notebooks); ``parts`` runs some of the three.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from . import arms as arm_specs
from .model import CAREFUL
from .model import DEFAULT_BUDGET as DEFAULT_BUDGET  # re-exported: the CLI's default
from .run import NONE, UNMANAGED_WINDOW, Arm, ArmResult, lab_process, run_arm
from .task import build_task

Part = Literal["side_by_side", "sweep", "drift"]
PARTS: tuple[Part, ...] = ("side_by_side", "sweep", "drift")

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
    side_by_side: list[ArmResult] = field(default_factory=list)  # each summarizer, and pins
    sweep: list[ArmResult] = field(default_factory=list)
    drift: list[ArmResult] = field(default_factory=list)
    seconds: float = 0.0
    # The strategy each arm's runs were set to (a person's own: ``MODULE:CLASS``), by arm name.
    settings: dict[str, str] = field(default_factory=dict)
    # A real model's run (``lab.real``): provider, model, date, budget, expected costs; None: the
    # lab's own scripted model, offline.
    real: dict[str, Any] | None = None

    def find(
        self,
        results: list[ArmResult],
        name: str,
        *,
        pins: bool = False,
        window: int | None = None,
        summarizer: str | None = None,
    ) -> ArmResult:
        for r in results:
            if (
                r.arm.name == name
                and r.arm.pins == pins
                and (window is None or r.arm.window == window)
                and (summarizer is None or r.arm.summarizer == summarizer)
            ):
                return r
        raise KeyError(f"no result for {name} (pins={pins}, window={window}, summarizer={summarizer})")

    @property
    def mode(self) -> str:
        return "scripted" if self.real is None else "real model"

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "real": self.real,
            "sizes": self.sizes.__dict__,
            "price_model": self.price_model,
            "summary_budget": self.budget,
            "arms": self.arms,
            "strategies": self.settings,
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
    arms: Sequence[str] | None = None,
    parts: Sequence[Part] = PARTS,
    folder: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> LabReport:
    """Run the experiments (``parts``) in a temporary folder (removed after); every figure measured.

    ``arms``: strategy settings (``compact``, ``MODULE:CLASS``…; default: every built-in), each
    loaded before any arm plays, a person's from ``folder`` (default: the current folder);
    ``none`` always runs: the ratios and the break-even are against it."""
    folder = Path.cwd() if folder is None else folder
    specs = arm_specs.resolve(arms if arms is not None else [a.setting for a in arm_specs.built_in()], folder)
    strategies = arm_specs.loader(folder)
    report = LabReport(sizes, price_model, budget, [a.name for a in specs])
    report.settings = {a.name: a.setting for a in specs if a.name != NONE}
    say = progress or (lambda _text: None)
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="pseudoclaude-lab-"))
    managed = [a for a in specs if a.name != NONE]
    try:
        with lab_process(root / "home"):

            def play(arm: Arm, modules: int) -> ArmResult:
                result = run_arm(
                    arm,
                    build_task(modules),
                    root,
                    price_model=price_model,
                    budget=budget,
                    strategies=strategies,
                )
                result.modules = modules
                if result.failed:
                    say(f"{arm.label} failed: {result.failed}")
                return result

            if "side_by_side" in parts:
                say(
                    f"side by side: {sizes.modules} modules under {', '.join(report.arms)}; "
                    "each summarizer, and pins"
                )
                for spec in specs:
                    report.side_by_side += [play(a, sizes.modules) for a in _variants(spec, sizes.window)]
            if "sweep" in parts:
                say(f"sweep: {len(sizes.sweep_modules)} lengths x {len(sizes.sweep_windows)} windows")
                for modules in sizes.sweep_modules:
                    for spec in specs:
                        windows = (UNMANAGED_WINDOW,) if spec.name == NONE else sizes.sweep_windows
                        for window in windows:
                            report.sweep.append(play(_arm(spec, window), modules))
            if "drift" in parts:
                say(f"drift: {sizes.drift_modules} modules in a {sizes.drift_window // 1000}K window")
                for spec in managed:
                    report.drift += [
                        play(a, sizes.drift_modules) for a in _variants(spec, sizes.drift_window)
                    ]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report.seconds = time.perf_counter() - started
    return report


def _arm(spec: arm_specs.ArmSpec, window: int) -> Arm:
    if spec.name == NONE:
        return Arm(NONE, UNMANAGED_WINDOW)
    return Arm(spec.name, window, setting=spec.setting if spec.setting != spec.name else None)


def _variants(spec: arm_specs.ArmSpec, window: int) -> list[Arm]:
    """An arm's runs where the summarizer matters: the worst case, the spec pinned (under the
    worst case), the careful summarizer; ``none`` summarizes nothing and runs once."""
    base = _arm(spec, window)
    if spec.name == NONE:
        return [base]
    return [base, replace(base, pins=True), replace(base, summarizer=CAREFUL)]
