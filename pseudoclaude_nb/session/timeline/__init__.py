"""The physical log as a sequence of items, for the timeline view (no UI here).

Every entry in file order — messages by role, tool calls, spills, usage points, replace
markers with their reason — marked as inside or outside the effective window (the last
committed replace and what came after it).

The timeline is built for any log size: one streamed pass keeps, per entry, only its byte
offset, line number and kind (a few bytes each), plus the usage points; the picture is
drawn from at most ``BINS`` bins of counts, and an entry's content is read from the log by
its offset only when it is shown (``Timeline.items[i]``). The effective window, the
effective message count and the problems come from the session's sidecar (``sidecar``),
which is brought up to date by reading only the bytes it has not seen.

The package is the timeline's read model of a log: this ``__init__`` builds it
(``build_timeline``, ``Timeline``); ``scan`` is the one pass over the log, ``items`` one
entry as the timeline shows it, ``index`` the classification kept beside the log
(``timeline.idx``). The widget that draws it is ``widgets.timeline``.
"""

from __future__ import annotations

import bisect
import os
import time
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, overload

from ... import safeio
from ...errors import SessionError
from ...workspace import LOG_NAME
from .. import sidecar
from ..loader import log_path
from . import index as timeline_index
from .items import KINDS, Item, parse_item
from .scan import Scanner

BINS = 200  # the picture's columns, whatever the log's length
READ_CHUNK = 4 << 20  # one buffer, read into again and again


@dataclass
class Bin:
    """A run of consecutive entries: [first, end) by entry index, and what kinds they are."""

    first: int
    end: int
    counts: dict[str, int] = field(default_factory=dict)
    effective: int = 0  # entries of the bin inside the effective window
    peak_tokens: int = 0  # the largest usage point in the bin (0: none)
    replaces: list[str] = field(default_factory=list)  # reasons of its replace markers (first few)
    first_line: int = 0
    last_line: int = 0
    images: int = 0  # issue-14: image parts of the bin's messages


class Entries(Sequence[Item]):
    """The log's entries, each read from the log by its offset when asked for."""

    def __init__(self, timeline: Timeline) -> None:
        self._t = timeline

    def __len__(self) -> int:
        return len(self._t.offsets)

    @overload
    def __getitem__(self, index: int) -> Item: ...
    @overload
    def __getitem__(self, index: slice) -> list[Item]: ...
    def __getitem__(self, index: int | slice) -> Item | list[Item]:
        if isinstance(index, slice):
            return self._t.read(range(len(self))[index])
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._t.read([index])[0]

    def __iter__(self) -> Iterator[Item]:
        for start in range(0, len(self), 256):
            yield from self._t.read(range(start, min(len(self), start + 256)))


@dataclass
class Timeline:
    session_id: str
    path: Path
    effective_messages: int
    problems: list[str]
    effective_from: int  # byte offset where the effective window begins
    offsets: array[int] = field(default_factory=lambda: array("Q"))  # each entry's first byte
    lines: array[int] = field(default_factory=lambda: array("Q"))  # each entry's 1-based line
    kinds: bytearray = field(default_factory=bytearray)  # each entry's kind (index into KINDS)
    usage: list[tuple[int, int]] = field(default_factory=list)  # (entry index, tokens)
    reasons: dict[int, str] = field(default_factory=dict)  # entry index -> replace reason
    images: dict[int, int] = field(default_factory=dict)  # issue-14: entry index -> image parts
    bins: list[Bin] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # the build's stages (sidecar, read, scan, bins)
    indexed_bytes: int = 0  # log bytes read from timeline.idx instead of scanned
    _usage_at: list[int] = field(default_factory=list, repr=False)  # usage's entry indexes, for step_of

    @property
    def items(self) -> Entries:
        return Entries(self)

    @property
    def count(self) -> int:
        return len(self.offsets)

    @property
    def first_effective(self) -> int | None:
        """The index of the first entry inside the effective window, or None."""
        lo, hi = 0, len(self.offsets)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.offsets[mid] < self.effective_from:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < len(self.offsets) else None

    @property
    def usage_curve(self) -> list[tuple[int, int]]:
        """(item index, tokens) of every usage point: the tokens-per-step curve."""
        return list(self.usage)

    def kind(self, index: int) -> str:
        return KINDS[self.kinds[index]]

    def step_of(self, index: int) -> int:
        """The step (1-based) of the usage entry at entry ``index``: the usage entries before it, plus one."""
        if len(self._usage_at) != len(self.usage):
            self._usage_at = [at for at, _ in self.usage]
        return bisect.bisect_left(self._usage_at, index) + 1

    def read(self, indexes: Sequence[int], *, detail: bool = True) -> list[Item]:
        """The entries at ``indexes``, read from the log by offset (one open, one read per entry).

        ``detail=False``: for labels only (a list), without the log entries' JSON in ``detail``.
        """
        out = []
        try:
            with os.fdopen(safeio.open_file(self.path), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                for i in indexes:
                    start = self.offsets[i]
                    end = self.offsets[i + 1] if i + 1 < len(self.offsets) else size
                    raw = os.pread(f.fileno(), end - start, start).split(b"\n", 1)[0]
                    item = parse_item(self.lines[i], raw, start >= self.effective_from, detail)
                    if item.kind == "usage":  # numbered as %context --at STEP and fork --at number them
                        item = replace(item, label=f"step {self.step_of(i)} · {item.label}")
                    out.append(item)
        except OSError as exc:
            raise SessionError(f"cannot read session log {self.path}: {exc.strerror or exc}") from exc
        return out


def build_timeline(path: str | Path, *, bins: int = BINS) -> Timeline:
    """The timeline of a session's log: one streamed pass, memory a few bytes per entry.

    The pass starts where the log's ``timeline.idx`` ends, when it has one that belongs to
    the log (``index``); a pass that read much without one leaves one behind.
    """
    file = log_path(path)
    clock = time.perf_counter
    started = clock()
    try:
        meta = sidecar.refresh(file.parent)
        fd = safeio.open_file(file)
    except OSError as exc:
        raise SessionError(f"cannot read session log {file}: {exc.strerror or exc}") from exc
    t = _timeline(file, meta)
    # The lines the sidecar's replay found unreadable.
    state = meta.get("replay")
    bad = (
        {b[0] for b in state.get("bad", ()) if isinstance(b, list) and b}
        if isinstance(state, dict)
        else set()
    )
    scanned = clock()
    with os.fdopen(fd, "rb"):
        scan, index_s, read_s = _scan(t, fd, meta)
        if _trusted(meta) - t.indexed_bytes >= timeline_index.MIN_BYTES:
            _keep(file.parent, fd, t, scan, meta)
    scan.finish(bad)
    binned = clock()
    t.bins = _bins(t, bins)
    done = clock()
    t.seconds = {
        "sidecar": round(scanned - started, 4),
        "index": round(index_s, 4),
        "read": round(read_s, 4),
        "scan": round(binned - scanned - index_s - read_s, 4),
        "bins": round(done - binned, 4),
    }
    return t


def keep_index(session_dir: Path, meta: dict[str, Any]) -> str | None:
    """Bring the log's ``timeline.idx`` up to the sidecar's offset when the log has grown 4 MB
    or 5 % since (the session writer's ``settle_meta``: a run's end, close); never raises:
    what went wrong is returned, for the writer's notices (None when all is well)."""
    trusted = _trusted(meta)
    have = timeline_index.covered(session_dir)
    if have > trusted:
        have = 0  # another log's, or a log cut since: built anew
    if trusted - have < max(timeline_index.MIN_BYTES, have // 20):
        return None  # a build reads that much in a few hundredths of a second
    file = Path(session_dir) / LOG_NAME
    try:
        with os.fdopen(safeio.open_file(file), "rb") as f:
            t = _timeline(file, meta)
            scan, _, _ = _scan(t, f.fileno(), meta, stop=trusted)
            _keep(Path(session_dir), f.fileno(), t, scan, meta)
    except Exception as exc:  # noqa: BLE001 - derived: the next build scans what the index does not cover
        return f"the timeline index of session {Path(session_dir).name} was not kept: {type(exc).__name__}: {exc}"
    return None


def _timeline(file: Path, meta: dict[str, Any]) -> Timeline:
    return Timeline(
        session_id=file.parent.name,
        path=file,
        effective_messages=int(meta.get("effective_messages") or 0),
        problems=list(meta.get("problems") or []),
        effective_from=int(meta.get("effective_from") or 0),
    )


def _trusted(meta: dict[str, Any]) -> int:
    """How far the sidecar's replay read: every line before is readable but those it lists."""
    replayed = meta.get("offset")
    return replayed if type(replayed) is int and replayed > 0 else 0


def _scan(
    t: Timeline, fd: int, meta: dict[str, Any], *, stop: int | None = None
) -> tuple[Scanner, float, float]:
    """Fill ``t`` from the log open as ``fd`` (up to ``stop``), from its index first when it has
    a good one (``t.indexed_bytes``): the scanner, and the seconds spent reading the index and the log."""
    clock = time.perf_counter
    began = clock()
    trusted = _trusted(meta)
    scan = Scanner(t, trusted)
    size = os.fstat(fd).st_size if stop is None else stop
    saved = timeline_index.load(t.path.parent, fd, size=size, trusted=trusted, kinds=len(KINDS))
    at = 0
    if saved is not None:
        t.offsets, t.lines, t.kinds = saved.offsets, saved.lines, saved.kinds
        t.usage, t.reasons, t.images = saved.usage, saved.reasons, saved.images
        scan.torn_notes, scan.line, at = saved.torn_notes, saved.next_line, saved.covered
    t.indexed_bytes, index_s, read_s = at, clock() - began, 0.0
    buf = bytearray(READ_CHUNK)  # one buffer, read into again and again
    keep = 0  # the bytes of an unfinished line at the start of buf
    while at < size:
        if keep == len(buf):  # a line longer than the buffer
            buf.extend(bytes(len(buf)))
        began = clock()
        with memoryview(buf) as view:
            got = os.preadv(fd, [view[keep : keep + min(len(buf) - keep, size - at)]], at)
        read_s += clock() - began
        if not got:
            break
        filled, at = keep + got, at + got
        end = buf.rfind(b"\n", 0, filled) + 1 if at < size else filled
        if end:
            scan.chunk(buf, end, at - filled)
        keep = filled - end
        if keep and end:
            buf[:keep] = buf[end:filled]
    return scan, index_s, read_s


def _keep(folder: Path, fd: int, t: Timeline, scan: Scanner, meta: dict[str, Any]) -> None:
    """Save what the scan found in the bytes the sidecar's replay read (before ``finish``)."""
    trusted = _trusted(meta)
    state = meta.get("replay")
    lines = state.get("lines") if isinstance(state, dict) else None
    if not trusted or type(lines) is not int:
        return
    k = bisect.bisect_left(t.offsets, trusted)
    next_line = lines + 1
    if (k and t.lines[k - 1] >= next_line) or (k < len(t.lines) and t.lines[k] < next_line):
        return  # the sidecar counted other lines than the scan: leave no index
    timeline_index.save(
        folder,
        fd,
        timeline_index.Saved(
            covered=trusted,
            next_line=next_line,
            offsets=t.offsets[:k],
            lines=t.lines[:k],
            kinds=t.kinds[:k],
            usage=[u for u in t.usage if u[0] < k],
            reasons={i: r for i, r in t.reasons.items() if i < k},
            images={i: n for i, n in t.images.items() if i < k},
            torn_notes=[i for i in scan.torn_notes if i < k],
        ),
    )


def _bins(t: Timeline, count: int) -> list[Bin]:
    """``count`` runs of consecutive entries: counted per kind in C (``bytearray.count``)."""
    n = len(t.offsets)
    if n == 0:
        return []
    count = max(1, min(count, n))
    first_eff = t.first_effective
    kinds, present = t.kinds, [c for c in range(len(KINDS)) if c in t.kinds]
    usage, u = t.usage, 0
    reasons, images = sorted(t.reasons.items()), sorted(t.images.items())
    r = p = 0
    out = []
    for b in range(count):
        lo, hi = n * b // count, n * (b + 1) // count
        counts = {KINDS[c]: k for c in present if (k := kinds.count(c, lo, hi))}
        eff = 0 if first_eff is None else max(0, hi - max(lo, first_eff))
        peak = 0
        while u < len(usage) and usage[u][0] < hi:
            peak = max(peak, usage[u][1])
            u += 1
        shown: list[str] = []
        while r < len(reasons) and reasons[r][0] < hi:
            if len(shown) < 5:
                shown.append(reasons[r][1])
            r += 1
        pictures = 0
        while p < len(images) and images[p][0] < hi:
            pictures += images[p][1]
            p += 1
        out.append(Bin(lo, hi, counts, eff, peak, shown, t.lines[lo], t.lines[hi - 1], pictures))
    return out
