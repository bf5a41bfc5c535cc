"""Where each step of a log is, and what surrounds it: read from the session's timeline.

A *step* is one model response the runner logged: its ``usage`` entry, numbered from 1 in
file order (``session.steps`` says what a step's request is). The timeline's read model of
the log (``session.timeline``: each entry's offset, line and kind, kept beside the log in
``timeline.idx`` so that an open scans only the bytes written since) already holds every
usage entry and replace marker, so a step is found without reading the log: what a request
needs is then read by offset — the nearest committed replace at or before the step and the
lines after it, the few compaction, rollover and pin entries before it — never the whole
history. No IPython here; nothing is written (a timeline build may leave ``timeline.idx``
behind, as the timeline view does).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from .. import safeio
from ..errors import SessionError
from .entries import PIN_TYPES, CompactEntry, Pin, RolloverEntry, apply_pin, decode, parse_entry
from .loader import log_path
from .timeline import Timeline, build_timeline
from .timeline.items import KIND_CODE

_MARKER_KEYS = frozenset(("v", "type", "id", "ts", "reason", "replace_id", "count"))
MESSAGE_KINDS = frozenset(KIND_CODE[k] for k in ("user", "assistant", "tool_call", "tool_result"))
_MESSAGES = bytes(int(c in MESSAGE_KINDS) for c in range(256))  # translate: 1 for a message entry
_CHUNK = 1 << 16


class StepRangeError(SessionError):
    """A step number outside the session's steps."""


@dataclass(frozen=True)
class Step:
    number: int  # 1-based
    line: int  # the usage entry's 1-based line
    end: int  # the byte after the usage line: the log up to here is the state after the answer
    tokens: int  # the provider's prompt total + output for this response (0: unreadable)
    model: str | None = None


@dataclass(frozen=True)
class Marker:
    """A replace marker as the log holds it (``committed``: its whole snapshot follows it)."""

    offset: int
    line: int
    reason: str
    replace_id: str
    fields: dict[str, Any]  # the marker's other fields (a fork names its source), for display
    entry: int = 0  # its index among the timeline's entries
    count: int = 0  # the messages of its snapshot
    committed: bool = True


class Steps(Sequence[Step]):
    """The steps of a log, each made when asked for (its model read from its usage line)."""

    def __init__(self, index: StepIndex) -> None:
        self._index = index

    def __len__(self) -> int:
        return len(self._index.timeline.usage)

    @overload
    def __getitem__(self, i: int) -> Step: ...
    @overload
    def __getitem__(self, i: slice) -> list[Step]: ...
    def __getitem__(self, i: int | slice) -> Step | list[Step]:
        if isinstance(i, slice):
            return [self[k] for k in range(len(self))[i]]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._index.step(i + 1)

    def __iter__(self) -> Iterator[Step]:
        return (self[i] for i in range(len(self)))


class StepIndex:
    """The steps, replace markers and other entries of a log, by entry index (from its timeline)."""

    def __init__(self, path: Path, timeline: Timeline, size: int) -> None:
        self.path = path
        self.timeline = timeline
        self.size = size  # the log's bytes the timeline covers
        self._markers: dict[int, Marker] = {}
        self._parsed: dict[int, Any] = {}  # compactions, rollovers, pins: by entry, read once
        self._figures: Any = None  # the step figures of this log, once read (``step_figures.figures_for``)

    @property
    def steps(self) -> Steps:
        return Steps(self)

    def check(self, n: int) -> Step:
        """Step ``n``, or a ``StepRangeError`` naming the valid range."""
        count = len(self.timeline.usage)
        if not count:
            raise StepRangeError(
                f"session {self.path.parent.name} has no steps yet (no model response is logged)"
            )
        if not 1 <= n <= count:
            raise StepRangeError(
                f"step {n} is out of range: session {self.path.parent.name} has steps 1–{count}"
            )
        return self.step(n)

    def entry(self, n: int) -> int:
        """The timeline entry of step ``n``'s usage line."""
        return self.timeline.usage[n - 1][0]

    def end_of(self, entry: int) -> int:
        """The byte after entry ``entry``'s line (where the next entry starts)."""
        t = self.timeline
        return t.offsets[entry + 1] if entry + 1 < t.count else self.size

    def step(self, n: int) -> Step:
        entry, tokens = self.timeline.usage[n - 1]
        (raw,) = self.lines([entry])
        obj = decode(raw)
        model = obj.get("model") if obj is not None else None
        return Step(
            n,
            self.timeline.lines[entry],
            self.end_of(entry),
            tokens,
            model if isinstance(model, str) and model else None,
        )

    # --- reading entries by offset --------------------------------------------------------------

    def lines(self, entries: Sequence[int]) -> list[bytes]:
        """The lines of ``entries`` (without their newline), each read by its offset."""
        t = self.timeline
        out: list[bytes] = []
        if not entries:
            return out
        try:
            with os.fdopen(safeio.open_file(self.path), "rb") as f:
                for i in entries:
                    start = t.offsets[i]
                    out.append(os.pread(f.fileno(), self.end_of(i) - start, start).split(b"\n", 1)[0])
        except OSError as exc:
            raise SessionError(f"cannot read session log {self.path}: {exc.strerror or exc}") from exc
        return out

    def read_bytes(self, start: int, end: int) -> bytes:
        """The log's bytes [start, end)."""
        try:
            with os.fdopen(safeio.open_file(self.path), "rb") as f:
                return os.pread(f.fileno(), end - start, start)
        except OSError as exc:
            raise SessionError(f"cannot read session log {self.path}: {exc.strerror or exc}") from exc

    def of_kind(self, kind: str, before: int) -> list[int]:
        """The entries of ``kind`` before entry ``before``, in order (found in C: ``bytearray.find``)."""
        code, kinds, out, i = KIND_CODE[kind], self.timeline.kinds, [], -1
        while (i := kinds.find(code, i + 1, before)) >= 0:
            out.append(i)
        return out

    def count(self, kind: str, before: int) -> int:
        return self.timeline.kinds.count(KIND_CODE[kind], 0, before)

    def bad_lines(self, before: int) -> list[int]:
        """The line numbers of the unreadable entries before entry ``before``."""
        return [self.timeline.lines[i] for i in self.of_kind("bad", before)]

    # --- replace markers ------------------------------------------------------------------------

    def markers(self, before: int) -> list[Marker]:
        """The replace markers before entry ``before``, oldest first, each read once.

        A marker is committed when the ``count`` entries after it are messages (its
        snapshot, written with it in one write); ``session.replay`` checks the one a request
        is replayed from line by line.
        """
        wanted = [i for i in sorted(self.timeline.reasons) if i < before]
        unread = [i for i in wanted if i not in self._markers]
        for i, raw in zip(unread, self.lines(unread), strict=True):
            self._markers[i] = self._marker(i, raw)
        return [self._markers[i] for i in wanted]

    def _marker(self, i: int, raw: bytes) -> Marker:
        t = self.timeline
        obj = decode(raw) or {}
        count = obj.get("count")
        count = count if type(count) is int and count >= 0 else 0
        snapshot = t.kinds[i + 1 : i + 1 + count]
        committed = len(snapshot) == count and not snapshot.translate(_MESSAGES).count(0)
        extra = {k: v for k, v in obj.items() if k not in _MARKER_KEYS}
        return Marker(
            t.offsets[i],
            t.lines[i],
            t.reasons.get(i, str(obj.get("reason", ""))),
            str(obj.get("replace_id", "")),
            extra,
            i,
            count,
            committed,
        )

    def request_size(self, n: int) -> int:
        """About how many messages step ``n``'s request holds, from the entries' kinds alone:
        the message entries from the last committed replace before it to its answer."""
        at = self.entry(n)
        start = next((m for m in reversed(self.markers(at)) if m.committed), None)
        lo = start.entry + 1 if start is not None else 0
        return max(self.timeline.kinds[lo:at].translate(_MESSAGES).count(1) - 1, 0)

    # --- entries beside the conversation ----------------------------------------------------------

    def _read_once(self, kind: str, before: int) -> list[Any]:
        """The entries of ``kind`` before entry ``before``, each read and parsed once (step after
        step, a long session's hundreds of compactions are not read again for each)."""
        wanted = self.of_kind(kind, before)
        unread = [i for i in wanted if i not in self._parsed]
        for i, raw in zip(unread, self.lines(unread), strict=True):
            obj = decode(raw)
            self._parsed[i] = obj if kind == "unknown" else parse_entry(obj)
        return [self._parsed[i] for i in wanted]

    def compactions(self, before: int) -> list[CompactEntry]:
        return [e for e in self._read_once("compact", before) if isinstance(e, CompactEntry)]

    def rollovers(self, before: int) -> list[RolloverEntry]:
        return [e for e in self._read_once("rollover", before) if isinstance(e, RolloverEntry)]

    def pins_at(self, before: int) -> list[dict[str, Any]]:
        """The pin entries in force before entry ``before`` (``entries.apply_pin``'s reading), as logged.

        Pin and unpin entries are among the timeline's "unknown" kinds (with ``spend`` and other
        entries a reader may not know): those are read, the pins kept.
        """
        pins: dict[str, Pin] = {}
        logged: dict[str, dict[str, Any]] = {}
        for entry in self._read_once("unknown", before):
            if entry is None or entry.get("type") not in PIN_TYPES or not isinstance(entry.get("id"), str):
                continue
            apply_pin(pins, entry)
            if entry["type"] == "pin":
                logged.setdefault(entry["id"], entry)
        return [logged[pid] for pid in pins]


def step_index(path: str | Path, timeline: Timeline | None = None) -> StepIndex:
    """The step index of a log, from its timeline (``timeline.idx`` and the bytes after it);
    ``timeline``: one already built for this log (the timeline view's)."""
    file = log_path(path)
    t = timeline if timeline is not None else build_timeline(file, bins=1)
    at = t.offsets[-1] if t.count else 0
    try:
        with os.fdopen(safeio.open_file(file), "rb") as f:
            # Where the last entry's line ends: the log may have grown since the timeline read it.
            while t.count and (piece := os.pread(f.fileno(), _CHUNK, at)):
                nl = piece.find(b"\n")
                at += nl + 1 if nl >= 0 else len(piece)
                if nl >= 0:
                    break
    except OSError as exc:
        raise SessionError(f"cannot read session log {file}: {exc.strerror or exc}") from exc
    return StepIndex(file, t, at)
