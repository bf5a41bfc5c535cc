"""One session's context: the host that asks a strategy and applies what it answers.

``ContextHost`` is what the agent holds per session and what a ``Runner`` talks to (it is the
runner's ``RunContext``: before a step, on an answer, on too-long, on a tool result). It
owns the ``SharedState`` (``.shared``: anchor, calibration, ledger, breaker, counters, the
pending tool batch, a declared hand-off, this window's host notes), Layer 1 (``.spiller``)
and the current strategy (``.strategy``, a pure policy: ``pseudoclaude_nb.strategies``).

At each point it builds a read-only ``View`` (``view``), asks the strategy to ``decide`` and
applies the action (``apply``): the mechanisms are written once, here and below, whatever
the strategy. Switching strategy (``use``) keeps the whole state but what belonged to the
old strategy's window (a declared hand-off, a restriction). Every method that can report
takes the caller's ``emit``: events reach the run (or the ``%compact``) that asked and
nobody else.

A strategy's own code is called only through ``_asked``: whatever it raises stops the run
as a ``StrategyError`` naming it, before anything of that answer was applied.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..conversation import Conversation
from ..cost import Spend
from ..errors import SessionError, StrategyError
from ..events import Compacted, ContextState, Notice, RunEvent
from ..messages import ToolCall, ToolResult, Usage
from ..providers.base import ManagesContext, Provider
from ..session.writer import SessionWriter
from ..strategies import ACTIONS, Action, Drop, Handoff, Keep, Restrict, Strategy, Summarize, Trigger, View
from .confirm import Review
from .host_tools import host_tools
from .layer1 import Emit, Spiller, ignore
from .plan import DropPlan, Preview
from .registry import load_strategy, normalized
from .settings import CompactSettings
from .state import SharedState
from .view import limits_of, view

# The mechanisms a strategy's action needs (``apply``, ``layer2``, ``rollover``, ``undo``,
# ``provider_compaction``) and the session loader are imported where an action, a strategy
# that asks for them or a stored session uses them: a first run under compact keeps the
# context (``Keep``) until it fills, and its first request waits for none of them (issue 47).
if TYPE_CHECKING:
    from ..history import HistoryIndex
    from ..session.loader import LoadResult
    from ..tools import ToolRegistry
    from ..tools.registry import Tool
    from .apply import Ask
    from .handoff import Intent
    from .undo import Undone

T = TypeVar("T")
Marks = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Figures:
    """What ``%context`` shows of a session's context under a plan's settings (read, never set)."""

    strategy: str
    estimate: int
    anchor_tokens: int
    threshold: int
    marks: Marks
    describe: dict[str, Any] = field(default_factory=dict)
    breaker_open: bool = False
    breaker_failures: int = 0
    spills: int = 0
    compactions: int = 0


class ContextHost:
    def __init__(
        self,
        conversation: Conversation,
        settings: CompactSettings | None = None,
        *,
        strategy: str | Strategy = "compact",
        session_dir: Path | None = None,
        workspace: Path | None = None,
        writer: SessionWriter | None = None,
        pins: Callable[[], list[str]] | None = None,
        key: str | None = None,
    ) -> None:
        self.shared = SharedState(
            conversation, settings, session_dir=session_dir, workspace=workspace, writer=writer
        )
        self.spiller = Spiller(self.shared)
        self.pins = pins  # the person's pins, as a view shows them
        self._key = ""
        self.strategy: Strategy = self.use(strategy, key)

    # --- the strategy ----------------------------------------------------------------------------

    def use(self, strategy: str | Strategy, key: str | None = None) -> Strategy:
        """Make ``strategy`` current (a name is loaded: ``registry``); ``key`` names it (the
        setting it came from). A different one starts over only what was the old one's: a
        declared hand-off, a restriction, the host notes (read again from the window)."""
        if isinstance(strategy, str):
            key = key or strategy
            strategy = load_strategy(strategy, self.shared.workspace)
        key = normalized(key) if key else f"{type(strategy).__module__}:{type(strategy).__qualname__}"
        if key != self._key:
            s = self.shared
            s.handoff, s.restricted, s.caught_up = None, None, False
            s.sync_notes()
            self._key = key
        self.strategy = strategy
        return strategy

    def restore(self, loaded: LoadResult) -> None:
        """Rebuild the state from a log: anchor, ledger, breaker, counters, a pending hand-off,
        this window's host notes and the summary it began with."""
        from ..session.loader import marker_at  # a stored session's: see the imports above
        from .rollover import pending_intent

        s = self.shared
        s.restore(loaded)
        s.handoff = pending_intent(loaded)
        s.sync_notes()
        s.caught_up = False
        began = marker_at(loaded.path, loaded.effective_from_byte) if loaded.messages else None
        s.summary_id = loaded.messages[0].id if began and began.reason in ("compact", "rollover") else None

    # --- what the agent sets for a run -------------------------------------------------------------

    def configure(self, settings: CompactSettings, *, system: str, tools: list[dict[str, Any]]) -> None:
        self.shared.configure(settings, system=system, tools=tools)

    def start_run(self, digits: int | None = None) -> None:
        """A run begins (``digits``: the server's token profile, before the first estimate)."""
        if digits is not None:
            self.shared.digits = digits
        self.shared.start_run()

    def forget_anchor(self) -> None:
        self.shared.forget_anchor()

    @property
    def last_compact(self) -> Compacted | None:
        """The last compaction attempt of this session in this kernel (``%compact --status``)."""
        return self.shared.last_compact

    # --- what it reads -----------------------------------------------------------------------------

    @property
    def key(self) -> str:
        """The setting the current strategy came from (``compact``, ``MODULE:CLASS``, …)."""
        return self._key

    @property
    def settings(self) -> CompactSettings:
        """The settings of the last run (or ``configure``)."""
        return self.shared.settings

    @property
    def window(self) -> int | None:
        return self.shared.settings.context_window

    @property
    def session_id(self) -> str | None:
        return self.shared.session_dir.name if self.shared.session_dir is not None else None

    def estimate(self) -> int:
        return self.shared.estimate()

    def state(self, estimate: int | None = None) -> ContextState:
        """Where the context stands, for gauges; ``estimate`` when the caller has it already."""
        s = self.shared
        estimate = s.estimate() if estimate is None else estimate
        limits = limits_of(s.settings)
        policy = self.strategy
        return ContextState(
            estimated_tokens=estimate,
            anchor_tokens=s.anchor[0] if s.anchor else 0,
            context_window=s.settings.context_window,
            threshold=self._asked("acts_at", policy.acts_at, limits),
            breaker_open=s.breaker.open,
            spills=s.ledger.spilled,
            compactions=s.compactions,
            strategy=policy.name,
            marks=self._asked("marks", policy.marks, limits),
            rollovers=s.rollovers,
            phase=self._phase(estimate),
        )

    def _phase(self, estimate: int) -> str:
        # The base class's phase is "normal" whatever the view: no view is built for it (a step
        # reports the state two or three times).
        if type(self.strategy).phase is Strategy.phase:
            return "normal"
        return self._asked("phase", self.strategy.phase, self._view("status", estimate))

    def figures(self, settings: CompactSettings, system: str, tools: list[dict[str, Any]]) -> Figures:
        """The session's figures as a run with ``settings``, ``system`` and ``tools`` would start
        (``%context``): computed from the state, never written into it."""
        s = self.shared
        estimate = s.estimate_for(system, tools)
        status = view(s, "status", estimate, pins=self._pins(), settings=settings)
        policy, limits = self.strategy, status.limits
        # Without a valid anchor the estimate is all estimated: it stands as the anchor, as the
        # next estimate would set it.
        valid = s.anchor is not None and s.anchor[1] <= len(s.conversation)
        return Figures(
            strategy=policy.name,
            estimate=estimate,
            anchor_tokens=s.anchor[0] if s.anchor is not None and valid else estimate,
            threshold=self._asked("acts_at", policy.acts_at, limits),
            marks=self._asked("marks", policy.marks, limits),
            describe=self._asked("describe", policy.describe, status),
            breaker_open=s.breaker.open,
            breaker_failures=s.breaker.failures,
            spills=s.ledger.spilled,
            compactions=s.compactions,
        )

    # --- a run's boundaries (the runner's ``RunContext``) ----------------------------------------------

    def before_step(self, provider: Provider, emit: Emit = ignore, review: Review | None = None) -> None:
        """The pre-step boundary: Layer 1's batch check, then the strategy at the estimate.

        The state is reported with the very estimate the strategy decides on, and again
        after its action changed something. ``review`` is the run's, when the person confirms
        replaces (``confirm_compaction``); it is passed on, never kept.
        """
        s = self.shared
        self.spiller.check_batch(emit)
        if s.pinned is None and s.session_dir is None:
            from .handoff import first_user_text  # a host without a log only (the lab, a blank host)

            s.pinned = first_user_text(s.conversation.messages())  # no log to read it back from
        s.restricted = None  # a restriction holds for one step
        estimate = s.estimate()
        emit(self.state(estimate))
        if self.strategy.server_context:
            from .provider_compaction import server_context, unsupported  # the api strategy's only

            if not isinstance(provider, ManagesContext):
                raise unsupported(provider.name, self.strategy.name)
            # With a review, the provider pauses after its compaction so that the person is asked.
            provider.server_context = server_context(s.settings, review)
        if self._act("before", estimate, provider, emit, review) is not None:
            emit(self.state())

    def surface(self, tools: ToolRegistry) -> ToolRegistry:
        """The tools the next request offers (all, or what a ``Restrict`` left)."""
        restricted = self.shared.restricted
        if restricted is None:
            return tools
        from .rollover import FallbackTools  # a Restrict's only (rollover's fallback)

        return FallbackTools(tools, restricted)

    def on_too_long(self, provider: Provider, emit: Emit = ignore, review: Review | None = None) -> bool:
        """The provider said the prompt is too long: the strategy's answer, applied once; True
        when it made the request smaller (the runner then retries once)."""
        from .apply import shrank  # an action's mechanisms: see the imports above

        return shrank(self._act("too_long", self.shared.estimate(), provider, emit, review))

    def on_usage(
        self, usage: Usage, length: int, sent: list[dict[str, Any]] | None = None, emit: Emit = ignore
    ) -> None:
        """An answer's usage: the new anchor (``sent``: the tools that request offered)."""
        self.shared.on_usage(usage, length, sent)
        if emit is not ignore:  # nobody listening: no state to work out
            emit(self.state())

    def after_answer(self, provider: Provider, emit: Emit = ignore, review: Review | None = None) -> None:
        """An answer is in and logged (its usage too): the strategy may act on it (``api``: the
        provider compacted, so the conversation follows)."""
        s = self.shared
        if self.strategy.server_context:
            from .provider_compaction import raise_refusal  # the api strategy's only

            # A block the provider refused past its bounds (issue 41) stops the run here, with
            # the answer it came with (and paid for) already in the conversation and the log.
            raise_refusal(provider)
        # Right after the answer's usage the anchor is the whole request: the estimate, as is.
        fresh = s.anchor is not None and s.anchor[1] == len(s.conversation)
        estimate = s.anchor[0] if fresh and s.anchor is not None else s.estimate()
        if self._act("answer", estimate, provider, emit, review) is not None:
            emit(self.state())

    def hands_off_due(self) -> bool:
        """Whether a cut answer goes on to a hand-off instead of ending the run (issue 32): the
        strategy would hand off or restrict at the next boundary, and there is work to hand over."""
        action = self._decide("before", self.shared.estimate(), live=False)
        if not isinstance(action, Handoff | Restrict):
            return False
        from .rollover import has_work  # a hand-off's: see the imports above

        return has_work(self.shared)

    def admit(self, call: ToolCall, result: ToolResult, emit: Emit = ignore) -> ToolResult:
        return self.spiller.admit(call, result, emit)

    def after_tools(self, count: int) -> None:
        self.spiller.after_tools(count)

    def run_spend(self) -> Spend:
        """This run's requests that are not steps (summaries): the run's cost counts them."""
        return self.shared.side_spend

    @property
    def offers_handoff(self) -> bool:
        """Whether the strategy gives the model ``new_context`` (advice need not suggest rollover)."""
        return "new_context" in self.strategy.tools

    def tools(self, history: HistoryIndex, emit: Emit) -> list[Tool]:
        """The host tools the strategy declares, for this session; ``emit``: the run's."""
        return host_tools(
            tuple(self.strategy.tools),
            workspace=self.shared.workspace or Path.cwd(),
            session_id=self.session_id,
            history=history,
            declare=lambda intent: self.declare(intent, emit),
        )

    def declare(self, intent: Intent, emit: Emit) -> str:
        """``new_context``'s handler: the hand-off is logged and kept for the next boundary."""
        from . import rollover  # the hand-off's mechanism, when the model declares one

        return rollover.declare(self.shared, intent, emit)

    def apply(
        self,
        action: Action,
        provider: Provider | None = None,
        emit: Emit = ignore,
        review: Review | None = None,
        trigger: Trigger = "manual",
    ) -> object | None:
        """Apply ``action`` as the current strategy's answer for ``trigger``, with every rule of
        the host (a notebook or the lab trying an action by hand); the event of the change, or
        None when nothing changed."""
        from .apply import apply  # an action's mechanisms: see the imports above

        v = self._view(trigger, self.shared.estimate(), live=True, provider=provider)
        return apply(self._ask(v, provider, emit, review), action)

    # --- on request (%compact) -------------------------------------------------------------------------

    def compact(self, provider: Provider, emit: Emit = ignore) -> object | None:
        """``%compact``: the strategy's answer to the person's request, applied (the built-ins
        summarize); the event of the change, or None when the strategy keeps the context."""
        return self._act("manual", self.shared.estimate(), provider, emit, None)

    def summarize(self, provider: Provider, trigger: str = "manual", emit: Emit = ignore) -> Compacted:
        """Layer 2 now, whatever the strategy would answer (``trigger`` auto | manual | forced)."""
        from . import layer2  # a summary's mechanism: see the imports above

        return layer2.compact(self.shared, provider, trigger, emit, strategy=self.strategy.name)

    def spill_all(self, emit: Emit = ignore) -> int:
        """``%compact --layer1``: spill every result over ``spill_bytes`` and fit every batch."""
        return self.spiller.spill_all(emit)

    def preview(self, provider: Provider) -> Preview | None:
        """``%compact --preview``: what the strategy would do now, worked out and kept; nothing is
        written. None: it would keep the context as it is."""
        from .apply import drop_plan, summary_plan  # %compact --preview's: see the imports above

        s = self.shared
        action = self._decide("manual", s.estimate(), live=False)
        if isinstance(action, Keep):
            return None
        if isinstance(action, Summarize):
            made: Preview | None = summary_plan(s, provider, action, self.strategy.name)
        elif isinstance(action, Drop):
            said: list[RunEvent] = []
            made = drop_plan(self._ask(self._view("manual", s.estimate()), provider, said.append), action)
            if made is None:
                why = "; ".join(e.text for e in said if isinstance(e, Notice))
                raise SessionError(why or f"strategy {self.strategy.name}: its Drop takes nothing out")
        else:
            raise SessionError(
                f"strategy {self.strategy.name} answers %compact with {type(action).__name__}, which "
                "has no preview; run %compact to apply it"
            )
        s.preview = made
        return made

    def pending_preview(self) -> Preview | None:
        """The kept preview while ``%compact --apply`` could still commit it (``--status``)."""
        plan = self.shared.preview
        return plan if plan is not None and plan.made_from(self.shared.conversation.messages()) else None

    def apply_preview(self, emit: Emit = ignore, text: str | None = None) -> object:
        """``%compact --apply``: commit the kept preview, without asking the model again;
        ``text`` (``--edit``): a summary's text instead of the model's."""
        from . import layer2  # %compact --apply's: see the imports above
        from .apply import commit_drop

        s = self.shared
        plan = s.preview
        if plan is None:
            raise SessionError("there is no compaction preview to apply; run %compact --preview first")
        if not plan.made_from(s.conversation.messages()):
            s.preview = None
            raise SessionError(
                "the conversation changed since the preview; run %compact --preview again, then --apply"
            )
        if isinstance(plan, DropPlan):
            if text is not None:
                raise SessionError("--edit gives a summary its text; the preview is a drop, which has none")
            return commit_drop(s, plan, emit)
        if plan.new is None:
            raise SessionError(
                f"the preview has nothing to apply: {plan.error}; run %compact --preview again later"
            )
        if text is not None and text.strip():
            plan = layer2.edited(s, plan, text)
        return layer2.commit(s, plan, "manual", emit, strategy=self.strategy.name)

    def undo(self) -> Undone:
        """``%compact --undo``: put back the state before the last compaction, rollover commit or drop."""
        from .undo import undo  # %compact --undo's: see the imports above

        return undo(self.shared)

    # --- asking the strategy ---------------------------------------------------------------------------

    def _act(
        self, trigger: Trigger, estimate: int, provider: Provider | None, emit: Emit, review: Review | None
    ) -> object | None:
        v = self._view(trigger, estimate, live=True, provider=provider)
        action = self._checked(v)
        if isinstance(action, Keep):
            return None  # the common answer: nothing to build for it (nor to import)
        from .apply import apply

        return apply(self._ask(v, provider, emit, review), action)

    def _decide(self, trigger: Trigger, estimate: int, *, live: bool) -> Action:
        return self._checked(self._view(trigger, estimate, live=live))

    def _checked(self, v: View) -> Action:
        action = self._asked("decide", self.strategy.decide, v)
        if not isinstance(action, ACTIONS):
            raise StrategyError(
                f"strategy {self.strategy.name} answered {action!r} ({v.trigger}), which is not an "
                "action: return Keep(), Summarize(...), Drop(ids), Spill(ids), Handoff(...), Note(text) "
                "or Restrict(tools, note); nothing was changed"
            )
        return action

    def _ask(self, v: View, provider: Provider | None, emit: Emit, review: Review | None = None) -> Ask:
        from .apply import Ask  # an action's mechanisms: see the imports above

        return Ask(self.shared, self.spiller, self.strategy, v, provider, emit, review)

    def _view(
        self, trigger: Trigger, estimate: int, *, live: bool = False, provider: Provider | None = None
    ) -> View:
        # Only a strategy that asks the provider to compact is shown where the provider did.
        if not self.strategy.server_context:
            return view(self.shared, trigger, estimate, pins=self._pins())
        from .provider_compaction import server_side  # the api strategy's only

        at, compacts = server_side(self.shared, trigger, live=live, provider=provider)
        return view(
            self.shared, trigger, estimate, pins=self._pins(), server_compaction=at, server_compacts=compacts
        )

    def _pins(self) -> tuple[str, ...]:
        return tuple(self.pins()) if self.pins is not None else ()

    def _asked(self, what: str, method: Callable[[Any], T], arg: Any) -> T:
        """A strategy's own code, called: what it raises stops the run, named."""
        try:
            return method(arg)
        except StrategyError:
            raise
        except Exception as exc:  # noqa: BLE001 - the strategy's code: any failure stops the run, named
            raise StrategyError(
                f"strategy {self.strategy.name} raised {type(exc).__name__} in {what}: {exc}. The run "
                "stopped before anything of it was applied (the conversation and the log are as they "
                "were); fix the strategy, or run with --strategy compact"
            ) from exc

    @staticmethod
    def blank(strategy: Strategy, settings: CompactSettings, workspace: Path | None = None) -> ContextHost:
        """A host over an empty conversation: what a strategy adds and marks before any session."""
        return ContextHost(Conversation([]), settings, strategy=strategy, workspace=workspace)


__all__ = ["ContextHost", "Figures"]
