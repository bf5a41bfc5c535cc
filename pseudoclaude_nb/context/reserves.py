"""Reserves that fit the window: the seed's numbers where they fit, shares of a small one.

The seed sizes its reserves for 128K–1M windows: 20,000 tokens for the summary (and
rollover's output reserve), 13,000 of safety margin, a 20,000-token recent tail, spills
above 50,000 bytes and a 200,000-byte cap per step. In a 4,096-token window those put
Layer 2 at −28,904: it ran before *every* request (issue 32). So the settings are
ceilings; a window whose seed reserves would take more than ``SEED_SHARE`` of it (under
~49,500 tokens with the defaults) gets each reserve as a share of the window, with a
floor, never above its setting:

    window   Layer 2 at   rollover remind · base · hard   spill above
    2,048        1,496        599 · 1,496 · 1,721          1,228 bytes
    4,096        2,991      1,197 · 2,991 · 3,441          2,457 bytes
    8,192        5,981      2,393 · 5,981 · 6,882          4,915 bytes
    128,000     95,000     80,000 · 95,000 · 108,000       50,000 bytes (the seed's)

Windows from ~49,500 tokens up keep the seed's numbers exactly (the demo's 50,000 included).
"""

from __future__ import annotations

from dataclasses import dataclass

# The seed reserves apply while together they leave at least a third of the window.
SEED_SHARE = 2 / 3
SUMMARY_SHARE, SUMMARY_FLOOR = 0.16, 256  # room for the summary, and the model's last output
MARGIN_SHARE, MARGIN_FLOOR = 0.11, 128  # headroom for the estimate's error
RECENT_SHARE, RECENT_FLOOR = 0.25, 64  # the recent tail kept verbatim
# Spill limits are in bytes (~3.5 bytes a token): one result ~17 % of the window, one
# step's results ~34 %.
SPILL_BYTES_PER_TOKEN, SPILL_FLOOR = 0.6, 1_024
BATCH_BYTES_PER_TOKEN, BATCH_FLOOR = 1.2, 2_048


@dataclass(frozen=True)
class Reserves:
    summary_reserve: int
    safety_margin: int
    recent_tokens: int
    spill_bytes: int
    spill_batch_bytes: int
    scaled: bool  # False: the settings as they are (the seed's numbers, or the person's)


def fits_seed(window: int, summary_reserve: int, safety_margin: int) -> bool:
    return summary_reserve + safety_margin <= window * SEED_SHARE


def _share(window: int, share: float, floor: int, ceiling: int) -> int:
    return max(1, min(ceiling, max(floor, int(window * share))))


def reserves_for(
    window: int,
    *,
    summary_reserve: int,
    safety_margin: int,
    recent_tokens: int,
    spill_bytes: int,
    spill_batch_bytes: int,
) -> Reserves:
    """The reserves a ``window`` uses, each at most its setting."""
    if window <= 0 or fits_seed(window, summary_reserve, safety_margin):
        return Reserves(summary_reserve, safety_margin, recent_tokens, spill_bytes, spill_batch_bytes, False)
    return Reserves(
        summary_reserve=_share(window, SUMMARY_SHARE, SUMMARY_FLOOR, summary_reserve),
        safety_margin=_share(window, MARGIN_SHARE, MARGIN_FLOOR, safety_margin),
        recent_tokens=_share(window, RECENT_SHARE, RECENT_FLOOR, recent_tokens),
        spill_bytes=_share(window, SPILL_BYTES_PER_TOKEN, SPILL_FLOOR, spill_bytes),
        spill_batch_bytes=_share(window, BATCH_BYTES_PER_TOKEN, BATCH_FLOOR, spill_batch_bytes),
        scaled=True,
    )
