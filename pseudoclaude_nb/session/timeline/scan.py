"""The timeline's one pass over a log: each line's kind, offset and usage, read in place.

A line the sidecar's replay has read is valid JSON, so in the writer's layout its kind is
known from its first bytes and its ending without a parse; every other line (another
tool's layout, lines after the sidecar's offset, a torn tail) is parsed in full. The kinds
equal a full parse of every line (``tests/test_timeline_binned.py`` checks it against one).
It owns the scan only: the timeline's model, bins and items are ``timeline.py``.
"""

from __future__ import annotations

import bisect
import re
import sys
from array import array
from itertools import chain, compress, repeat
from operator import attrgetter, le
from typing import Any

from ..entries import TORN_NOTE, decode, parse_entry
from .items import KIND_CODE, entry_item

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
_BAD, _NOTE, _UNKNOWN = KIND_CODE["bad"], KIND_CODE["note"], KIND_CODE["unknown"]
_TORN = TORN_NOTE.encode()  # in a note that may be the writer's torn-line note (``finish`` checks)
_LOOK, _BLANK = 255, 254  # a line to look at more closely; a blank line (no entry)
_CALL = 253  # a list of calls ends the line: checked for the key before the kind is given
# (first bytes, ending) -> kind code; endings: 0 not known, 1 a tool result's, 2 after no calls, 3 after calls
_KIND = bytes(
    [_LOOK, 3, _LOOK, _LOOK, _LOOK, _LOOK, 0, _CALL, _LOOK, _LOOK, 1, _CALL]
    + [4] * 4
    + [7] * 4
    + [5] * 4
    + [_LOOK] * 232
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


def _plus(values: array[int], base: int) -> bytes:
    """The machine bytes of ``values`` (an array of "Q") each plus ``base``, added at once (no carry
    crosses an item: offsets stay far below 2**64)."""
    if not base:
        return values.tobytes()
    n = len(values)
    total = int.from_bytes(values.tobytes(), sys.byteorder) + int.from_bytes(
        base.to_bytes(8, sys.byteorder) * n, sys.byteorder
    )
    return total.to_bytes(8 * n, sys.byteorder)


class Scanner:
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

    def __init__(
        self, t: Any, replayed: int
    ) -> None:  # t: the timeline.Timeline it fills (no import: no cycle)
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
        combos = bytes(
            map(_LASTINDEX, map(boundary.match, repeat(data), chain(starts, (pos,)), repeat(stop)))
        )
        heads = combos[:-1].translate(head_of)
        # (first bytes * 4 + ending) of every line at once: bytes below 64 add without a carry.
        key = int.from_bytes(heads.translate(_TIMES4), "big") + int.from_bytes(
            combos[1:].translate(ending_of), "big"
        )
        codes = bytearray(key.to_bytes(n, "big").translate(_KIND))
        if _CALL in codes:  # the list of calls is the calls' key: found before the ending
            pick: bytes | bytearray = codes.translate(_ONLY[_CALL])
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
        lines: range | list[int] = range(self.line, self.line + n)
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
        usage: list[tuple[int, int]] | zip[Any] = []
        if 5 in heads:
            pick = heads.translate(_ONLY[5])
            usage = zip(
                compress(range(index, index + len(codes)), pick),
                self._tokens(data, starts, after, pick),
                strict=True,
            )
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
    def _tokens(data: bytearray, starts: array[int], after: array[int], pick: bytes) -> list[int]:
        """The prompt total plus output of each usage line ``pick`` marks."""
        first, last = list(compress(starts, pick)), list(compress(after, pick))
        counts = _COUNTS.findall(b"".join(map(data.__getitem__, map(slice, first, last))))
        if len(counts) != len(first):  # a line that holds the keys twice: each read where the head has them
            counts = [_COUNTS.search(data, s, e).groups() for s, e in zip(first, last, strict=True)]  # type: ignore[union-attr]
        return [int(a) + int(b) + int(c) + int(d) for a, b, c, d in counts]

    def _look(
        self,
        data: bytearray,
        start: int,
        end: int,
        head: int,
        at: int,
        extra: dict[int, tuple[int, int, str, int]],
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
    item = entry_item(0, entry, False, with_detail=False)
    return KIND_CODE.get(item.kind, _UNKNOWN), item.tokens, item.reason, item.images
