"""Keeping a session's context under the window, at run time.

One ``ContextManager`` per session composes a ``SharedState`` (anchor, calibration,
ledger, breaker, counters, pending tool batch), the Layer 1 ``Spiller`` and a
``ContextStrategy`` — ``CompactStrategy`` (Layer 2 summaries), ``RolloverStrategy``
(a fresh window with a handoff) or ``ProviderCompactionStrategy`` (the provider's own). The pure decisions stay plain functions in
``compact`` (estimate, spill, summarize, breaker) and ``rollover`` (budget, handoff).
"""

from .compact import CompactStrategy
from .layer1 import Emit, Spiller, is_spill_preview
from .manager import STRATEGIES, ContextManager, check_provider, strategy_marks
from .provider_compaction import ProviderCompactionStrategy
from .rollover import FALLBACK_MARK, REMIND_MARK, FallbackTools, RolloverStrategy
from .settings import CompactSettings
from .state import SharedState
from .strategy import ContextStrategy, Marks, marks_for, threshold_for

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
    "ProviderCompactionStrategy",
    "RolloverStrategy",
    "SharedState",
    "Spiller",
    "check_provider",
    "is_spill_preview",
    "marks_for",
    "strategy_marks",
    "threshold_for",
]
