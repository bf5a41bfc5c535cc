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

import json
import os
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import overload

from ..errors import SessionError
from . import safeio, sidecar
from .entries import (
    CompactEntry,
    Entry,
    MessageEntry,
    NoteEntry,
    ReplaceEntry,
    RolloverEntry,
    SpillEntry,
    UsageEntry,
    decode,
    parse_line,
)
from .loader import log_path

BINS = 200  # the picture's columns, whatever the log's length
READ_CHUNK = 8 << 20
PARSE_BELOW = 4096  # shorter lines are parsed; longer ones (message bodies) are classified by their keys

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
    # The lines the replay found unreadable (the sidecar keeps them): the rest are classified
    # by their keys where the writer's layout allows, without parsing.
    state = meta.get("replay")
    bad = {b[0] for b in state.get("bad", ()) if isinstance(b, list) and b} if isinstance(state, dict) else set()
    with os.fdopen(fd, "rb"):
        size = os.fstat(fd).st_size
        at, line, rest = 0, 1, b""
        while at < size:
            piece = os.pread(fd, min(READ_CHUNK, size - at), at)
            if not piece:
                break
            data = rest + piece if rest else piece
            base = at - len(rest)
            at += len(piece)
            end = data.rfind(b"\n") + 1 if at < size else len(data)
            line = _scan(t, data, end, base, line, bad)
            rest = data[end:]
    t.bins = _bins(t, bins)
    return t


def _scan(t: Timeline, data: bytes, stop: int, base: int, line: int, bad: set[int]) -> int:
    """Record every entry of ``data[:stop]`` (whole lines, starting at byte ``base``, line ``line``).

    Lines are found in place (no copy of a message line is made): most are classified by
    their keys (``_message_kind``); the rest are parsed.
    """
    offsets, lines, kinds, code = t.offsets, t.lines, t.kinds, _CODE
    find, pos = data.find, 0
    torn = not data.endswith(b"\n", 0, stop)  # the last line is cut (a crash mid-write)
    while pos < stop:
        nl = find(b"\n", pos, stop)
        if nl < 0:
            nl = stop
        if nl > pos and (data[pos] == 0x7B or not data[pos:nl].isspace()):
            kind = None
            tokens, reason = 0, ""
            if line in bad:
                kind = "bad"
            elif not (torn and nl == stop):
                if data.startswith(_USAGE, pos, nl):
                    entry = decode(data[pos:nl])
                    if entry is not None:
                        kind, tokens = "usage", _usage_tokens(entry)
                else:
                    kind = _message_kind(data, pos, nl)
            if kind is None:
                kind, tokens, reason = _classify(data[pos:nl])
            index = len(offsets)
            # Image parts are written last: a line ending in an object or a number has none.
            if (kind == "tool_result" or kind == "user") and data[nl - 2] in _MAY_END_PARTS:
                pictures = _images_at(data, pos, nl)
                if pictures:
                    t.images[index] = pictures
            offsets.append(base + pos)
            lines.append(line)
            kinds.append(code[kind])
            if kind == "usage":
                t.usage.append((index, tokens))
            elif kind == "replace":
                t.reasons[index] = reason
        pos = nl + 1
        line += 1
    return line


_USAGE = b'{"v":1,"type":"usage",'
_MAY_END_PARTS = frozenset(b'"]')
_TOKEN_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
_ROLE = b'role":"'  # found without its opening quote (a needle starting with one is slow)
_RESULT_HEAD = b'user","content":"","tool_calls":[],"tool_result":{'
_NO_RESULT = b'tool_result":null'  # its opening quote is checked apart, as with _ROLE
_NO_CALLS = b'"tool_calls":[],'
TAIL = 320  # how far from its end a message line's closing keys are looked for


def _message_kind(data: bytes, start: int, end: int) -> str | None:
    """The kind of the message line ``data[start:end]`` from the writer's key layout, or None.

    The writer writes ``role`` near the start and ``tool_calls`` then ``tool_result`` after
    the content, so a result reads ``"content":"","tool_calls":[],"tool_result":{`` right
    after its role, and any other message ends with ``"tool_result":null`` (a few keys may
    follow). A JSON string holds a quote only escaped, so those bytes are keys. A line in
    another layout (None) is parsed instead.
    """
    if not data.startswith(_MESSAGE, start, end) or data[end - 1] != 0x7D:
        return None
    r = data.find(_ROLE, start, min(end, start + 300))
    if r < 0 or data[r - 1] != 0x22:  # "
        return None
    r += len(_ROLE)
    if data.startswith(_RESULT_HEAD, r, end):
        return "tool_result"
    if data.startswith(b'user"', r, end):
        role = "user"
    elif data.startswith(b'assistant"', r, end):
        role = "assistant"
    else:
        return None
    k = data.rfind(_NO_RESULT, max(r, end - TAIL), end) - 1  # at its opening quote
    if k < 0 or data[k] != 0x22 or data[k - 1] != 0x2C:  # ",
        return None
    if data.startswith(_NO_CALLS, k - len(_NO_CALLS), k):
        return role
    return "tool_call" if data[k - 2] == 0x5D and data[k - 3] == 0x7D else None  # ...}],"tool_result"


def _usage_tokens(e: dict) -> int:
    """A usage entry's prompt total plus output, each count read within sense (``_count``)."""
    total = 0
    for key in _TOKEN_KEYS:
        value = e.get(key)
        total += value if type(value) is int and 0 <= value < 2**53 else _count(value)
    return total


def _images_at(data: bytes, start: int, end: int) -> int:
    """The image parts of the message line ``data[start:end]`` (issue-14): ``parts`` is written last."""
    at = data.rfind(b'"parts":[{', max(start, end - (64 << 10)), end)
    return data.count(b'"type":"image"', at, end) if at > 0 else 0


_MESSAGE = b'{"v":1,"type":"message",'


def _classify(raw: bytes) -> tuple[str, int, str]:
    """(kind, usage tokens, replace reason) of one line; long message lines by their keys only.

    A JSON string holds a quote only escaped, so ``"tool_result":`` found in the line is a
    key (the writer writes ``tool_calls`` and ``tool_result`` after the content).
    """
    if len(raw) >= PARSE_BELOW and raw.startswith(_MESSAGE) and raw.endswith(b"}"):
        r = raw.rfind(b'tool_result":')
        if r > 0 and raw[r - 1 : r] == b'"' and raw.startswith(b"{", r + 13):
            return "tool_result", 0, ""
        c = raw.rfind(b'tool_calls":', 0, r if r > 0 else len(raw))
        if c > 0 and raw[c - 1 : c] == b'"' and raw.startswith(b"[{", c + 12):
            return "tool_call", 0, ""
        role = raw.find(b'"role":"user"', 0, 300)
        return ("user" if role >= 0 else "assistant"), 0, ""
    entry = parse_line(raw)
    if entry is None:
        return "bad", 0, ""
    item = _item(0, entry, False, with_detail=False)
    return (item.kind if item.kind in _CODE else "unknown"), item.tokens, item.reason


def _bins(t: Timeline, count: int) -> list[Bin]:
    n = len(t.offsets)
    if n == 0:
        return []
    count = max(1, min(count, n))
    first_eff = t.first_effective
    usage = dict(t.usage)
    out = []
    for b in range(count):
        lo, hi = n * b // count, n * (b + 1) // count
        counts: dict[str, int] = {}
        for code in t.kinds[lo:hi]:
            name = KINDS[code]
            counts[name] = counts.get(name, 0) + 1
        eff = 0 if first_eff is None else max(0, hi - max(lo, first_eff))
        peak = max((usage[i] for i in range(lo, hi) if i in usage), default=0) if usage else 0
        reasons = [t.reasons[i] for i in range(lo, hi) if i in t.reasons][:5] if t.reasons else []
        pictures = sum(t.images.get(i, 0) for i in range(lo, hi)) if t.images else 0
        out.append(Bin(lo, hi, counts, eff, peak, reasons, t.lines[lo], t.lines[hi - 1], pictures))
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


def _item(lineno: int, entry: Entry, effective: bool, *, with_detail: bool = True) -> Item:
    e = entry.raw
    detail = _detail(e) if with_detail else ""
    if isinstance(entry, MessageEntry):
        m = entry.message
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
