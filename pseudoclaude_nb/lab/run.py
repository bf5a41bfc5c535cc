"""One arm of the lab: the task played through the real ``Agent`` under one strategy.

An arm is a built-in strategy (``context.policies.BUILT_IN``: compact, rollover and api) in a managed window, or ``none``: the same agent in a window
so large that nothing is ever replaced, with Layer 1 off. Each arm gets a fresh workspace
and session; the agent runs every tool call for real and logs as always. What comes back is
measured, not assumed: every request's usage as the provider reported it, the replaces the
conversation saw, and which facts the final context — and the context after each replace —
still holds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..agent import Agent
from ..config import PseudoClaude
from ..context.policies import BUILT_IN
from ..messages import Message
from ..providers import scripted
from ..providers.base import Request
from ..session.entries import ReplaceEntry, parse_line
from ..workspace import LOG_NAME
from .facts import context_text, kept
from .model import DEFAULT_BUDGET, LabModel
from .task import MUST_KEEP, PIN_TEXTS, SPEC, Fact, Task, make_workspace

NONE = "none"
UNMANAGED_WINDOW = 10_000_000  # a window the task never fills: no replace, ever
# Replaces that are not a strategy's (Layer 1's spill snapshot, a repair, an undo, an edit).
NOT_A_STRATEGY = frozenset({"snapshot", "resync", "edit", "undo"})


@dataclass(frozen=True)
class Arm:
    name: str  # "none" or a registry strategy
    window: int
    pins: bool = False

    @property
    def strategy(self) -> str:
        return "compact" if self.name == NONE else self.name

    @property
    def label(self) -> str:
        if self.name == NONE:
            return "none (no management)"
        return f"{self.name} ({self.window // 1000}K window)" + (" + pins" if self.pins else "")


def strategy_names() -> list[str]:
    """``none`` and every strategy of the registry, in its order: a new strategy is a new arm."""
    return [NONE, *BUILT_IN]


@dataclass
class ArmResult:
    arm: Arm
    modules: int = 0  # the task's length
    steps: int = 0  # agent requests
    summaries: int = 0  # summary requests (Layer 2)
    handoffs: int = 0  # new_context answers to a rollover reminder
    replaces: dict[str, int] = field(default_factory=dict)  # by reason, strategy replaces only
    spills: int = 0
    input_tokens: int = 0  # every prompt token of every request: uncached + cache read + cache write
    uncached_input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0
    peak_context: int = 0  # the largest agent request, tokens
    dollars: float = 0.0  # with prompt caching
    dollars_uncached: float = 0.0  # the same requests, every prompt token at the input price
    kept: dict[str, bool] = field(default_factory=dict)  # must-keep fact -> in the final context
    drift: list[float] = field(default_factory=list)  # spec kept after each replace, in order
    replaced_at: list[int] = field(default_factory=list)  # the agent step each replace came before
    per_step: list[int] = field(default_factory=list)  # prompt tokens of each agent request
    statuses: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def replace_count(self) -> int:
        return sum(self.replaces.values())

    @property
    def fidelity(self) -> float:
        return sum(self.kept.values()) / len(self.kept) if self.kept else 1.0

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "arm"}
        out.update(arm=self.arm.name, window=self.arm.window, pins=self.arm.pins, label=self.arm.label)
        out.update(replace_count=self.replace_count, fidelity=round(self.fidelity, 3))
        return out


@contextlib.contextmanager
def lab_process(home: Path) -> Iterator[None]:
    """``PSEUDOCLAUDE_HOME`` in the lab's folder while the lab runs, put back after: no MCP
    server or memory of the person's is started or read by the lab's agents."""
    before = os.environ.get("PSEUDOCLAUDE_HOME")
    os.environ["PSEUDOCLAUDE_HOME"] = str(home)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PSEUDOCLAUDE_HOME", None)
        else:
            os.environ["PSEUDOCLAUDE_HOME"] = before


def run_arm(
    arm: Arm,
    task: Task,
    root: Path,
    *,
    price_model: str,
    budget: int = DEFAULT_BUDGET,
) -> ArmResult:
    """Play ``task`` under ``arm`` in a fresh workspace under ``root``; every figure measured."""
    workspace = Path(tempfile.mkdtemp(prefix=f"{arm.name}-", dir=root))
    make_workspace(workspace, task.phases)
    scripted.reset_cache()
    model = LabModel(task, context_window=arm.window, budget=budget)
    settings: dict[str, Any] = dict(
        workspace=str(workspace),
        provider="scripted",
        script="(the lab's task)",
        permission_mode="auto",
        fsync=False,
        memory_policy="off",
        max_steps=10_000,
        context_window=arm.window,
        strategy=arm.strategy,
    )
    if arm.name == NONE:
        settings.update(spill_bytes=10**12, spill_batch_bytes=10**12)
    # Every run of the arm gets the one model that keeps its place in the task.
    agent = Agent(PseudoClaude(**settings), providers=lambda _config: model)
    result = ArmResult(arm)
    started = time.perf_counter()
    try:
        try:
            if arm.pins:
                for text in PIN_TEXTS:
                    agent.pins.add(text)
            for prompt, _turns in task.runs:
                summary = agent.run(prompt)
                result.statuses.append(
                    summary.status if summary.error is None else f"{summary.status}: {summary.error}"
                )
            assert agent.session is not None
            final, log = agent.session.conversation.messages(), agent.session.dir / LOG_NAME
        finally:
            agent.close()
        result.seconds = time.perf_counter() - started
        _count_replaces(result, log)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    _measure(result, model, task, final, price_model)
    return result


def _count_replaces(result: ArmResult, log: Path) -> None:
    """The replaces the session log records, by reason (read with the log's one parser)."""
    with log.open("rb") as f:
        for line in f:
            entry = parse_line(line)
            if not isinstance(entry, ReplaceEntry):
                continue
            if entry.reason == "snapshot":
                result.spills += 1
            if entry.reason not in NOT_A_STRATEGY:
                result.replaces[entry.reason] = result.replaces.get(entry.reason, 0) + 1


def _measure(
    result: ArmResult,
    model: LabModel,
    task: Task,
    final: list[Message],
    price_model: str,
) -> None:
    requests = model.inner.requests
    agent_requests = [r for r in requests if r.purpose == "agent"]
    result.steps = len(agent_requests)
    result.summaries, result.handoffs = model.summaries, model.handoffs
    for paid in model.paid:
        u = paid.usage
        # A provider's own compaction (the api strategy) is billed beside the request's context:
        # its input and output count here as plain tokens (absent from usages without it).
        compacted_in = getattr(u, "compaction_input_tokens", 0)
        result.input_tokens += u.prompt_total + compacted_in
        result.uncached_input += u.input_tokens + compacted_in
        result.cache_read += u.cache_read_input_tokens
        result.cache_write += u.cache_creation_input_tokens
        result.output_tokens += u.output_tokens + getattr(u, "compaction_output_tokens", 0)
        if paid.purpose == "agent":
            result.per_step.append(u.prompt_total)
    result.peak_context = max(result.per_step, default=0)
    cost = model.spend(price_model).cost()
    result.dollars, result.dollars_uncached = cost.dollars, cost.uncached
    must = [f for f in MUST_KEEP if f in task.facts]
    system = agent_requests[-1].system if agent_requests else ""
    result.kept = kept(must, context_text(system, final))
    _follow_the_spec(result, agent_requests, [f for f in SPEC if f in task.facts])


def _follow_the_spec(result: ArmResult, agent_requests: list[Request], spec: list[Fact]) -> None:
    """Where the strategy replaced the context, and the share of the spec stated by then that
    the first request after each replace still holds (``drift``).

    A strategy's replace starts the conversation over: the first request after one is the
    first whose opening message differs from the request before it's (Layer 1's snapshots
    rewrite a tool result further on, never the opening message). The spec counted is what
    the user had stated by then (the rule comes with the second prompt).
    """
    stated: set[str] = set()
    seen: set[str] = set()  # messages (and system prompts) already read for what they state
    opening: str | None = None
    for step, request in enumerate(agent_requests, 1):
        new = [m for m in request.messages if m.id not in seen]
        seen.update(m.id for m in new)
        heard = context_text("" if request.system in seen else request.system, new)
        seen.add(request.system)
        stated |= {key for key, hit in kept(spec, heard).items() if hit}
        first = request.messages[0].id if request.messages else None
        if opening is not None and first != opening:
            result.replaced_at.append(step)
            if stated:
                found = kept(spec, context_text(request.system, request.messages))
                result.drift.append(sum(found[key] for key in stated) / len(stated))
        opening = first
