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
"""

from __future__ import annotations

import bisect
import json
import os
import re
import sys
import time
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import attrgetter, le
from pathlib import Path
from types import SimpleNamespace
from typing import overload

from ..errors import SessionError
from . import safeio, sidecar
from .entries import (
    TORN_NOTE,
    CompactEntry,
    Entry,
    MessageEntry,
    NoteEntry,
    ReplaceEntry,
    RolloverEntry,
    SpillEntry,
    UsageEntry,
    decode,
    parse_entry,
    parse_line,
)
from .loader import log_path

BINS = 200  # the picture's columns, whatever the log's length
READ_CHUNK = 4 << 20  # one buffer, read into again and again

KINDS = (
    "user",
    "assistant",
    "tool_call",
    "tool_result",
    "spill",
    "usage",
    "replace",
    "compact",
    "rollover",
    "note",
    "bad",
    "unknown",
)
_CODE = {k: i for i, k in enumerate(KINDS)}


@dataclass(frozen=True)
class Item:
    line: int
    kind: str  # user | assistant | tool_call | tool_result | spill | usage | replace | compact | rollover | note | bad
    label: str
    detail: str
    effective: bool
    tokens: int = 0  # usage items: prompt total + output
    reason: str = ""  # replace items
    images: int = 0  # issue-14: image parts of a message


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
    offsets: array = field(default_factory=lambda: array("Q"))  # each entry's first byte
    lines: array = field(default_factory=lambda: array("Q"))  # each entry's 1-based line
    kinds: bytearray = field(default_factory=bytearray)  # each entry's kind (index into KINDS)
    usage: list[tuple[int, int]] = field(default_factory=list)  # (entry index, tokens)
    reasons: dict[int, str] = field(default_factory=dict)  # entry index -> replace reason
    images: dict[int, int] = field(default_factory=dict)  # issue-14: entry index -> image parts
    bins: list[Bin] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)  # the build's stages (sidecar, read, scan, bins)

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
                    out.append(_parse_item(self.lines[i], raw, start >= self.effective_from, detail))
        except OSError as exc:
            raise SessionError(f"cannot read session log {self.path}: {exc.strerror or exc}") from exc
        return out


def _short(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def build_timeline(path: str | Path, *, bins: int = BINS) -> Timeline:
    """The timeline of a session's log: one streamed pass, memory a few bytes per entry."""
    file = log_path(path)
    clock = time.perf_counter
    started = clock()
    try:
        meta = sidecar.refresh(file.parent)
        fd = safeio.open_file(file)
    except OSError as exc:
        raise SessionError(f"cannot read session log {file}: {exc.strerror or exc}") from exc
    t = Timeline(
        session_id=file.parent.name,
        path=file,
        effective_messages=int(meta.get("effective_messages") or 0),
        problems=list(meta.get("problems") or []),
        effective_from=int(meta.get("effective_from") or 0),
    )
    # How far the sidecar's replay read (every line before it is known readable but those it
    # lists as unreadable) and the lines it found unreadable.
    state = meta.get("replay")
    bad = {b[0] for b in state.get("bad", ()) if isinstance(b, list) and b} if isinstance(state, dict) else set()
    replayed = meta.get("offset")
    scan = _Scanner(t, replayed if type(replayed) is int and replayed > 0 else 0)
    read_s = 0.0
    scanned = clock()
    with os.fdopen(fd, "rb"):
        size = os.fstat(fd).st_size
        buf = bytearray(READ_CHUNK)  # one buffer, read into again and again
        at, keep = 0, 0  # keep: the bytes of an unfinished line at the start of buf
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
    scan.finish(bad)
    binned = clock()
    t.bins = _bins(t, bins)
    done = clock()
    t.seconds = {
        "sidecar": round(scanned - started, 4),
        "read": round(read_s, 4),
        "scan": round(binned - scanned - read_s, 4),
        "bins": round(done - binned, 4),
    }
    return t


# The writer's layout (``entries.encode`` of the entries it builds): ``v`` and ``type`` first,
# then ``id`` and ``ts``; a message goes on with ``role``, ``content``, ``tool_calls``,
# ``tool_result`` and its optional keys in a fixed order, a usage entry with its four counts.
# A JSON string holds a quote only escaped, so in a line that is valid JSON (the sidecar's
# replay read it) these bytes are the keys and values they look like.
_HEADS = (  # seven kinds of first bytes, each closing its own (empty) group
    rb'(?:\{"v":1,"type":"(?:message","id":"[^"]*","ts":[0-9-][^,]*,"role":"(?:'
    rb'user","content":"","tool_calls":\[\],"tool_result":\{()|user"()|assistant"())'
    rb'|spill"()|compact"()'
    rb'|usage","id":"[^"]*","ts":[0-9-][^,]*,"input_tokens":[0-9]{1,15},"output_tokens":[0-9]{1,15},'
    rb'"cache_creation_input_tokens":[0-9]{1,15},"cache_read_input_tokens":[0-9]{1,15},()'
    rb")|())"
)  # 0 a tool result, 1 user, 2 assistant, 3 spill, 4 compact, 5 usage, 6 another line
_HEAD = re.compile(_HEADS)
_COUNTS = re.compile(
    rb',"input_tokens":([0-9]+),"output_tokens":([0-9]+),"cache_creation_input_tokens":([0-9]+),'
    rb'"cache_read_input_tokens":([0-9]+),'
)  # a usage line's counts, where _HEAD found them
_STR = rb'"[^"\\\n]*"'  # a string without escapes
# How a message line in that layout ends: its top-level ``"tool_result":null`` after the calls,
# then the optional keys with plain values, then the closing brace at the line's end (reasoning,
# image parts, CRLF, spaces: the line is parsed instead). Group 1: no calls; 2: a list of calls.
_ENDS = (  # the optional keys after a message's tool_result, with plain values, then its closing brace
    rb'(?:,"stop_reason":' + _STR + rb')?(?:,"notebook":\{"chars":[0-9]+,"cells":[0-9]+\})?'
    rb'(?:,"host":' + _STR + rb')?(?:,"model":' + _STR + rb')?(?:,"replace_id":' + _STR + rb")?\}"
)
_ENDING = re.compile(
    rb',"tool_result":null(?:(?<=,"tool_calls":\[\],"tool_result":null)()|(?<=\}\],"tool_result":null)())'
    + _ENDS
    + rb"\Z"
)
_AFTER_RESULT = re.compile(
    rb'"is_error":(?:true|false)(,"spilled":' + _STR + rb")?\}" + _ENDS + rb"\Z"
)  # how a tool result line in that layout ends (no image parts)
_CALLS = b',"tool_calls":[{'
TAIL = 320  # how far from its end a line's ending is looked for
ENDINGS = 16  # endings remembered per kind (the model's name makes them differ between sessions)
RECENT = 2  # and of those that name a replace (the messages it starts with), the latest
_REPLACE_ID = b',"replace_id":'
_BAD, _NOTE, _UNKNOWN = _CODE["bad"], _CODE["note"], _CODE["unknown"]
_TORN = TORN_NOTE.encode()  # in a note that may be the writer's torn-line note (``finish`` checks)
_LOOK, _BLANK = 255, 254  # a line to look at more closely; a blank line (no entry)
_CALL = 253  # a list of calls ends the line: checked for the key before the kind is given
# (first bytes, ending) -> kind code; endings: 0 not known, 1 a tool result's, 2 after no calls, 3 after calls
_KIND = bytes(
    [_LOOK, 3, _LOOK, _LOOK, _LOOK, _LOOK, 0, _CALL, _LOOK, _LOOK, 1, _CALL]
    + [4] * 4 + [7] * 4 + [5] * 4 + [_LOOK] * 232
)
_LASTINDEX = attrgetter("lastindex")
_ONLY = {v: bytes(int(i == v) for i in range(256)) for v in (5, _CALL)}  # translate: 1 where a byte is v
_TIMES4 = bytes(min(255, 4 * i) for i in range(256))
_ANY_HEX_ID = rb',"replace_id":"[0-9a-f]{32}"\}'  # the writer's replace ids are 32 hex digits
_HEX_ID = re.compile(_ANY_HEX_ID + rb"\Z")
# An ending worth remembering: the writer's own, with the model's name at most (a notebook mark
# or a host note makes each line's differ; a replace id is matched as any 32 hex digits).
_LASTING = re.compile(
    rb'(?:"is_error":(?:true|false)\}|,"tool_calls":\[\],"tool_result":null|\}\],"tool_result":null)'
    rb'(?:,"model":"[^"\\\n]*")?\}'
)


def _plus(values: array, base: int) -> bytes:
    """The machine bytes of ``values`` (an array of "Q") each plus ``base``, added at once (no carry
    crosses an item: offsets stay far below 2**64)."""
    if not base:
        return values.tobytes()
    n = len(values)
    total = int.from_bytes(values.tobytes(), sys.byteorder) + int.from_bytes(base.to_bytes(8, sys.byteorder) * n, sys.byteorder)
    return total.to_bytes(8 * n, sys.byteorder)


class _Scanner:
    """Records the entries of a log's lines, chunk by chunk (``build_timeline``).

    A line the sidecar's replay read (before ``replayed``) is valid JSON: in the writer's
    layout its kind is read in place, without a copy or a parse, from its first bytes and its
    ending. One regex match at each newline reads both, the ending of the line it ends (the
    endings seen so far, as fixed strings looked behind) and the first bytes of the next
    (``_boundary``); it runs over a chunk's lines in C (``map``), as do the steps after it
    (``translate``, ``compress``). An ending not seen before is found (``_AFTER_RESULT``,
    ``_ENDING``) and remembered. Every other line is parsed (``_slow``): another writer's
    layout, lines written after the replay, a torn tail.
    """

    def __init__(self, t: Timeline, replayed: int) -> None:
        self.t = t
        self.replayed = replayed
        self.line = 1
        # Endings remembered, by kind: "results" (after a tool result), "plain" (after
        # "tool_calls":[]), "calls" (after a list of calls); lasting ones go into the regex,
        # the latest few others (a replace id that is not the writer's) are checked apart.
        self.lasting: dict[str, tuple[bytes, ...]] = {"results": (), "plain": (), "calls": ()}
        self.recent: dict[str, tuple[bytes, ...]] = {"results": (), "plain": (), "calls": ()}
        self._compiled: tuple[re.Pattern[bytes], bytes, bytes] | None = None
        self.torn_notes: list[int] = []

    def _boundary(self) -> tuple[re.Pattern[bytes], bytes, bytes]:
        """The regex matched where a line starts, and its last group -> (the ending class of the
        line before, this line's first bytes)."""
        if self._compiled is None:
            branches, classes = [], []
            for c, name in ((1, "results"), (3, "calls"), (2, "plain")):
                known = self.lasting[name]
                if known:
                    behind = [b"(?<=" + re.escape(e) + b"\n)" for e in known]
                    behind += [b"(?<=" + re.escape(e[:-1]) + _ANY_HEX_ID + b"\n)" for e in known]
                    branches.append(b"(?:" + b"|".join(behind) + b")" + _HEADS)
                    classes.append(c)
            branches.append(_HEADS)
            classes.append(0)
            ending, head = [0], [6]
            for c in classes:
                ending += [c] * 7
                head += range(7)
            pattern = re.compile(b"|".join(branches))
            pad = [0] * (256 - len(ending))
            self._compiled = pattern, bytes(ending + pad), bytes(head + pad)
        return self._compiled

    def chunk(self, data: bytearray, stop: int, base: int) -> None:
        """The whole lines of ``data[:stop]``, the first at byte ``base`` of the log."""
        fast = min(stop, self.replayed - base)
        pos = self._fast(data, fast, base) if fast > 0 else 0
        if pos < stop:
            self._careful(data, pos, stop, base)

    def _fast(self, data: bytearray, stop: int, base: int) -> int:
        """The lines of ``data[:stop]`` the replay read; where the first line it did not read starts."""
        starts = array("Q")
        push, find, pos = starts.append, data.find, 0
        while True:  # where each line starts (memchr)
            nl = find(b"\n", pos, stop)
            if nl < 0:
                break
            push(pos)
            pos = nl + 1
        n = len(starts)
        if not n:
            return pos
        after = starts[1:]
        after.append(pos)  # each line's end (after its newline)
        boundary, ending_of, head_of = self._boundary()
        combos = bytes(map(_LASTINDEX, map(boundary.match, repeat(data), chain(starts, (pos,)), repeat(stop))))
        heads = combos[:-1].translate(head_of)
        # (first bytes * 4 + ending) of every line at once: bytes below 64 add without a carry.
        key = int.from_bytes(heads.translate(_TIMES4), "big") + int.from_bytes(combos[1:].translate(ending_of), "big")
        codes = bytearray(key.to_bytes(n, "big").translate(_KIND))
        if _CALL in codes:  # the list of calls is the calls' key: found before the ending
            pick = codes.translate(_ONLY[_CALL])
            first = list(compress(starts, pick))
            found = bytes(map(le, first, map(data.rfind, repeat(_CALLS), first, compress(after, pick))))
            codes = codes.replace(b"\xfd", b"\x02")
            miss = found.find(0)
            if miss >= 0:
                where = list(compress(range(n), pick))
                while miss >= 0:
                    codes[where[miss]] = _LOOK
                    miss = found.find(0, miss + 1)
        t = self.t
        extra: dict[int, tuple[int, int, str, int]] = {}  # line -> what a parse found
        at = codes.find(_LOOK)
        while at >= 0:
            codes[at] = self._look(data, starts[at], after[at] - 1, heads[at], at, extra)
            at = codes.find(_LOOK, at + 1)
        index = len(t.offsets)
        lines = range(self.line, self.line + n)
        self.line += n
        if _BLANK in codes:  # rare: blank lines are no entries
            keep = bytes(c != _BLANK for c in codes)
            at_entry = {line: k for k, line in enumerate(compress(range(n), keep))}
            extra = {at_entry[i]: f for i, f in extra.items()}
            starts, after = array("Q", compress(starts, keep)), array("Q", compress(after, keep))
            lines = list(compress(lines, keep))
            heads, codes = bytes(compress(heads, keep)), bytearray(compress(codes, keep))
        t.offsets.frombytes(_plus(starts, base))
        t.lines.extend(lines)
        t.kinds += codes
        usage: list[tuple[int, int]] | zip = []
        if 5 in heads:
            pick = heads.translate(_ONLY[5])
            usage = zip(compress(range(index, index + len(codes)), pick), self._tokens(data, starts, after, pick), strict=True)
        if any(f[0] == 5 for f in extra.values()):
            usage = sorted([*usage, *((index + i, f[1]) for i, f in extra.items() if f[0] == 5)])
        t.usage.extend(usage)
        for i, (code, _tokens, reason, pictures) in extra.items():
            if code == 6:
                t.reasons[index + i] = reason
            elif code == _NOTE:
                self.torn_notes.append(index + i)
            if pictures:
                t.images[index + i] = pictures
        return pos

    @staticmethod
    def _tokens(data: bytearray, starts: array, after: array, pick: bytes) -> list[int]:
        """The prompt total plus output of each usage line ``pick`` marks."""
        first, last = list(compress(starts, pick)), list(compress(after, pick))
        counts = _COUNTS.findall(b"".join(map(data.__getitem__, map(slice, first, last))))
        if len(counts) != len(first):  # a line that holds the keys twice: each read where the head has them
            counts = [_COUNTS.search(data, s, e).groups() for s, e in zip(first, last, strict=True)]  # type: ignore[union-attr]
        return [int(a) + int(b) + int(c) + int(d) for a, b, c, d in counts]

    def _look(
        self, data: bytearray, start: int, end: int, head: int, at: int, extra: dict[int, tuple[int, int, str, int]]
    ) -> int:
        """The kind of the line ``data[start:end]`` its known ending did not tell: from an ending
        found now (and remembered), else from its parse."""
        if head == 0:
            if data.endswith(self.recent["results"], start, end):
                return 3
            m = _AFTER_RESULT.search(data, max(start, end - TAIL), end)
            if m is not None:
                if m.lastindex is None:  # not a spilled result's (its own)
                    self._learn("results", bytes(data[m.start() : end]))
                return 3
        elif head < 3:
            code = self._ending(data, start, end, head + 1)
            if code >= 0:
                return code
        raw = bytes(data[start:end])
        if not raw.strip():
            return _BLANK
        found = _slow(raw, trusted=True)
        code = found[0]
        if found[1] or found[2] or found[3] or code == 5 or (code == _NOTE and _TORN in raw):
            extra[at] = found
        return code

    def _ending(self, data: bytearray, start: int, end: int, group: int) -> int:
        """The kind of a user (``group`` 2) or assistant (3) line ``data[start:end]`` from its
        ending, or -1. The ending found is remembered for the lines after it (``_learn``)."""
        if data.endswith(self.recent["calls"], start, end) and data.rfind(_CALLS, start, end) >= start:
            return 2
        if data.endswith(self.recent["plain"], start, end):
            return group - 2
        m = _ENDING.search(data, max(start, end - TAIL), end)
        if m is None:
            return -1
        at = m.start()
        plain = m.lastindex == 1
        if not plain and data.rfind(_CALLS, start, at) < 0:
            return -1
        self._learn("plain" if plain else "calls", bytes(data[at - 16 if plain else at - 2 : end]))
        return group - 2 if plain else 2

    def _learn(self, name: str, ending: bytes) -> None:
        """Remember an ending: the writer's own ones for good (in the regex), others as the latest few."""
        hex_id = _HEX_ID.search(ending)
        plain = ending[: hex_id.start()] + b"}" if hex_id else ending
        if _LASTING.fullmatch(plain):
            if plain not in self.lasting[name] and len(self.lasting[name]) < ENDINGS:
                self.lasting[name] += (plain,)
                self._compiled = None
        else:
            self.recent[name] = (ending, *self.recent[name][: RECENT - 1])

    def _careful(self, data: bytearray, pos: int, stop: int, base: int) -> None:
        """Lines the replay has not read (written since, or a torn tail): each parsed in full."""
        t, line = self.t, self.line
        while pos < stop:
            nl = data.find(b"\n", pos, stop)
            if nl < 0:
                nl = stop
            raw = bytes(data[pos:nl])
            if raw.strip():
                code, tokens, reason, pictures = _slow(raw, trusted=False)
                index = len(t.offsets)
                if code == 5:
                    t.usage.append((index, tokens))
                elif code == 6:
                    t.reasons[index] = reason
                elif code == _NOTE and _TORN in raw:
                    self.torn_notes.append(index)
                if pictures:
                    t.images[index] = pictures
                t.offsets.append(base + pos)
                t.lines.append(line)
                t.kinds.append(code)
            pos, line = nl + 1, line + 1
        self.line = line

    def finish(self, bad: set[int]) -> None:
        """The lines the sidecar lists as unreadable, and the line a torn-line note mended."""
        t = self.t
        lines = t.lines
        marked = []
        for number in sorted(bad):
            i = bisect.bisect_left(lines, number)
            if i < len(lines) and lines[i] == number:
                marked.append(i)
        for index in self.torn_notes:
            prev = index - 1
            mended = prev >= 0 and lines[prev] == lines[index] - 1 and t.kinds[prev] != _BAD
            if mended and t.read([prev], detail=False)[0].kind == "bad":
                marked.append(prev)
        if marked:
            for i in marked:
                t.kinds[i] = _BAD
                t.reasons.pop(i, None)
                t.images.pop(i, None)
            gone = set(marked)
            t.usage = [u for u in t.usage if u[0] not in gone]


def _slow(raw: bytes, *, trusted: bool) -> tuple[int, int, str, int]:
    """(kind code, usage tokens, replace reason, image parts) of one line, from its parse.

    ``trusted``: the sidecar's replay read the line and did not find it unreadable, so a
    message is a valid one and its kind is read from its keys without validating it again
    (unless it has image parts: they are counted as the loader reads them).
    """
    e = decode(raw)
    if e is None:
        return _BAD, 0, "", 0
    if trusted and e.get("type") == "message" and "parts" not in e:
        if type(e.get("tool_result")) is dict:
            return 3, 0, "", 0
        return (2 if e.get("tool_calls") else 0 if e.get("role") == "user" else 1), 0, "", 0
    entry = parse_entry(e)
    if entry is None:
        return _BAD, 0, "", 0
    item = _item(0, entry, False, with_detail=False)
    return _CODE.get(item.kind, _UNKNOWN), item.tokens, item.reason, item.images


def _usage_tokens(e: dict) -> int:
    """A usage entry's prompt total plus output, each count read within sense (``_count``)."""
    total = 0
    for key in _TOKEN_KEYS:
        value = e.get(key)
        total += value if type(value) is int and 0 <= value < 2**53 else _count(value)
    return total


_TOKEN_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


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


def _parse_item(lineno: int, raw: bytes, effective: bool, detail: bool = True) -> Item:
    entry = parse_line(raw)
    if entry is None:
        return Item(lineno, "bad", "unreadable line", raw[:2000].decode("utf-8", "replace"), False)
    return _item(lineno, entry, effective, with_detail=detail)


def _count(value: object) -> int:
    """A count read from disk: a non-negative integer below 2**53, else 0 (strings, lists, 1e308…)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float) and not (0 <= value < 2**53):
        return 0
    return int(value) if 0 <= value < 2**53 else 0


def _detail(e: dict) -> str:
    try:
        return json.dumps(e, ensure_ascii=False, indent=1)
    except (RecursionError, ValueError):
        return "(an entry nested too deeply to show)"


class _Plain:
    """A plainly valid message entry (``entries.plainly_valid``: no notebook mark, no image
    parts, each field of exactly its type) read as ``_item`` reads a ``Message``, without
    validating it: a page of entries is labelled without building a model per line."""

    parts = ()
    notebook = None

    def __init__(self, raw: dict) -> None:
        self.role = raw["role"]
        self.content = self.prompt_text = raw.get("content", "")
        result = raw.get("tool_result")
        self.tool_result = SimpleNamespace(content=result["content"]) if result is not None else None
        self.tool_calls = [SimpleNamespace(name=c["name"]) for c in raw.get("tool_calls", ())]


def _item(lineno: int, entry: Entry, effective: bool, *, with_detail: bool = True) -> Item:
    e = entry.raw
    detail = _detail(e) if with_detail else ""
    if isinstance(entry, MessageEntry):
        m = entry.parsed if entry.parsed is not None else _Plain(e)
        pictures = len(m.parts)
        shown = f" · {pictures} image{'s' if pictures > 1 else ''}" if pictures else ""
        if m.tool_result is not None:
            text = m.tool_result.content
            label = f"result {_short(text, 50)}{shown}"
            return Item(lineno, "tool_result", label, text, effective, images=pictures)
        if m.tool_calls:
            names = ", ".join(c.name for c in m.tool_calls)
            label = f"calls {names}" + (f" · {_short(m.content, 40)}" if m.content else "")
            return Item(lineno, "tool_call", label, detail, effective)
        label = _short(m.content)
        if m.notebook is not None:  # issue-13: the notebook activity block, by its field
            cells = getattr(m.notebook, "cells", 0)
            label = f"[{cells} notebook cell{'' if cells == 1 else 's'}] " + _short(m.prompt_text)
        return Item(lineno, m.role, label + shown, m.content, effective, images=pictures)
    if isinstance(entry, UsageEntry):
        tokens = _usage_tokens(e)
        return Item(lineno, "usage", f"usage {tokens:,} tokens", detail, effective, tokens=tokens)
    if isinstance(entry, ReplaceEntry):
        return Item(
            lineno,
            "replace",
            f"replace ({entry.reason}), {entry.count} messages",
            detail,
            effective,
            reason=entry.reason,
        )
    if isinstance(entry, SpillEntry):
        return Item(lineno, "spill", f"spill {entry.tool} {entry.bytes:,} bytes", detail, effective)
    if isinstance(entry, CompactEntry):
        ok = "ok" if entry.ok else f"failed: {entry.error}"
        before, after = (f"{n:,}" if isinstance(n, int) else "?" for n in (entry.before_tokens, entry.after_tokens))
        label = f"compact ({entry.trigger}) {before} → {after} tokens, {ok}"  # as %context writes it
        return Item(lineno, "compact", label, detail, effective)
    match entry:
        case RolloverEntry(phase=phase, reason=reason):
            return Item(lineno, "rollover", f"rollover {phase} ({reason})", detail, effective)
    if isinstance(entry, NoteEntry):
        return Item(lineno, "note", f"note: {_short(entry.text, 60)}", detail, effective)
    kind = e.get("type")
    return Item(lineno, str(kind or "unknown"), f"{kind} entry", detail, effective)
