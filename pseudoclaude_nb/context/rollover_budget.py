"""The rollover budget: a pure function from where the context stands to what the host does.

Three stages before the window runs out, exactly as the articles' table (SPEC §9)::

    hard limit = window − output reserve          (180,000 for a 200K window)
    base limit = hard limit − fallback reserve    (167,000)
    remind     once, when base limit − current ≤ reminder threshold   (from 152,000)
    fallback   once, at the base limit: only new_context/search_history remain
    rollover   at the hard limit, or at the base limit once fallback was claimed
               ("hard-limit"); a rollover the model declared wins ("model")

No I/O and no clock: the manager keeps the claimed flags and asks again before each request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ActionType = Literal["continue", "remind", "fallback", "rollover"]
RolloverReason = Literal["model", "hard-limit"]

OUTPUT_RESERVE = 20_000
FALLBACK_RESERVE = 13_000
REMINDER_THRESHOLD = 15_000
# The reminder may claim at most this share of the base limit. The 15,000 of the table is
# sized for 200K windows; in a small one (the demo's 50K has a base limit of 17,000) it
# would put the reminder ~2,000 tokens in, before the first answer: "finish and hand
# off" before any work is a reminder no model can act on.
REMINDER_SHARE = 0.6


@dataclass(frozen=True)
class BudgetState:
    context_window: int
    output_reserve_tokens: int
    fallback_reserve_tokens: int
    reminder_threshold: int
    current_tokens: int
    explicit_rollover_declared: bool = False
    reminder_claimed: bool = False
    fallback_claimed: bool = False

    @property
    def hard_limit(self) -> int:
        return self.context_window - self.output_reserve_tokens

    @property
    def base_limit(self) -> int:
        return self.hard_limit - self.fallback_reserve_tokens

    @property
    def remaining(self) -> int:
        """Tokens left before the base limit (negative past it)."""
        return self.base_limit - self.current_tokens

    @property
    def remind_at(self) -> int:
        """The estimate from which the reminder is due."""
        return self.base_limit - self.reminder_threshold


@dataclass(frozen=True)
class BudgetAction:
    type: ActionType
    reason: RolloverReason | None = None


CONTINUE = BudgetAction("continue")


def evaluate_budget(state: BudgetState) -> BudgetAction:
    """What to do before the next request; the order of the checks is the precedence."""
    if state.explicit_rollover_declared:
        return BudgetAction("rollover", "model")
    if state.current_tokens >= state.hard_limit:
        return BudgetAction("rollover", "hard-limit")
    if state.current_tokens >= state.base_limit:
        # The fallback sampling was the model's last chance to write its own handoff.
        if state.fallback_claimed:
            return BudgetAction("rollover", "hard-limit")
        return BudgetAction("fallback")
    if state.remaining <= state.reminder_threshold and not state.reminder_claimed:
        return BudgetAction("remind")
    return CONTINUE


def reminder_threshold_for(base_limit: int, configured: int = REMINDER_THRESHOLD) -> int:
    """The reminder threshold a window uses: the configured one, at most 60 % of its base limit.

    ``evaluate_budget`` stays exactly the table; this decides the threshold it is given.
    Windows whose base limit is 25,000 or more (60K and up with the default reserves) keep
    the configured 15,000.
    """
    return max(0, min(configured, int(base_limit * REMINDER_SHARE)))


def limits(
    context_window: int,
    output_reserve: int = OUTPUT_RESERVE,
    fallback_reserve: int = FALLBACK_RESERVE,
    reminder_threshold: int = REMINDER_THRESHOLD,
) -> dict[str, int]:
    """The three marks of a window, for gauges and ``%context``: remind, base, hard."""
    s = BudgetState(context_window, output_reserve, fallback_reserve, reminder_threshold, 0)
    return {"remind": max(s.remind_at, 0), "base": s.base_limit, "hard": s.hard_limit}
