"""The lab on a real model, within a budget (issue 46): ``lab --provider P --model M --budget-usd X``.

The same task, arms and measurements as offline, with every request sent to a real model
through this package's own provider — so the prompt cache is used as any ``%agent`` run uses
it (Anthropic: the cache breakpoints ``anthropic_messages`` places; OpenAI: its automatic
prefix caching) — and the summaries and handoffs the model writes are what the fidelity
figures check for the must-keep facts. Only the side-by-side experiment runs (one run per
arm, nothing pinned): the sweep and the drift runs would cost many times more.

Money is spent only after the person agreed to it: ``plan`` plays each arm offline first
with the lab's model and prices it as the real one — the expected cost of each arm, printed
before any request — and ``confirmed`` asks (``--yes`` answers for them; with nobody to ask it
refuses, saying how to go on). The budget is the whole run's, shared evenly by the arms:
each arm's ``meter.Meter`` stops it before a request that could pass its share.

Keys and endpoints come from the environment, as the providers read them
(``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ``*_BASE_URL``); the lab never prints them. The
model's file edits stay in each arm's temporary workspace; its shell commands and Python
are refused (``FileToolsOnly``): the lab runs unattended.
"""

from __future__ import annotations

import datetime
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import RunConfig
from ..context.registry import check_provider
from ..cost import money
from ..errors import ConfigError
from ..events import RunEvent, ToolStarted
from ..providers import make_provider, provider_for
from . import arms as arm_specs
from .experiments import LabReport, LabSizes
from .meter import BudgetReached, Meter
from .run import NONE, UNMANAGED_WINDOW, Arm, ArmResult, Play, lab_process, run_arm
from .table import Table
from .task import build_task

PROVIDERS = ("anthropic", "openai")
REAL = "real"  # the summarizer of an arm on a real model: the model itself
RUN_STEPS = 100  # steps one %agent run of the task may take (the script's take about 33)


@dataclass(frozen=True)
class RealModel:
    """Which model the lab spends on, and how much at most (US dollars, the whole run)."""

    provider: str
    model: str
    budget_usd: float
    openai_api: str = "auto"  # chat completions or the Responses API (``PseudoClaude.openai_api``)
    date: str = field(default_factory=lambda: datetime.date.today().isoformat())

    def settings(self) -> dict[str, Any]:
        return dict(provider=self.provider, model=self.model, script="", openai_api=self.openai_api)


@dataclass
class Planned:
    """The arms to run on the real model, each with its expected cost and share of the budget."""

    real: RealModel
    sizes: LabSizes
    price_model: str
    specs: list[arm_specs.ArmSpec]
    expected: dict[str, ArmResult]  # arm name -> its offline run, priced as the real model
    left_out: list[str] = field(default_factory=list)  # default arms the provider cannot serve, and why

    @property
    def arm_budget(self) -> float:
        return self.real.budget_usd / len(self.specs)

    @property
    def expected_total(self) -> float:
        return sum(r.dollars for r in self.expected.values())

    def table(self) -> Table:
        rows = [
            [r.arm.label, r.steps + r.summaries, money(r.dollars), money(self.arm_budget)]
            for r in self.expected.values()
        ]
        return Table.of(
            f"Expected cost of each arm on {self.real.model} ({self.real.provider}): the same arm played "
            f"offline by the lab's model ({self.sizes.modules} modules), priced as {self.price_model}; a real "
            f"model takes its own steps, so it may cost more or less. Each arm stops at its budget.",
            ["arm", "requests", "expected cost", "budget"],
            rows,
            [f"left out: {why}" for why in self.left_out],
        )

    def text(self) -> str:
        over = (
            " That is more than the budget: an arm that needs more than its share stops at it."
            if self.expected_total > self.real.budget_usd
            else ""
        )
        return (
            f"{self.table()}\n\nExpected in all: {money(self.expected_total)}; the budget is "
            f"{money(self.real.budget_usd)} in all ({money(self.arm_budget)} an arm).{over}"
        )


def arm_of(spec: arm_specs.ArmSpec, window: int, summarizer: str) -> Arm:
    if spec.name == NONE:
        return Arm(NONE, UNMANAGED_WINDOW, summarizer=summarizer)
    return Arm(
        spec.name, window, summarizer=summarizer, setting=spec.setting if spec.setting != spec.name else None
    )


def served(
    real: RealModel, asked: Sequence[str] | None, folder: Path
) -> tuple[list[arm_specs.ArmSpec], list[str]]:
    """The arms to run (``none`` first) and the default ones left out, with why. ``ConfigError``,
    one line, before anything is sent: no key, an unknown model, or an arm named in ``asked``
    that does not load or that this provider cannot serve (``--strategy api`` needs one that
    manages the context itself)."""
    provider = make_provider(real.provider, model=real.model, openai_api=real.openai_api)
    named = asked is not None
    specs = arm_specs.resolve(
        asked if asked is not None else [a.setting for a in arm_specs.built_in()], folder
    )
    load = arm_specs.loader(folder)
    kept, left_out = [], []
    for spec in specs:
        try:
            check_provider(load(spec.setting, None), provider)
        except ConfigError as exc:
            if named:
                raise ConfigError(f"--arms {spec.setting}: {exc}") from None
            left_out.append(f"{spec.name}: {' '.join(str(exc).split())}")
            continue
        kept.append(spec)
    return kept, left_out


def plan(
    real: RealModel,
    sizes: LabSizes,
    *,
    price_model: str,
    asked: Sequence[str] | None = None,
    folder: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Planned:
    """Each arm played offline by the lab's model and priced as ``price_model``: what the run
    is expected to cost. Sends nothing."""
    folder = Path.cwd() if folder is None else folder
    specs, left_out = served(real, asked, folder)
    say = progress or (lambda _text: None)
    say(f"expected cost: {len(specs)} arms played offline, priced as {price_model}")
    expected: dict[str, ArmResult] = {}
    root = Path(tempfile.mkdtemp(prefix="pseudoclaude-lab-"))
    try:
        with lab_process(root / "home"):
            for spec in specs:
                arm = arm_of(spec, sizes.window, "newest")
                result = run_arm(
                    arm,
                    build_task(sizes.modules),
                    root,
                    price_model=price_model,
                    strategies=arm_specs.loader(folder),
                )
                expected[spec.name] = result
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return Planned(real, sizes, price_model, specs, expected, left_out)


NO_ONE = (
    "nobody to answer (stdin is not a terminal): nothing was sent. Rerun with --yes to spend up to {budget} "
    "on {model}, or without --provider to run the lab offline"
)


def confirmed(planned: Planned, *, yes: bool, ask: Callable[[str], str] | None = None) -> str | None:
    """None when the person agreed to spend (``yes``: they did on the command line), else why not."""
    if yes:
        return None
    budget, model = money(planned.real.budget_usd), planned.real.model
    if ask is None:
        if not sys.stdin or not sys.stdin.isatty():
            return NO_ONE.format(budget=budget, model=model)
        ask = input
    try:
        answer = ask(f"Send these requests to {planned.real.provider} ({model}), up to {budget}? [y/N] ")
    except (EOFError, OSError):
        return NO_ONE.format(budget=budget, model=model)
    if answer.strip().lower() in ("y", "yes"):
        return None
    return "not sent: nothing was spent (answer y to run, or pass --yes)"


class FileToolsOnly:
    """The permission answers of an unattended run: the model may write and edit files in its
    temporary workspace; its shell commands and Python are refused. It hears which tool asks
    from the run's ``ToolStarted`` event, which comes before the permission prompt."""

    ALLOWED = ("write_file", "edit_file")

    def __init__(self) -> None:
        self.tool: str | None = None

    def listen(self, event: RunEvent) -> None:
        if isinstance(event, ToolStarted):
            self.tool = event.call.name

    def ask(self, _prompt: str) -> str:
        return "y" if self.tool in self.ALLOWED else "n"


def run_real(
    planned: Planned, *, progress: Callable[[str], None] | None = None, folder: Path | None = None
) -> LabReport:
    """Play each planned arm on the real model, each within its share of the budget."""
    folder = Path.cwd() if folder is None else folder
    real, sizes = planned.real, planned.sizes
    say = progress or (lambda _text: None)
    report = LabReport(sizes, planned.price_model, 0, [s.name for s in planned.specs])
    report.settings = {s.name: s.setting for s in planned.specs if s.name != NONE}
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="pseudoclaude-lab-"))
    try:
        with lab_process(root / "home"):
            for spec in planned.specs:
                arm = arm_of(spec, sizes.window, REAL)
                meter = Meter(planned.price_model, planned.arm_budget)
                guard = FileToolsOnly()

                def providers(config: RunConfig, meter: Meter = meter) -> Any:
                    return meter.provider(provider_for(config))

                play = Play(
                    meter,
                    providers,
                    settings={**real.settings(), "permission_mode": "ask", "max_steps": RUN_STEPS},
                    ask=guard.ask,
                    listeners=(guard.listen,),
                    stopped=lambda error: isinstance(error, BudgetReached),
                )
                say(f"{arm.label}: on {real.model}, up to {money(planned.arm_budget)}")
                result = run_arm(
                    arm,
                    build_task(sizes.modules),
                    root,
                    price_model=planned.price_model,
                    strategies=arm_specs.loader(folder),
                    play=play,
                )
                result.modules = sizes.modules
                said = result.failed or result.stopped or "done"
                say(f"{arm.label}: {len(meter.paid)} requests, {money(meter.spent)} spent; {said}")
                report.side_by_side.append(result)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report.seconds = time.perf_counter() - started
    report.real = {
        "provider": real.provider,
        "model": real.model,
        "date": real.date,
        "budget_usd": real.budget_usd,
        "arm_budget_usd": round(planned.arm_budget, 6),
        "spent_usd": round(sum(r.dollars for r in report.side_by_side), 6),
        "expected_usd": {name: round(r.dollars, 6) for name, r in planned.expected.items()},
        "left_out": planned.left_out,
    }
    return report


def budget_problem(text: str) -> tuple[float | None, str | None]:
    """``--budget-usd``: (dollars, None), or (None, why it is refused)."""
    try:
        value = float(text)
    except ValueError:
        return (
            None,
            f"--budget-usd {text}: not a number; give the most the run may spend, in US dollars (e.g. 2.50)",
        )
    if value != value or value in (float("inf"), float("-inf")) or value <= 0:
        return None, f"--budget-usd {text}: must be a number of US dollars above 0 (e.g. 2.50)"
    return value, None


__all__ = [
    "PROVIDERS",
    "FileToolsOnly",
    "Planned",
    "RealModel",
    "budget_problem",
    "confirmed",
    "plan",
    "run_real",
    "served",
]
