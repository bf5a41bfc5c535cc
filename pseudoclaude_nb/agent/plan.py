"""The plan of one run: everything a run needs decided before its first request, as one value.

``plan_run`` builds a frozen ``RunPlan`` — the run's configuration and provider, the
context settings for the provider's window, the strategy, the system sections, the tools,
the memory index, the notebook block and the notices to say first — from the agent's
parts. A run applies it (configures the session's context, hands it to the ``Runner``);
``%context`` builds a *dry* plan and only shows it: a dry plan reads the memory index
without taking its reports, starts no MCP server and writes nothing anywhere. It holds the
strategy (a pure policy, shared safely) and lists the strategy's host tools bound to no
session; what it shows of the session's figures is read from the host under the plan's
settings (``ContextHost.figures``), never set on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..config import RunConfig
from ..context.layer1 import Emit
from ..context.pins import pins_notice
from ..context.settings import CompactSettings
from ..events import Notice, RunEvent
from ..notebook import ActivityBlock
from ..prompt import join_sections, read_project_file
from ..providers import Provider
from ..providers.base import LearnsWindow
from ..strategies import Strategy
from ..tools import ToolRegistry
from .memory import RunMemory
from .notebook import NotebookActivity
from .session import ActiveSession
from .surface import RunSurface
from .window import AgentWindow

OFFLINE_NOTICE = (
    "no ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL is set: no model will answer. "
    "The offline explainer explains the newest error in the cells you ran, and nothing "
    "else; set a key for a model, or run %agent --provider demo for the offline tour."
)


@dataclass(frozen=True)
class RunPlan:
    config: RunConfig
    provider: Provider | None  # None only in a dry plan with no provider to build (no key yet)
    settings: CompactSettings  # fitted to the provider's window
    strategy: Strategy  # the session's, or the configured one when there is no session yet
    sections: tuple[tuple[str, str], ...]  # the system prompt, memory index included
    tools: ToolRegistry
    memory_index: str | None
    block: ActivityBlock | None  # the notebook cells the run's first message reports
    notices: tuple[RunEvent, ...]  # said before the first request, in this order

    @property
    def system(self) -> str:
        return join_sections(list(self.sections))

    def schemas(self) -> list[dict[str, Any]]:
        return self.tools.schemas()


class PlanParts(Protocol):
    """The parts of the agent a plan is made from (``Agent`` has them all)."""

    surface: RunSurface
    run_memory: RunMemory
    activity: NotebookActivity
    windows: AgentWindow
    strategies: Callable[[str, Path | None], Strategy]  # what a strategy setting names (``load_strategy``)

    @property
    def workspace(self) -> Path: ...

    def compact_settings(self, context_window: int) -> CompactSettings: ...


def plan_run(
    parts: PlanParts,
    config: RunConfig,
    provider: Provider | None,
    *,
    active: ActiveSession | None,
    emit: Emit,
    dry: bool = False,
    warnings: Sequence[str] = (),
) -> RunPlan:
    """The plan of the next run of ``active`` (``None``: a session not started yet, only when dry).

    ``emit`` reaches what the tools say (a name clash, a rollover declared); ``warnings``
    (the environment file's) are said first. A live plan takes the memory reports, starts the
    MCP servers and learns the provider's window; a dry one only reads.
    """
    events: list[RunEvent] = []
    if dry or provider is None:
        memory_index = parts.run_memory.index(config.memory)
        window_notes: list[str] = []
        problems: list[str] = []
    else:
        memory_index = parts.run_memory.for_run(config.memory, events)
        problems = parts.surface.prepare_mcp()
        window_notes = parts.windows.learn_window(provider)  # before the settings: it may adopt one
    window = config.context_window if dry and config.context_window else 0
    if provider is None:
        if not dry:
            raise ValueError("a run's plan needs a provider")
        window = window or CompactSettings().context_window
    else:
        window = window or provider.context_window
    settings = parts.compact_settings(window)
    # The session's strategy, or the configured one when there is no session yet.
    strategy = (
        parts.strategies(config.strategy, parts.workspace) if active is None else active.context.strategy
    )
    # A run's host tools report to it and declare to its session; a dry plan's are only listed.
    host = None if dry or active is None else active.context
    tools = parts.surface.tools(strategy, memory_index, emit, host=host)
    # Read once: its head goes into the prompt, or why it did not into the notices.
    project, unread = read_project_file(parts.workspace)
    sections = parts.surface.sections(strategy, memory_index, project)
    if not dry:
        compact_on = parts.surface.settings.compact_tools
        window_notes += parts.windows.tools_notice(tools.schemas(), window, compact_on)
        # issue 41: pins set under a bigger window than the one this run learned
        share = parts.surface.settings.pins_max_share
        source = provider.window_source if isinstance(provider, LearnsWindow) else None
        too_many = pins_notice(parts.surface.pins.texts(), window, share, source)
        warnings = [*warnings, *([too_many] if too_many else [])]
    block = parts.activity.block(active) if config.notebook else None
    notices: list[RunEvent] = []
    if block is not None and (block.total or block.skipped):
        notices.append(Notice(block.summary()))
    notices += events
    notices += [Notice(text) for text in window_notes]
    notices += [Notice(text, "warning") for text in [*warnings, *problems, *([unread] if unread else [])]]
    if config.provider == "auto" and provider is not None and provider.name == "offline":
        notices.append(Notice(OFFLINE_NOTICE))
    return RunPlan(
        config=config,
        provider=provider,
        settings=settings,
        strategy=strategy,
        sections=tuple(sections),
        tools=tools,
        memory_index=memory_index,
        block=block,
        notices=tuple(notices),
    )
