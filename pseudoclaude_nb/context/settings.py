"""The settings of a session's context: one frozen value both strategies read.

Layer 2 acts at ``threshold`` (window − summary reserve − safety margin). Rollover uses the
same two reserves (room for the model's last output, a summary there and a handoff here,
and headroom before it), so both strategies act at the same estimate.
"""

from __future__ import annotations

from dataclasses import dataclass

from .reserves import reserves_for
from .rollover_budget import REMINDER_THRESHOLD, BudgetState, limits, reminder_threshold_for
from .summarize import layer2_threshold


@dataclass(frozen=True)
class CompactSettings:
    context_window: int = 200_000
    spill_bytes: int = 50_000
    spill_batch_bytes: int = 200_000
    summary_reserve: int = 20_000
    safety_margin: int = 13_000
    recent_tokens: int = 20_000
    breaker_limit: int = 3
    # Rollover: remind this many tokens before the base limit (capped per window, see
    # ``effective_reminder_threshold``).
    reminder_threshold: int = REMINDER_THRESHOLD
    # --strategy api (issue 31): the provider clears old tool results from this many input
    # tokens on (``api_clear_tool_results``); 0: never.
    clear_tool_results: int = 0

    @classmethod
    def fitted(cls, context_window: int, **settings: int) -> CompactSettings:
        """The settings for ``context_window``: reserves as the window's shares where the
        settings' own numbers would not fit it (``reserves``); the rest as given."""
        r = reserves_for(
            context_window,
            summary_reserve=settings.pop("summary_reserve", cls.summary_reserve),
            safety_margin=settings.pop("safety_margin", cls.safety_margin),
            recent_tokens=settings.pop("recent_tokens", cls.recent_tokens),
            spill_bytes=settings.pop("spill_bytes", cls.spill_bytes),
            spill_batch_bytes=settings.pop("spill_batch_bytes", cls.spill_batch_bytes),
        )
        return cls(
            context_window=context_window,
            summary_reserve=r.summary_reserve,
            safety_margin=r.safety_margin,
            recent_tokens=r.recent_tokens,
            spill_bytes=r.spill_bytes,
            spill_batch_bytes=r.spill_batch_bytes,
            **settings,
        )

    @property
    def threshold(self) -> int:
        """The Layer 2 line."""
        return layer2_threshold(self.context_window, self.summary_reserve, self.safety_margin)

    @property
    def tail_tokens(self) -> int:
        # The tail may use at most half of what the window allows before compacting: with
        # a small window, 20,000 recent tokens would leave nothing old to summarize.
        return max(1, min(self.recent_tokens, self.threshold // 2))

    @property
    def effective_reminder_threshold(self) -> int:
        """The reminder threshold this window uses: the setting, at most 60 % of the base limit."""
        base = self.context_window - self.summary_reserve - self.safety_margin
        return reminder_threshold_for(base, self.reminder_threshold)

    def budget(self, current: int, **flags: bool) -> BudgetState:
        """Rollover's budget at ``current`` tokens (output reserve = summary reserve,
        fallback reserve = safety margin)."""
        return BudgetState(
            self.context_window,
            self.summary_reserve,
            self.safety_margin,
            self.effective_reminder_threshold,
            current,
            **flags,
        )

    @property
    def rollover_limits(self) -> dict[str, int]:
        """Rollover's three marks: remind, base (fallback) and hard."""
        return limits(
            self.context_window, self.summary_reserve, self.safety_margin, self.effective_reminder_threshold
        )
