"""Rollover: instead of summarizing, hand the task to a fresh window with a structured handoff.

``budget`` is the pure three-stage budget (remind, fallback, rollover); ``handoff`` the
four-section handoff and the new window's first message. The runtime side is
``context.rollover.RolloverStrategy``.
"""

from .budget import BudgetAction, BudgetState, evaluate_budget, limits, reminder_threshold_for
from .handoff import CheckedFile, Handoff, Intent, RelatedFile, Requirement

__all__ = [
    "BudgetAction",
    "BudgetState",
    "CheckedFile",
    "Handoff",
    "Intent",
    "RelatedFile",
    "Requirement",
    "evaluate_budget",
    "limits",
    "reminder_threshold_for",
]
