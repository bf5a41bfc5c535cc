"""Bounds on what a provider hands back to be kept verbatim (issue 43).

A provider's compaction item is opaque: it is kept whole in the log and sent back as it came, so
its size is the server's choice. One that is larger than any real summary (a broken or hostile
server: 50 MB) would make every later log line, resume and request carry it. Past this bound the
item is not kept: the answer that carried it is, with its cost, and a notice says the conversation
goes on uncompacted. (The hardening issue bounds Anthropic's compaction blocks; the two bounds
belong together.)
"""

from __future__ import annotations

# Real compaction items are a summary's worth of encrypted text: tens of kilobytes, a few hundred
# at most. Four megabytes leaves them all room and keeps a log line readable.
COMPACTION_ITEM_MAX_BYTES = 4 << 20


def megabytes(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MB"


def too_big(n: int, what: str = "compaction item") -> str | None:
    """Why a part of ``n`` bytes is not kept (None: it is)."""
    if n <= COMPACTION_ITEM_MAX_BYTES:
        return None
    return (
        f"the provider's {what} was {megabytes(n)}, over the {megabytes(COMPACTION_ITEM_MAX_BYTES)} "
        "this version keeps (providers/bounds.py); it was not kept, so the conversation goes on "
        "uncompacted — the answer and its cost are kept"
    )
