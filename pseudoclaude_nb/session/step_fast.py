"""A step's request told from the step figures (``step_figures``), without replaying it (issue 47).

When the request is the plain case — from the nearest committed replace (or the log's
start) to the step, every line a readable message, each the replace's snapshot or appended
plainly after it, no image parts, nothing ``replay.settle`` would cut, drop or mark — its
messages are exactly the message lines of that range, in order, less the answer. Then its
totals come from the figures (how many, their estimate) and its messages are read by offset
only when one is asked for (``LogMessages``: the view reads its first and last hundred; a
fork copies the lines). Any other case is left to the replay (``plan`` returns None), so
what a step shows is what the replay gives. No IPython here; nothing is written but the
kept figures (``steps.idx``), removed when a line no longer matches them.
"""

from __future__ import annotations

import contextlib
import os
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from .. import safeio
from ..errors import SessionError
from ..messages import Message
from ..workspace import STEP_FIGURES
from .entries import MessageEntry, encode, message_entry, parse_line
from .step_figures import (
    ASSISTANT,
    CLEAN,
    IMAGES,
    LEGACY,
    MARKED,
    NAMES_LAST_REPLACE,
    NAMES_REPLACE,
    OPEN,
    SPILLED,
    UNREADABLE,
    WRITERS_LINE,
    Figures,
    body_end,
    has,
    snapshot_tail,
)
from .step_index import Marker, Step, StepIndex
from .timeline.items import KIND_CODE

_BAD, _REPLACE = KIND_CODE["bad"], KIND_CODE["replace"]
_SNAPSHOT = bytes(
    int(c & (NAMES_REPLACE | NAMES_LAST_REPLACE) == NAMES_REPLACE | NAMES_LAST_REPLACE) for c in range(256)
)
_NAMES = has(NAMES_REPLACE)
_REFUSED = has(UNREADABLE | IMAGES)
_LEGACY, _MARKED, _SPILLED = has(LEGACY), has(MARKED), has(SPILLED)


class FiguresMismatch(SessionError):
    """A line read through the step figures is not the one they were made from."""


@dataclass(frozen=True)
class Plan:
    first: int  # the ordinal (among the log's message entries) of the request's first message
    end: int  # past its last
    units: int  # its messages in the estimator's unit, summed
    start: Marker | None  # the committed replace it starts with (None: the log's start)


def plan(index: StepIndex, fig: Figures | None, step: Step, markers: list[Marker]) -> Plan | None:
    """Where step ``step``'s request lies among the figures, when it is the plain case; else None."""
    t = index.timeline
    at = index.entry(step.number)
    if fig is None or fig.entries < at:
        return None
    start = next((m for m in reversed(markers) if m.committed), None)
    lo = start.entry + 1 if start is not None else 0
    if t.kinds.find(_BAD, lo, at) >= 0 or t.kinds.find(_REPLACE, lo, at) >= 0:
        return None  # an unreadable line or an unfinished replace: the replay decides
    a, b = fig.ordinal(t.offsets[lo]), fig.ordinal(t.offsets[at])
    snapshot = start.count if start is not None else 0
    flags = fig.flags
    if b - a < snapshot or flags[a : a + snapshot].translate(_SNAPSHOT).count(1) != snapshot:
        return None
    if flags[a + snapshot : b].translate(_NAMES).count(1) or flags[a:b].translate(_REFUSED).count(1):
        return None  # a line of another replace, an unreadable message, image parts (checked on load)
    end = b - 1 if b > a and flags[b - 1] & ASSISTANT else b  # the answer to this request
    request = flags[a:end]
    if request.translate(_LEGACY).count(1) and not request.translate(_MARKED).count(1):
        return None  # a log from before the durable marks: settle marks its previews
    if end > a and (not fig.pairs[end - 1] & CLEAN or fig.pairs[end - 1] & OPEN):
        return None  # settle would cut calls or drop results
    return Plan(a, end, fig.units[end] - fig.units[a], start)


class LogMessages(Sequence[Message]):
    """The messages of a request, each read from the log by its offset when asked for (and kept)."""

    def __init__(self, index: StepIndex, fig: Figures, first: int, end: int) -> None:
        self._index, self._fig = index, fig
        self.first, self.end = first, end
        self._made: dict[int, Message] = {}

    def __len__(self) -> int:
        return self.end - self.first

    @overload
    def __getitem__(self, i: int) -> Message: ...
    @overload
    def __getitem__(self, i: slice) -> list[Message]: ...
    def __getitem__(self, i: int | slice) -> Message | list[Message]:
        if isinstance(i, slice):
            return self._many(range(len(self))[i])
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._many([i])[0]

    def __iter__(self) -> Iterator[Message]:
        for lo in range(0, len(self), 1024):
            yield from self._many(range(lo, min(len(self), lo + 1024)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def _many(self, positions: Sequence[int]) -> list[Message]:
        wanted = [self.first + p for p in positions if self.first + p not in self._made]
        t = self._index.timeline
        # Each message entry's place in the timeline, by its offset (the figures were checked
        # to hold the timeline's message entries).
        entries = [_entry_at(t.offsets, self._fig.offsets[k]) for k in wanted]
        for k, raw in zip(wanted, self._index.lines(entries), strict=True):
            self._made[k] = _message(self._index, self._fig, k, raw)
        return [self._made[self.first + p] for p in positions]

    def spilled(self) -> list[Message]:
        """The messages whose results were spilled (a fork copies their files)."""
        pairs = self._fig.pairs
        picked = [p for p in range(len(self)) if pairs[self.first + p] & SPILLED]
        return self._many(picked)

    def snapshot_lines(self, replace_id: str, model: str | None) -> bytes:
        """The request's messages as the snapshot lines of replace ``replace_id`` (the first with
        ``model``): each line copied from the log where it is the writer's encoding of its
        message, the others encoded from their message, as ``fork.fork_log`` encodes them."""
        if not len(self):
            return b""
        fig, index = self._fig, self._index
        t = index.timeline
        base = fig.offsets[self.first]
        last = _entry_at(t.offsets, fig.offsets[self.end - 1])
        data = index.read_bytes(base, index.end_of(last))
        out: list[bytes | memoryview] = [encode(message_entry(self[0], replace_id=replace_id, model=model))]
        tail, view, flags, crcs = snapshot_tail(replace_id), memoryview(data), fig.flags, fig.crcs
        for k in range(self.first + 1, self.end):
            at = fig.offsets[k] - base
            nl = data.find(b"\n", at)
            end = nl if nl >= 0 else len(data)
            if zlib.crc32(view[at:end]) != crcs[k]:
                raise _mismatch(index)
            cut = body_end(data, at, end) if flags[k] & WRITERS_LINE else -1
            if cut >= 0:  # the line as it is, but its last members: no copy until the join
                out += (view[at:cut], tail)
            else:
                out.append(
                    encode(message_entry(_message(index, fig, k, data[at:end]), replace_id=replace_id))
                )
        return b"".join(out)


def _entry_at(offsets: Sequence[int], offset: int) -> int:
    from bisect import bisect_left

    return bisect_left(offsets, offset)


def _message(index: StepIndex, fig: Figures, k: int, raw: bytes) -> Message:
    entry = parse_line(raw)
    if zlib.crc32(raw) != fig.crcs[k] or not isinstance(entry, MessageEntry):
        raise _mismatch(index)
    return entry.message


def _mismatch(index: StepIndex) -> FiguresMismatch:
    """The log no longer holds the lines its figures were made from: they are removed (the next
    reading builds them again) and the reader is told to ask again."""
    with contextlib.suppress(OSError):
        folder = safeio.open_dir(index.path.parent)
        try:
            os.unlink(STEP_FIGURES, dir_fd=folder)
        finally:
            os.close(folder)
    return FiguresMismatch(
        f"session log {index.path} changed under its step figures ({STEP_FIGURES}, now removed); ask again"
    )
