"""A few messages of a long effective conversation, read by offset instead of replayed (issue 48).

``%sessions show`` lists the first and last 20 messages of a session's effective state. When
that state is long (a session resumed from before compaction existed, or imported: 10,000
messages and 20 MB) a replay builds every message to show forty, and a kernel's memory grows
by several times the log. When the sidecar says the state needed no repair (no problem: no
unreadable line, no cut or orphaned call, no replace discarded), the effective conversation
is exactly the message lines from the last committed replace on, in order — the lines the
timeline (``session.timeline``, read from ``timeline.idx``) classifies as messages in its
effective window — and only the wanted ones are read. Anything else (a count that differs
from the sidecar's, a line that is not a valid message) returns ``None``: the caller
replays. No IPython here; nothing is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..messages import Message
from .entries import MessageEntry, parse_line
from .step_index import MESSAGE_KINDS, StepIndex, step_index
from .timeline import Timeline, build_timeline


def effective_messages(
    path: Path, wanted: Sequence[int], *, expected: int, timeline: Timeline | None = None
) -> tuple[dict[int, Message], Timeline] | None:
    """The messages at 0-based positions ``wanted`` of the effective conversation of ``path``'s
    log, whose sidecar counts ``expected`` messages and no problem; None when they cannot be
    read so (the caller replays). Also the timeline it read them through (built if not given)."""
    # Built with its bins: the caller shows it (``%sessions show``'s timeline view).
    index: StepIndex = step_index(path, timeline if timeline is not None else build_timeline(path))
    t = index.timeline
    first = t.first_effective
    if first is None:
        return None if expected else ({}, t)
    # The effective window's first entry is its replace marker (or the log's first entry).
    messages = [i for i in range(first, t.count) if t.kinds[i] in MESSAGE_KINDS]
    if len(messages) != expected:
        return None
    wanted = [k for k in wanted if 0 <= k < len(messages)]
    found: dict[int, Message] = {}
    for k, raw in zip(wanted, index.lines([messages[k] for k in wanted]), strict=True):
        entry = parse_line(raw)
        if not isinstance(entry, MessageEntry):
            return None
        found[k] = entry.message
    return found, t
