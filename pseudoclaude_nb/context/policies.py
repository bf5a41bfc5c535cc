"""The three built-in strategies, written with the public API (``pseudoclaude_nb.strategies``).

Each is a pure policy: it reads the ``View`` and answers an action; the host applies it.

- ``Compact`` (``--strategy compact``): a summary (Layer 2) once the estimate reaches the
  Layer 2 line, and when the provider says the prompt is too long.
- ``Rollover`` (``--strategy rollover``): the budget of SPEC §9 (``rollover_budget``) read as
  actions — remind once (``Note``), fall back to the hand-off tools once (``Restrict``), then
  a fresh window (``Handoff``); declares ``new_context`` and ``search_history`` and the
  guidance section.
- ``Api`` (``--strategy api``): the provider compacts (``server_context``); when an answer
  carries its compaction, the conversation follows it (``ServerCompacted``). ``%compact`` and a
  window the provider no longer compacts on its own (it began with the provider's on-demand
  compaction) ask the provider's on-demand compaction (``Summarize(native=True)``, issue 43).

All three answer ``%compact`` (``manual``) with a summary, as ``%compact`` always did.

What the API could not express, and stays the host's (the written reasons): the breaker, a
declared hand-off and the pinned first request are the host's state, not a policy's (a
policy is pure, so the host keeps what must outlive one answer); the new window's first
message (its fitting to the window, the person's edit of it) is the ``Handoff`` mechanism;
rollover's ``RolloverReminded``/``RolloverFallback`` events come through ``Strategy.events``.
"""

from __future__ import annotations

from typing import Any

from ..events import RolloverFallback, RolloverReminded
from ..messages import HOST_FALLBACK, HOST_REMIND
from ..strategies import (
    Action,
    Handoff,
    Keep,
    Limits,
    Note,
    Restrict,
    ServerCompacted,
    Strategy,
    Summarize,
    View,
)
from .rollover_budget import BudgetState, evaluate_budget

# How the host notes begin (for the model and a reader); they are recognised by ``Message.host``.
REMIND_MARK = "[host note] context rollover reminder"
FALLBACK_MARK = "[host note] context rollover fallback"
ROLLOVER_TOOLS = ("new_context", "search_history")
SERVER_MARK = "server compaction"


class Compact(Strategy):
    name = "compact"

    def marks(self, limits: Limits) -> tuple[tuple[str, int], ...]:
        return (("Layer 2", limits.threshold),)

    def decide(self, view: View) -> Action:
        if view.trigger in ("too_long", "manual"):
            return Summarize()
        if view.trigger == "before" and view.estimate >= view.threshold:
            return Summarize()
        return Keep()


class Api(Strategy):
    name = "api"
    server_context = True  # the provider compacts at the Layer 2 line; the model is told nothing

    def marks(self, limits: Limits) -> tuple[tuple[str, int], ...]:
        return ((SERVER_MARK, limits.threshold),)

    def decide(self, view: View) -> Action:
        if view.trigger in ("before", "answer") and view.server_compaction is not None:
            return ServerCompacted(view.server_compaction)
        if view.trigger == "manual":
            return Summarize(native=True)  # the provider's on-demand compaction, where it has one
        if view.trigger == "before" and not view.server_compacts and view.estimate >= view.threshold:
            # The window began with the provider's on-demand compaction, beside which it takes no
            # compaction at the line: ask for another one on demand here.
            return Summarize(native=True)
        if view.trigger == "too_long":
            # Too long before the provider's own compaction could run (a trigger above what the
            # window holds): our summary once, as under compact.
            return Summarize()
        return Keep()


# Rollover's system section (here, not in ``handoff``: naming the policy imports no hand-off model).
GUIDANCE = """## Context rollover
This session uses context rollover instead of summaries. When the host says the context
is nearly full (or earlier, at a natural break), call new_context with a handoff for a
fresh window: confirmed_requirements (each item with its source: the user's words, a spec,
a test), agent_inferences (your own conclusions, unverified; never promote them to
requirements), unresolved_conflicts, unverified_acceptance_criteria (next actions, tests
not yet passing), and related_files (path, role spec/test/implementation/other, note).
The switch happens before your next step; the full history stays searchable with
search_history. The workspace on disk is the source of truth: after a switch, re-read
files instead of recalling them."""


class Rollover(Strategy):
    name = "rollover"
    sections = (("rollover", GUIDANCE),)
    tools = ROLLOVER_TOOLS

    def acts_at(self, limits: Limits) -> int:
        return limits.base  # the base limit: where the host starts to act

    def marks(self, limits: Limits) -> tuple[tuple[str, int], ...]:
        return (("remind", limits.remind), ("base", limits.base), ("hard", limits.hard))

    def phase(self, view: View) -> str:
        if view.handoff is not None:
            return "declared"
        if HOST_FALLBACK in view.notes:
            return "fallback"
        return "reminded" if HOST_REMIND in view.notes else "normal"

    def describe(self, view: View) -> dict[str, Any]:
        # The gauge and %context show these instead of the Layer 2 line.
        limits = view.limits
        return {
            "rollover_limits": {"remind": limits.remind, "base": limits.base, "hard": limits.hard},
            "rollovers": view.rollovers,
            "rollover_phase": self.phase(view),
        }

    def decide(self, view: View) -> Action:
        if view.trigger == "manual":
            return Summarize()  # %compact works under rollover too
        if view.trigger == "too_long":
            return Handoff()  # a forced hand-off (the host refuses it in a window with no work)
        if view.trigger != "before":
            return Keep()
        state = budget(view)
        action = evaluate_budget(state)
        if action.type == "rollover":
            return Handoff()
        if action.type == "fallback":
            return Restrict(
                ROLLOVER_TOOLS,
                f"{FALLBACK_MARK}: the context is at its limit (about {state.current_tokens:,} tokens; "
                f"fallback limit {state.base_limit:,}). Only new_context and search_history are available "
                "now, and any other tool call is refused. Call new_context with your handoff now; "
                "otherwise the host switches windows with a handoff it writes itself, all of it unverified.",
                HOST_FALLBACK,
            )
        if action.type == "remind" and answered(view):
            # Issue 32: in a small window the fixed prompt alone is past the reminder mark;
            # "finish and hand off" before any answer is a reminder no model can act on.
            return Note(
                f"{REMIND_MARK}: about {state.current_tokens:,} of {state.context_window:,} tokens are "
                f"in use; {max(state.remaining, 0):,} remain before the fallback limit at "
                f"{state.base_limit:,}. Finish the step you are on, then call new_context with your "
                "handoff and related files; the task continues in a fresh window. At the limit only "
                "new_context and search_history remain.",
                HOST_REMIND,
            )
        return Keep()

    def events(self, action: Action, view: View) -> tuple[Any, ...]:
        if isinstance(action, Note) and action.kind == HOST_REMIND:
            return (RolloverReminded(view.estimate, view.limits.base),)
        if isinstance(action, Restrict):
            return (RolloverFallback(view.estimate, action.tools),)
        return ()


def budget(view: View) -> BudgetState:
    """SPEC §9's budget at the view's estimate, from the window's lines and what this window
    has said (the reminder, the fallback) or been given (a declared hand-off)."""
    lines = view.limits
    return BudgetState(
        lines.window,
        lines.window - lines.hard,  # the output reserve
        lines.hard - lines.base,  # the fallback reserve
        lines.base - lines.remind,  # the reminder threshold
        view.estimate,
        explicit_rollover_declared=view.handoff is not None,
        reminder_claimed=HOST_REMIND in view.notes,
        fallback_claimed=HOST_FALLBACK in view.notes,
    )


def answered(view: View) -> bool:
    """Whether this window holds work to hand over: a declared hand-off or any answer."""
    return view.handoff is not None or any(m.role == "assistant" for m in view.messages)


BUILT_IN: dict[str, type[Strategy]] = {"compact": Compact, "rollover": Rollover, "api": Api}
