"""One arm of the lab: the task played through the real ``Agent`` under one strategy.

An arm is a strategy in a managed window — a built-in (``context.policies.BUILT_IN``:
compact, rollover and api) or the person's own (``MODULE:CLASS``, ``lab.arms``) — or
``none``: the same agent in a window so large that nothing is ever replaced, with Layer 1
off. Each arm gets a fresh workspace and session; the agent runs every tool call for real
and logs as always. What comes back is measured, not assumed: every request's usage as the
provider reported it, the replaces the conversation saw, and which facts the final context
— and the context after each replace — still holds.

The model is the lab's (``model.LabModel``, with the worst-case or the careful summarizer)
unless a ``Play`` is given: the real model of ``lab.real``, which plays the same task within
a budget (its ``Player`` is the arm's ``meter.Meter``). An arm whose run ends in an error — a strategy that raised, a provider
that refused — stops there and is marked ``failed`` (the budget: ``stopped``); the lab goes
on with the other arms.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..agent import Agent
from ..config import PseudoClaude, RunConfig
from ..context.registry import load_strategy
from ..cost import Spend
from ..errors import PseudoClaudeError
from ..events import Listener
from ..messages import Message
from ..providers import scripted
from ..providers.base import Provider, Request
from ..session.entries import ReplaceEntry, parse_line
from ..strategies import Strategy
from ..workspace import LOG_NAME
from .arms import NONE, built_in
from .facts import context_text, kept
from .model import DEFAULT_BUDGET, NEWEST, LabModel, Paid, Summarizer, summarizer_label
from .task import MUST_KEEP, PIN_TEXTS, SPEC, Fact, Task, make_workspace

UNMANAGED_WINDOW = 10_000_000  # a window the task never fills: no replace, ever
# Replaces that are not a strategy's (Layer 1's spill snapshot, a repair, an undo, an edit).
NOT_A_STRATEGY = frozenset({"snapshot", "resync", "edit", "undo"})


@dataclass(frozen=True)
class Arm:
    name: str  # "none", a built-in strategy, or the name of the person's strategy
    window: int
    pins: bool = False
    # Who writes the summaries and handoffs: the lab model's worst case (``newest``), its good
    # case (``careful``), or ``real``: the real model the arm plays on (``lab.real``).
    summarizer: str = NEWEST
    setting: str | None = None  # the strategy setting (``MODULE:CLASS``) when not ``name``

    @property
    def strategy(self) -> str:
        return "compact" if self.name == NONE else self.setting or self.name

    @property
    def label(self) -> str:
        if self.name == NONE:
            return "none (no management)"
        out = f"{self.name} ({self.window // 1000}K window)" + (" + pins" if self.pins else "")
        return out + (
            f", {summarizer_label(self.summarizer)}" if self.summarizer not in (NEWEST, "real") else ""
        )


def strategy_names() -> list[str]:
    """``none`` and every strategy of the registry, in its order: a new strategy is a new arm."""
    return [a.name for a in built_in()]


class Player(Protocol):
    """Who answers an arm's requests, and what it saw and was paid (``model.LabModel``, or the
    real model's meter, ``lab.meter.Meter``)."""

    summaries: int
    handoffs: int

    @property
    def requests(self) -> list[Request]: ...

    @property
    def paid(self) -> list[Paid]: ...

    def spend(self, price_model: str) -> Spend: ...


@dataclass
class Play:
    """How an arm is played when not by the lab's model (``lab.real``): the settings its runs
    get besides the lab's, its provider, what answers a permission prompt, and the listeners."""

    player: Player
    providers: Callable[[RunConfig], Provider]
    settings: dict[str, Any] = field(default_factory=dict)
    ask: Callable[[str], str] | None = None
    listeners: tuple[Listener, ...] = ()
    stopped: Callable[[PseudoClaudeError], bool] = lambda _error: False  # the budget, not a failure


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
    # Why the arm did not play to its end: its run ended in an error (``failed``: a strategy that
    # raised, a provider that refused), or the budget stopped it (``stopped``, a real model's).
    failed: str | None = None
    stopped: str | None = None

    @property
    def done(self) -> bool:
        return self.failed is None and self.stopped is None

    @property
    def replace_count(self) -> int:
        return sum(self.replaces.values())

    @property
    def fidelity(self) -> float:
        return sum(self.kept.values()) / len(self.kept) if self.kept else 1.0

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "arm"}
        out.update(arm=self.arm.name, window=self.arm.window, pins=self.arm.pins, label=self.arm.label)
        out.update(summarizer=self.arm.summarizer, strategy=self.arm.strategy)
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
    strategies: Callable[[str, Path | None], Strategy] = load_strategy,
    play: Play | None = None,
) -> ArmResult:
    """Play ``task`` under ``arm`` in a fresh workspace under ``root``; every figure measured.

    ``strategies`` loads the arm's strategy (``arms.loader``: the person's from their folder);
    ``play``: a real model (``lab.real``) instead of the lab's."""
    workspace = Path(tempfile.mkdtemp(prefix=f"{arm.name}-", dir=root))
    make_workspace(workspace, task.phases)
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
    if play is None:
        scripted.reset_cache()
        # Every run of the arm gets the one model that keeps its place in the task.
        model = LabModel(task, context_window=arm.window, budget=budget, summarizer=_summarizer(arm))
        play = Play(model, lambda _config: model)
    settings.update(play.settings)
    agent = Agent(PseudoClaude(**settings), providers=play.providers, strategies=strategies, ask=play.ask)
    result = ArmResult(arm)
    started = time.perf_counter()
    final: list[Message] = []
    log: Path | None = None
    try:
        try:
            if arm.pins:
                for text in PIN_TEXTS:
                    agent.pins.add(text)
            _play_runs(agent, task, result, play)
            if agent.session is not None:
                final, log = agent.session.conversation.messages(), agent.session.dir / LOG_NAME
        finally:
            agent.close()
        result.seconds = time.perf_counter() - started
        if log is not None:
            _count_replaces(result, log)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    _measure(result, play.player, task, final, price_model)
    return result


def _summarizer(arm: Arm) -> Summarizer:
    return "careful" if arm.summarizer == "careful" else NEWEST


def _play_runs(agent: Agent, task: Task, result: ArmResult, play: Play) -> None:
    """The task's runs in order, until one ends in an error: the arm stops there, ``failed``
    (or ``stopped`` by the budget); what it did until then is measured as usual."""
    for prompt, _turns in task.runs:
        try:
            summary = agent.run(prompt, listeners=play.listeners)
        except PseudoClaudeError as exc:  # refused before the run began (a provider, a strategy)
            result.statuses.append(f"error: {exc}")
            result.failed = _one_line(f"{type(exc).__name__}: {exc}")
            return
        error = summary.error
        result.statuses.append(summary.status if error is None else f"{summary.status}: {error}")
        if error is not None:
            if play.stopped(error):
                result.stopped = _one_line(str(error))
            else:
                result.failed = _one_line(f"{type(error).__name__}: {error}")
            return


def _one_line(text: str) -> str:
    return " ".join(text.split())


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
    model: Player,
    task: Task,
    final: list[Message],
    price_model: str,
) -> None:
    requests = model.requests
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
    # The must-keep facts the session stated: the task's, as far as the requests carried them
    # (a real model may never read the log that holds the error; a failed arm stops early).
    heard = _heard([*(m for r in requests for m in r.messages), *final])
    must = [f for f in MUST_KEEP if f in task.facts and f.needle.casefold() in heard]
    system = agent_requests[-1].system if agent_requests else ""
    result.kept = kept(must, context_text(system, final))
    _follow_the_spec(result, agent_requests, [f for f in SPEC if f in task.facts])


def _heard(messages: Iterable[Message]) -> str:
    """Every message's text once (requests repeat the conversation), case folded."""
    seen: dict[str, Message] = {}
    for m in messages:
        seen.setdefault(m.id, m)
    return context_text("", seen.values()).casefold()


def _follow_the_spec(result: ArmResult, agent_requests: list[Request], spec: list[Fact]) -> None:
    """Where the strategy replaced the context, and the share of the spec stated by then that
    the first request after each replace still holds (``drift``).

    A strategy's replace rewrites the conversation: the first request after one is the first
    that does not begin with every message of the request before it, by id — a summary or a
    hand-off starts over, a ``Drop`` (a strategy of the person's) takes messages out of the
    middle; a step only appends, and Layer 1's snapshots keep each message's id. The spec
    counted is what the user had stated by then (the rule comes with the second prompt).
    """
    stated: set[str] = set()
    seen: set[str] = set()  # messages (and system prompts) already read for what they state
    before: list[str] | None = None
    for step, request in enumerate(agent_requests, 1):
        new = [m for m in request.messages if m.id not in seen]
        seen.update(m.id for m in new)
        heard = context_text("" if request.system in seen else request.system, new)
        seen.add(request.system)
        stated |= {key for key, hit in kept(spec, heard).items() if hit}
        ids = [m.id for m in request.messages]
        if before is not None and ids[: len(before)] != before:
            result.replaced_at.append(step)
            if stated:
                found = kept(spec, context_text(request.system, request.messages))
                result.drift.append(sum(found[key] for key in stated) / len(stated))
        before = ids
