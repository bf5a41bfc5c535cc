"""One session's context: the shared state, the Layer 1 spiller and the current strategy.

``ContextManager`` is what the runner and the agent hold. It composes, and decides
nothing itself (callers read the state as ``.shared``, Layer 1 as ``.spiller`` and the
strategy as ``.strategy``; nothing here only forwards): Layer 1 is the ``Spiller``, what
happens at the window's limits is the strategy (``compact``, ``rollover`` or ``api``), and
all work on one ``SharedState``. Switching
strategy (``use``) builds the other strategy over the same state, so the anchor, the
learned calibration, the ledger, the breaker, the counters and the pending tool batch
stay. Every method that can report takes the caller's ``emit``: events reach the run (or
the ``%compact``) that asked and nobody else.

It changes the conversation only through ``Conversation.replace`` (so every change is
logged as a replace marker plus snapshot) and writes to the log only ``spill``,
``compact`` and ``rollover`` entries.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

from ..conversation import Conversation
from ..errors import SessionError
from ..events import Compacted, ContextState
from ..providers.base import ManagesContext, Provider
from ..session.loader import LoadResult
from ..session.writer import SessionWriter
from . import layer2, undo
from .compact import CompactStrategy
from .confirm import Review
from .layer1 import Emit, Spiller, ignore
from .provider_compaction import ProviderCompactionStrategy, unsupported
from .rollover import RolloverStrategy
from .settings import CompactSettings
from .state import SharedState
from .strategy import ContextStrategy

# The registry: each strategy is a factory over the session's shared state, and this is the
# only place that tells strategies apart by name (everything else asks the strategy).
STRATEGIES: dict[str, Callable[[SharedState], ContextStrategy]] = {
    "compact": CompactStrategy,
    "rollover": RolloverStrategy,
    "api": ProviderCompactionStrategy,  # issue 31: the provider's own compaction
}


def strategy_for(name: str, state: SharedState) -> ContextStrategy:
    """Strategy ``name`` over ``state`` (a session's, or a dry one for ``%context`` without one)."""
    return STRATEGIES[name](state)


def dry_strategy(name: str, settings: CompactSettings, workspace: Path | None = None) -> ContextStrategy:
    """Strategy ``name`` over an empty conversation: what it adds and marks before any session."""
    return strategy_for(name, SharedState(Conversation([]), settings, workspace=workspace))


def check_provider(name: str, provider: Provider) -> None:
    """Refuse, before a run, a provider strategy ``name`` cannot work with (``--strategy api``
    needs one that manages the context itself, ``ManagesContext``): ``ConfigError`` with what
    to use instead."""
    if getattr(STRATEGIES.get(name), "needs_server_context", False) and not isinstance(
        provider, ManagesContext
    ):
        raise unsupported(provider.name)


def dry_copy(strategy: ContextStrategy, settings: CompactSettings) -> ContextStrategy:
    """``strategy`` as it would stand under ``settings``, over a copy of its state: a plan that
    only shows (``%context``) reads it and sets the copy's system and tools, never the session's."""
    state = copy.copy(strategy.state)
    state.settings = settings
    dry = copy.copy(strategy)
    dry.state = state
    return dry


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
        self.strategy: ContextStrategy = strategy_for(strategy, self.shared)

    def use(self, strategy: str) -> ContextStrategy:
        """Make ``strategy`` current; the shared state stays as it is."""
        if self.strategy.name != strategy:
            self.strategy = strategy_for(strategy, self.shared)
        return self.strategy

    def restore(self, loaded: LoadResult) -> None:
        self.shared.restore(loaded)
        self.strategy.restore(loaded)

    # --- what it reads ---------------------------------------------------------------------

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

    # --- on request ----------------------------------------------------------------------------

    def compact(self, provider: Provider, trigger: str = "manual", emit: Emit = ignore) -> Compacted:
        """Layer 2 now, whatever the strategy (``%compact``) — or, under ``--strategy api``, the
        provider's own compaction when it has one on demand (issue 43)."""
        native = getattr(self.strategy, "compact_now", None)
        done = native(provider, trigger, emit) if native is not None else None
        return done if done is not None else layer2.compact(self.shared, provider, trigger, emit)

    def preview(self, provider: Provider) -> layer2.Plan:
        """``%compact --preview``: ask for the summary and keep the plan; replace and write nothing."""
        native = getattr(self.strategy, "plan_compaction", None)
        plan = native(provider) if native is not None else None
        plan = plan if plan is not None else layer2.plan(self.shared, provider)
        self.shared.preview = plan
        return plan

    def pending_preview(self) -> layer2.Plan | None:
        """The kept preview while ``%compact --apply`` could still commit it (``--status``)."""
        plan = self.shared.preview
        return plan if plan is not None and plan.made_from(self.shared.conversation.messages()) else None

    def apply(self, emit: Emit = ignore, text: str | None = None) -> Compacted:
        """``%compact --apply``: commit the kept preview, without asking the model again;
        ``text`` (``--edit``): with the person's summary instead of the model's."""
        plan = self.shared.preview
        if plan is None:
            raise SessionError("there is no compaction preview to apply; run %compact --preview first")
        if not plan.made_from(self.shared.conversation.messages()):
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
