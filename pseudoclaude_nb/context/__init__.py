"""Keeping a session's context under the window, at run time.

One ``ContextManager`` per session composes a ``SharedState`` (anchor, calibration,
ledger, breaker, counters, pending tool batch), the Layer 1 ``Spiller`` and a
``ContextStrategy`` — ``CompactStrategy`` (Layer 2 summaries) or ``RolloverStrategy``
(a fresh window with a handoff). The pure decisions stay plain functions in
``compact`` (estimate, spill, summarize, breaker) and ``rollover`` (budget, handoff).
"""

from .compact import CompactStrategy
from .layer1 import Emit, Spiller, is_spill_preview
from .manager import STRATEGIES, ContextManager, dry_copy, dry_strategy, strategy_for
from .rollover import FALLBACK_MARK, REMIND_MARK, FallbackTools, RolloverStrategy
from .settings import CompactSettings
from .state import SharedState
from .strategy import ContextStrategy, Marks

__all__ = [
    "FALLBACK_MARK",
    "REMIND_MARK",
    "STRATEGIES",
    "CompactSettings",
    "CompactStrategy",
    "ContextManager",
    "ContextStrategy",
    "Emit",
    "FallbackTools",
    "Marks",
    "RolloverStrategy",
    "SharedState",
    "Spiller",
    "is_spill_preview",
    "dry_copy",
    "dry_strategy",
    "strategy_for",
]
