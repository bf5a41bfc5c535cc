"""What the agent shows about its context: ``%context`` and ``%context --last``.

A mixin of ``Agent`` that only *reads*: it builds the manifest of the next request (or of
the last one sent) from the same pieces a run uses — system sections, tools, compaction or
rollover settings, memory index — so what it shows is what the model gets. It does not
import the agent: what it reads is the ``AgentParts`` protocol, which ``Agent`` (the
composition root, which wires sessions, runs and these views) provides.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .compact.manifest import manifest, notebook_cells
from .context import CompactSettings, ContextStrategy
from .context.cache import outlook
from .errors import ConfigError
from .prompt import join_sections, without_memory
from .providers import Provider, auto_provider, provider_for
from .session.spend import session_spend
from .tools.memory import withhold_bodies
from .tools.user import user_tools

if TYPE_CHECKING:
    from .config import PseudoClaude, RunConfig
    from .runner import Runner
    from .tools import ToolRegistry


class AgentParts(Protocol):
    """What the views read of the agent (``Agent`` provides all of it)."""

    settings: PseudoClaude
    session: Any  # ActiveSession | None
    last_provider: Provider | None
    last_runner: Runner | None
    _last_memory_index: str | None
    window_source: str | None

    @property
    def workspace(self) -> Path: ...

    def config(self, **options: object) -> RunConfig: ...
    def compact_settings(self, context_window: int) -> CompactSettings: ...
    def _strategy(self) -> str: ...
    def _memory_index(self, enabled: bool) -> str | None: ...
    def _context_strategy(self, settings: CompactSettings | None = None) -> ContextStrategy: ...
    def _sections(self, strategy: ContextStrategy, memory_index: str | None = None) -> list[tuple[str, str]]: ...
    def _tools(self, strategy: ContextStrategy, memory_index: str | None = None) -> ToolRegistry: ...
    def notebook_block(self) -> Any: ...

    # the views' own, for one another
    def provider_for_context(self) -> Provider: ...
    def _context_window(self) -> int: ...
    def _prepared_context(self) -> tuple[list[tuple[str, str]], list[dict], CompactSettings, str | None]: ...
    def _cache_and_cost(self, data: dict, messages: list, *, anchored: bool) -> dict: ...


class ContextViews:
    window_source: str | None  # set by _context_window; declared so Agent's None fits

    def provider_for_context(self: AgentParts) -> Provider:
        """The provider of the last run (a scripted one keeps its place), else a new one."""
        if self.last_provider is not None:
            return self.last_provider
        return provider_for(self.config(strategy=self._strategy()))

    def _context_window(self: AgentParts) -> int:
        """The window %context shows; ``window_source`` says where it came from."""
        if self.settings.context_window:
            self.window_source = "--context-window"
            return self.settings.context_window
        try:
            provider = self.provider_for_context()
        except ConfigError:
            return CompactSettings().context_window
        learn = getattr(provider, "learn_window", None)
        if learn is not None:
            learn()  # asked once per server and model, then cached (issue 32)
        self.window_source = getattr(provider, "window_source", None)
        return provider.context_window

    def _prepared_context(
        self: AgentParts,
    ) -> tuple[list[tuple[str, str]], list[dict], CompactSettings, str | None]:
        settings = self.compact_settings(self._context_window())
        strategy = self._context_strategy(settings)
        memory_index = self._memory_index(self.settings.memory_policy != "off")
        sections = self._sections(strategy, memory_index)
        tools = self._tools(strategy, memory_index).schemas()
        if self.session is not None:
            self.session.context.shared.configure(settings, system=join_sections(sections), tools=tools)
        return sections, tools, settings, memory_index

    def context_manifest(self: AgentParts) -> dict:
        """What the next request would contain, part by part (``%context``).

        The memory index is its own part (``memory_included``, ``memory_index``), not a
        system section; with memory off, earlier notes' bodies show as withheld.
        """
        sections, tools, settings, memory_index = self._prepared_context()
        sections = without_memory(sections)
        strategy = self._context_strategy(settings)
        threshold = strategy.threshold()
        extra: dict = {
            "window_source": self.window_source,
            "strategy": strategy.name,
            "session_id": None,
            "memory_policy": self.settings.memory_policy,
            "user_tools": [t.name for t in user_tools() if t.name in {s["name"] for s in tools}],
        }
        block = self.notebook_block() if self.settings.notebook_context else None
        pending = block.text if block is not None and block.text else None
        extra["notebook_pending_cells"] = block.shown if pending and block is not None else 0
        extra.update(notebook_cells(block))  # issue-29: the cells, each with its estimate
        extra.update(strategy.describe())
        if self.session is None:
            return manifest(
                sections=sections,
                messages=[],
                tools=tools,
                context_window=settings.context_window,
                threshold=threshold,
                memory_index=memory_index,
                extra=extra,
                pending_notebook=pending,
            )
        ctx = self.session.context
        state = ctx.state()
        extra.update(
            session_id=self.session.id,
            breaker="open" if ctx.shared.breaker.open else "closed",
            breaker_failures=ctx.shared.breaker.failures,
            spills=ctx.shared.ledger.spilled,
            compactions=ctx.shared.compactions,
        )
        messages = self.session.conversation.messages()
        if self.settings.memory_policy == "off":
            messages, _ = withhold_bodies(messages)
        data = manifest(
            sections=sections,
            messages=messages,
            tools=tools,
            context_window=settings.context_window,
            threshold=threshold,
            estimated_tokens=state.estimated_tokens,
            anchor_tokens=state.anchor_tokens,
            memory_index=memory_index,
            extra=extra,
            pending_notebook=pending,
        )
        data.update(self._cache_and_cost(data, messages, anchored=state.anchor_tokens > 0))
        return data

    def _cache_and_cost(self: AgentParts, data: dict, messages: list, *, anchored: bool) -> dict:
        """issue 31: the run's and the session's cost, the cache hit ratio, and the cache outlook
        of the next request (breakpoints, expected cache read)."""
        spend = session_spend(self.session.writer.path)
        summary = self.last_runner.last_summary if self.last_runner is not None else None
        run = summary.spend if summary is not None and summary.session_id == self.session.id else None
        last_model, last = (spend.requests[-1] if spend.requests else (None, None))
        provider = self.last_runner.provider.name if self.last_runner is not None else self.settings.provider
        if provider == "auto":
            provider = auto_provider()  # the one a run would pick now
        head = sum(data["parts"].get(k, 0) for k in ("system", "pins", "memory", "tool_schemas", "mcp_tool_schemas"))
        cache = outlook(
            provider=provider,
            head_tokens=head,
            messages=messages,
            last=last,
            last_ts=spend.last_ts,
            anchored=anchored,
            now=time.time(),
        )
        ratio = spend.hit_ratio()
        session_cost = spend.cost()
        return {
            "cost": {
                "run": run.cost().text() if run is not None and run.requests else None,
                "session": session_cost.text() if spend.requests else None,
                "session_saved": session_cost.saved_text() if spend.requests and session_cost.known else "",
                "session_requests": len(spend.requests),
                "cache_hit_ratio": None if ratio is None else round(ratio, 4),
                "model": last_model,
            },
            "cache": cache.as_dict(),
            "cache_lines": cache.lines(),
        }

    def last_manifest(self: AgentParts) -> dict | None:
        """The manifest of the last request actually sent (``%context --last``)."""
        runner = self.last_runner
        if runner is None or runner.last_request is None:
            return None
        request = runner.last_request
        settings = self.compact_settings(runner.provider.context_window)
        system, memory_index = request.system, self._last_memory_index
        if memory_index and system.endswith("\n\n" + memory_index):
            system = system[: -len(memory_index) - 2]
        elif memory_index and memory_index not in system:
            memory_index = None
        return manifest(
            sections=[("system prompt as sent", system)],
            messages=request.messages,
            tools=request.tools,
            context_window=settings.context_window,
            threshold=settings.threshold,
            memory_index=memory_index,
            extra={"provider": runner.provider.name, "model": runner.provider.model},
        )
