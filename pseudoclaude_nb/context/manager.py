"""One session's context: the shared state, the Layer 1 spiller and the current strategy.

``ContextManager`` is what the runner and the agent hold. It composes, and decides
nothing itself: Layer 1 is the ``Spiller``, what happens at the window's limits is the
strategy (``compact``, ``rollover`` or ``api``), and all work on one ``SharedState``. Switching
strategy (``use``) builds the other strategy over the same state, so the anchor, the
learned calibration, the ledger, the breaker, the counters and the pending tool batch
stay. Every method that can report takes the caller's ``emit``: events reach the run (or
the ``%compact``) that asked and nobody else.

It changes the conversation only through ``Conversation.replace`` (so every change is
logged as a replace marker plus snapshot) and writes to the log only ``spill``,
``compact`` and ``rollover`` entries.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..conversation import Conversation
from ..errors import SessionError
from ..events import Compacted, ContextState
from ..messages import ToolCall, ToolResult, Usage
from ..providers.base import ManagesContext, Provider
from ..session.loader import LoadResult
from ..session.writer import SessionWriter
from . import layer2, undo
from .breaker import Breaker
from .compact import CompactStrategy
from .confirm import Review
from .estimate import Calibration
from .handoff import Intent
from .layer1 import Emit, Spiller, ignore
from .provider_compaction import ProviderCompactionStrategy, unsupported
from .rollover import RolloverStrategy
from .settings import CompactSettings
from .spill import Ledger
from .state import SharedState
from .strategy import ContextStrategy, Marks, marks_for

if TYPE_CHECKING:
    from ..tools import ToolRegistry

# Factories over the shared state (the Protocol declares no constructor).
STRATEGIES: dict[str, Callable[[SharedState], ContextStrategy]] = {
    "compact": CompactStrategy,
    "rollover": RolloverStrategy,
    "api": ProviderCompactionStrategy,  # issue 31: the provider's own compaction
}


def strategy_marks(name: str, settings: CompactSettings) -> Marks:
    """The marks of strategy ``name`` under ``settings``, without a session: its own where it
    names them (``marks_for`` on its class), else ``strategy.marks_for``'s."""
    own = getattr(STRATEGIES.get(name), "marks_for", None)
    return own(settings) if own is not None else marks_for(name, settings)


def check_provider(name: str, provider: Provider) -> None:
    """Refuse, before a run, a provider strategy ``name`` cannot work with (``--strategy api``
    needs one that manages the context itself, ``ManagesContext``): ``ConfigError`` with what
    to use instead."""
    if getattr(STRATEGIES.get(name), "needs_server_context", False) and not isinstance(provider, ManagesContext):
        raise unsupported(provider.name)


class ContextManager:
    def __init__(
        self,
        conversation: Conversation,
        settings: CompactSettings | None = None,
        *,
        strategy: str = "compact",
        session_dir: Path | None = None,
        workspace: Path | None = None,
        writer: SessionWriter | None = None,
    ) -> None:
        self.shared = SharedState(
            conversation, settings, session_dir=session_dir, workspace=workspace, writer=writer
        )
        self.spiller = Spiller(self.shared)
        self.strategy: ContextStrategy = STRATEGIES[strategy](self.shared)

    def use(self, strategy: str) -> ContextStrategy:
        """Make ``strategy`` current; the shared state stays as it is."""
        if self.strategy.name != strategy:
            self.strategy = STRATEGIES[strategy](self.shared)
        return self.strategy

    def configure(self, settings: CompactSettings, *, system: str, tools: list[dict[str, Any]]) -> None:
        self.shared.configure(settings, system=system, tools=tools)

    def start_run(self) -> None:
        self.shared.start_run()

    def restore(self, loaded: LoadResult) -> None:
        self.shared.restore(loaded)
        self.strategy.restore(loaded)

    # --- what it reads ---------------------------------------------------------------------

    @property
    def conversation(self) -> Conversation:
        return self.shared.conversation

    @property
    def settings(self) -> CompactSettings:
        return self.shared.settings

    @property
    def anchor(self) -> tuple[int, int] | None:
        return self.shared.anchor

    @property
    def ledger(self) -> Ledger:
        return self.shared.ledger

    @property
    def calibration(self) -> Calibration:
        return self.shared.calibration

    @property
    def breaker(self) -> Breaker:
        return self.shared.breaker

    @property
    def compactions(self) -> int:
        return self.shared.compactions

    @property
    def rollovers(self) -> int:
        return self.shared.rollovers

    @property
    def last_compact(self) -> Compacted | None:
        return self.shared.last_compact

    def estimate(self) -> int:
        return self.shared.estimate()

    def forget_anchor(self) -> None:
        self.shared.forget_anchor()

    def on_usage(self, usage: Usage, length: int, tools: list[dict[str, Any]] | None = None) -> None:
        self.shared.on_usage(usage, length, tools)

    def after_response(self, emit: Emit = ignore) -> bool:
        """The strategy's look at an answer once it is in and logged, where it has one (the api
        strategy replaces the conversation when the provider compacted it); True when it acted."""
        after_response = getattr(self.strategy, "after_response", None)
        return bool(after_response(emit)) if after_response is not None else False

    def state(self, estimate: int | None = None) -> ContextState:
        """Where the context stands, for gauges; ``estimate`` when the caller has it already."""
        s = self.shared
        return ContextState(
            estimated_tokens=s.estimate() if estimate is None else estimate,
            anchor_tokens=s.anchor[0] if s.anchor else 0,
            context_window=s.settings.context_window,
            threshold=self.strategy.threshold(),
            breaker_open=s.breaker.open,
            spills=s.ledger.spilled,
            compactions=s.compactions,
            strategy=self.strategy.name,
            marks=self.strategy.marks(),
            rollovers=s.rollovers,
            phase=self.strategy.phase(),
        )

    # --- a run's boundaries ------------------------------------------------------------------

    def admit(self, call: ToolCall, result: ToolResult, emit: Emit = ignore) -> ToolResult:
        """What the conversation gets for ``result``: itself, or its spill preview (Layer 1)."""
        return self.spiller.admit(call, result, emit)

    def after_tools(self, count: int) -> None:
        self.spiller.after_tools(count)

    def before_request(self, provider: Provider, emit: Emit = ignore, review: Review | None = None) -> None:
        """The pre-step boundary: Layer 1's batch check, then the strategy at the estimate.

        The state is reported with the very estimate the strategy decides on, and again
        after the strategy acted (a replace, a host note). ``review`` is the run's, when the
        person confirms replaces (``confirm_compaction``); it is passed on, never kept.
        """
        self.spiller.check_batch(emit)
        estimate = self.shared.estimate()
        emit(self.state(estimate))
        if self.strategy.before_request(estimate, provider, emit, review):
            emit(self.state())

    def recover(self, provider: Provider, emit: Emit = ignore, review: Review | None = None) -> bool:
        return self.strategy.recover(provider, emit, review)

    def hands_off_next(self) -> bool:
        """Whether the strategy starts its hand-off before the next request (rollover past its
        base mark): then a cut answer does not end the run (issue 32)."""
        due = getattr(self.strategy, "rollover_due", None)
        return bool(due is not None and due(self.shared.estimate()))

    def surface(self, tools: ToolRegistry) -> ToolRegistry:
        return self.strategy.surface(tools)

    # --- on request ----------------------------------------------------------------------------

    def compact(self, provider: Provider, trigger: str = "manual", emit: Emit = ignore) -> Compacted:
        """Layer 2 now, whatever the strategy (``%compact``)."""
        return layer2.compact(self.shared, provider, trigger, emit)

    def preview(self, provider: Provider) -> layer2.Plan:
        """``%compact --preview``: ask for the summary and keep the plan; replace and write nothing."""
        plan = layer2.plan(self.shared, provider)
        self.shared.preview = plan
        return plan

    def pending_preview(self) -> layer2.Plan | None:
        """The kept preview while ``%compact --apply`` could still commit it (``--status``)."""
        plan = self.shared.preview
        return plan if plan is not None and plan.made_from(self.conversation.messages()) else None

    def apply(self, emit: Emit = ignore, text: str | None = None) -> Compacted:
        """``%compact --apply``: commit the kept preview, without asking the model again;
        ``text`` (``--edit``): with the person's summary instead of the model's."""
        plan = self.shared.preview
        if plan is None:
            raise SessionError("there is no compaction preview to apply; run %compact --preview first")
        if not plan.made_from(self.conversation.messages()):
            self.shared.preview = None
            raise SessionError(
                "the conversation changed since the preview; run %compact --preview again, then --apply"
            )
        if plan.new is None:
            raise SessionError(
                f"the preview has nothing to apply: {plan.error}; run %compact --preview again later"
            )
        if text is not None and text.strip():
            plan = layer2.edited(self.shared, plan, text)
        return layer2.commit(self.shared, plan, "manual", emit)

    def undo(self) -> undo.Undone:
        """``%compact --undo``: put back the state before the last compaction or rollover commit."""
        done = undo.undo(self.shared)
        # Rollover's reminder and fallback belong to a window: re-read them from the restored one.
        sync_window = getattr(self.strategy, "sync_window", None)
        if sync_window is not None:
            sync_window()
        return done

    def spill_all(self, emit: Emit = ignore) -> int:
        """``%compact --layer1``."""
        return self.spiller.spill_all(emit)

    def declare(self, intent: Intent, emit: Emit = ignore) -> str:
        """``new_context``'s handler (only rollover accepts it)."""
        return self.strategy.declare(intent, emit)
