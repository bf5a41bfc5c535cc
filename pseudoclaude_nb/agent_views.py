"""What the agent shows about its context: ``%context``, ``%context --last``, ``%compact``.

A mixin of ``Agent``, kept apart because it only *reports* (and compacts on request): it
builds the manifest of the next request (or of the last one sent) from the same pieces a
run uses — system sections, tools, compaction or rollover settings, memory index — so
what it shows is what the model gets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .compact.manifest import manifest
from .context import CompactSettings, Emit, threshold_for
from .errors import ConfigError
from .events import Compacted, RunEvent
from .prompt import join_sections, without_memory
from .providers import Provider, make_provider
from .tools.memory import withhold_bodies
from .tools.user import user_tools

if TYPE_CHECKING:
    from .agent import Agent


class ContextViews:
    def provider_for_context(self: Agent) -> Provider:
        """The provider of the last run (a scripted one keeps its place), else a new one."""
        if self.last_provider is not None:
            return self.last_provider
        c = self.config()
        return make_provider(c.provider, model=c.model, context_window=c.context_window, script=c.script)

    def _context_window(self: Agent) -> int:
        if self.settings.context_window:
            return self.settings.context_window
        try:
            return self.provider_for_context().context_window
        except ConfigError:
            return CompactSettings().context_window

    def _prepared_context(
        self: Agent,
    ) -> tuple[list[tuple[str, str]], list[dict], CompactSettings, str | None]:
        strategy = self._strategy()
        memory_index = self._memory_index(self.settings.memory_policy != "off")
        sections = self._sections(strategy, memory_index)
        tools = self._tools(strategy, memory_index).schemas()
        settings = self.compact_settings(self._context_window())
        if self.session is not None:
            self.session.context.configure(settings, system=join_sections(sections), tools=tools)
        return sections, tools, settings, memory_index

    def context_manifest(self: Agent) -> dict:
        """What the next request would contain, part by part (``%context``).

        The memory index is its own part (``memory_included``, ``memory_index``), not a
        system section; with memory off, earlier notes' bodies show as withheld.
        """
        sections, tools, settings, memory_index = self._prepared_context()
        sections = without_memory(sections)
        strategy = self._strategy()
        threshold = threshold_for(strategy, settings)
        extra: dict = {
            "strategy": strategy,
            "session_id": None,
            "memory_policy": self.settings.memory_policy,
            "user_tools": [t.name for t in user_tools() if t.name in {s["name"] for s in tools}],
        }
        block = self.notebook_block() if self.settings.notebook_context else None
        pending = block.text if block is not None and block.text else None
        extra["notebook_pending_cells"] = block.shown if pending and block is not None else 0
        if strategy == "rollover":
            # The gauge and %context show these instead of the Layer 2 line.
            extra["rollover_limits"] = settings.rollover_limits
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
            breaker="open" if ctx.breaker.open else "closed",
            breaker_failures=ctx.breaker.failures,
            spills=ctx.ledger.spilled,
            compactions=ctx.compactions,
        )
        if strategy == "rollover":
            extra.update(rollovers=ctx.rollovers, rollover_phase=state.phase)
        messages = self.session.conversation.messages()
        if self.settings.memory_policy == "off":
            messages, _ = withhold_bodies(messages)
        return manifest(
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

    def last_manifest(self: Agent) -> dict | None:
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

    def compact(
        self: Agent, *, layer1_only: bool = False, listeners: Iterable[Callable[[RunEvent], None]] = ()
    ) -> Compacted | int:
        """``%compact``: Layer 2 now (manual), or with ``layer1_only`` the spill pass.

        Its events go to ``listeners`` only: an earlier run's gauge and renderer stay as they ended.
        """
        if self.session is None:
            raise ConfigError("no current session to compact; run %agent or %sessions resume first")
        self._prepared_context()
        targets = list(listeners)

        def emit(event: RunEvent) -> None:
            for listener in targets:
                listener(event)

        report: Emit = emit
        if layer1_only:
            return self.session.context.spill_all(report)
        return self.session.context.compact(self.provider_for_context(), "manual", report)
