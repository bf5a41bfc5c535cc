"""The loader's fast path: resume from the last complete replace, reading a bounded part.

When the last complete replace lies far into the log, the log is read backwards to it and
only the region from it on is replayed (with the replay core), plus the head of the file
for what the region cannot say (title, first model, first timestamp) and a look-back
before the replace for the entries that explain it. See ``session.loader`` for what a
fast load reports and what it does not.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import sidecar
from .entries import (
    PIN_TYPES,
    TORN_NOTE,
    CompactEntry,
    MessageEntry,
    NoteEntry,
    RolloverEntry,
    SpillEntry,
    UsageEntry,
    apply_pin,
    decode,
    parse_entry,
)
from .replay import LoadResult, replay

FIRST_CHUNK = 256 << 10  # the first backward read; each further one doubles
HEAD_CHUNK = 64 << 10
HEAD_LIMIT = 1 << 20  # title, first model and first timestamp are looked for this far
LOOKBACK = 1 << 20  # before the replace: the spills, intent and failures that led to it
HINT_WINDOW = 4 << 20  # how far back a full replay looks for the last replace (a hint)
# Tokens that find candidate lines; each line found is parsed before it counts. They do
# not start with a quote: CPython's bytes.find is ~20x slower on JSON for such needles.
_REPLACE = b'replace"'
_LOOKBACK_TOKENS = (b'spill"', b'compact"', b'rollover"', b'note"')


def load_fast(fd: int, file: Path, size: int, min_skip: int) -> LoadResult | None:
    """The load from the last complete replace, or None when the whole log must be replayed.

    None when no replace completes far enough from the start, or when the region after it
    holds an unreadable line (its true line number needs the whole file).
    """
    end = size
    buf = b""  # the file from ``end`` - len(buf) to ``size``, read backwards in growing chunks
    chunk = FIRST_CHUNK
    searched = size  # candidates at or after this offset were tried already
    read = 0
    while end > 0:
        start = max(0, end - chunk)
        piece = os.pread(fd, end - start, start)
        read += len(piece)
        buf, end, chunk = piece + buf, start, chunk * 2
        # Only lines that start inside what was read are whole: skip the first, cut line.
        first = 0 if start == 0 else buf.find(b"\n") + 1
        if first == 0 and start > 0:
            continue  # not one line break yet: read further back
        for at in _replace_candidates(buf, first, searched - start):
            offset = start + at
            if offset < min_skip:
                return None  # too little to skip: the full replay is as cheap
            result = LoadResult(path=file, bytes=size)
            commits = replay(buf, result, base=offset, start=at)
            if commits and commits[0] == offset:
                if result.bad_lines:
                    return None
                result.bytes_read = read
                _finish_fast(fd, result, offset, buf[:at], start)
                _pins_before(fd, result, offset)
                return result
        searched = start + first
        if start < min_skip:
            return None  # no complete replace far enough from the start
    return None


def last_replace_hint(fd: int, size: int) -> int:
    """The offset of the last replace marker in the log's last ``HINT_WINDOW`` bytes, else 0.

    A hint for the full replay (``replay_stream``'s ``held_before``), so it is not checked
    further: whether that replace completed, the replay finds out. A log whose last replace
    lies further back has a large effective state, which the replay keeps anyway.
    """
    start = max(0, size - HINT_WINDOW)
    buf = os.pread(fd, size - start, start)
    first = 0 if start == 0 else buf.find(b"\n") + 1
    if start > 0 and first == 0:
        return 0
    return next((start + at for at in _replace_candidates(buf, first, len(buf))), 0)


def _replace_candidates(buf: bytes, first: int, stop: int) -> Iterator[int]:
    """Starts of the lines in ``buf`` that are replace markers, last first.

    Only lines starting in ``[first, stop)`` count (``first`` is a line start); the marker
    is found by its ``"replace"`` token and confirmed by parsing its line.
    """
    i = buf.rfind(_REPLACE, first, min(len(buf), stop + 64))
    while i >= 0:
        nl = buf.rfind(b"\n", first, i)
        line_start = first if nl < 0 else nl + 1
        if line_start < stop:
            line_end = buf.find(b"\n", i)
            entry = _parse(buf[line_start : len(buf) if line_end < 0 else line_end])
            if entry is not None and entry.get("type") == "replace":
                yield line_start
        if line_start <= first:
            return
        i = buf.rfind(_REPLACE, first, line_start)


_parse = decode

_PIN_TOKEN = b'pin"'  # both "type":"pin" and "type":"unpin"
PIN_SCAN_CHUNK = 8 << 20


def _pins_before(fd: int, r: LoadResult, offset: int) -> None:
    """Put the pins in force at ``offset`` before the region's own pin entries.

    Pins are not part of the conversation, so the region does not hold them: the sidecar's
    stored replay state does (``sidecar.stored_pins``), up to its offset; the pin entries
    between that offset and ``offset`` (none when ``meta.json`` is current, the whole prefix
    when it is missing) are found by their token at C speed. A sidecar offset past
    ``offset`` is fine: applying a pin entry again changes nothing, and an unpin still
    follows its pin (``entries.apply_pin``).
    """
    stored, at = sidecar.stored_pins(fd, r.path.parent, r.bytes)
    pins = {p.id: p for p in stored}
    rest = b""
    while at < offset:
        piece = os.pread(fd, min(PIN_SCAN_CHUNK, offset - at), at)
        if not piece:
            break
        at += len(piece)
        data = rest + piece
        end = data.rfind(b"\n") + 1 if at < offset else len(data)
        data, rest = data[:end], data[end:]
        r.bytes_read += len(piece)
        if _PIN_TOKEN in data:
            for raw in _lines_with(data, (_PIN_TOKEN,)):
                obj = _parse(raw)
                if obj is not None and obj.get("type") in PIN_TYPES:
                    apply_pin(pins, obj)
    r.pin_ops[:0] = [{"type": "pin", "id": p.id, "ts": p.ts, "text": p.text} for p in pins.values()]


def _finish_fast(fd: int, r: LoadResult, offset: int, before: bytes, before_start: int) -> None:
    """Complete a region's result with what the rest of the log must say."""
    r._effective_line = None  # counted on demand
    region_title, region_first_model, region_first_ts = r.title, r.first_model, r.first_ts
    # The look-back: entries just before the replace explain it (its spill entries, the
    # rollover intent it commits, compactions that failed first).
    look_from = max(0, offset - LOOKBACK)
    if before_start > look_from:
        extra = os.pread(fd, before_start - look_from, look_from)
        r.bytes_read += len(extra)
        before = extra + before
        before_start = look_from
    cut = offset - look_from
    window = before[len(before) - cut :] if cut < len(before) else before
    first_line = window.find(b"\n") + 1 if look_from > 0 else 0
    spills, compacts, rollovers, notes = [], [], [], []
    last_model: str | None = None
    last_ts: float | None = None
    # Only lines that may be such entries are parsed: found by their tokens, at C speed.
    wanted = _LOOKBACK_TOKENS + ((b'model"',) if r.last_model is None else ())
    body = window[first_line:]
    lines = body.split(b"\n") if r.last_ts is None else _lines_with(body, wanted)
    for raw in lines:
        obj = _parse(raw) if raw and not raw.isspace() else None
        if obj is None:
            continue
        if isinstance(obj.get("ts"), (int, float)):
            last_ts = obj["ts"]
        entry = parse_entry(obj)
        if isinstance(entry, (UsageEntry, MessageEntry)) and entry.model:
            last_model = entry.model
        match entry:
            case SpillEntry():
                spills.append(entry)
            case CompactEntry():
                compacts.append(entry)
            case RolloverEntry():
                rollovers.append(entry)
            case NoteEntry():
                notes.append(entry)
                if entry.kind == TORN_NOTE:
                    # The writer mended a crash's torn line here, if the line before is unreadable
                    # (the full replay's rule: a torn-line note after a good line mends nothing).
                    at = body.find(raw)
                    if at <= 0:
                        r.torn_tail = r.torn_tail or (at == 0 and look_from + first_line > 0)
                    else:
                        prev = body[body.rfind(b"\n", 0, at - 1) + 1 : at - 1]
                        if prev and not prev.isspace() and _parse(prev) is None:
                            r.torn_tail = True
    r.spills[:0], r.compacts[:0], r.rollovers[:0], r.notes[:0] = spills, compacts, rollovers, notes
    if r.last_model is None:
        r.last_model = last_model
    if r.last_ts is None:
        r.last_ts = last_ts
    # The head: the first user text (the title), the first model and the first timestamp.
    # Not found in the head's first megabyte: the region's stand in (they may be in the
    # skipped part; real logs have all three on their first line).
    head = _scan_head(fd, offset)
    r.bytes_read += head.read
    if not _complete(head) and before_start <= head.end < offset:
        # The head scan stopped at a line longer than its limit, inside bytes the backward
        # read holds anyway: finish the scan there, so no line before the replace goes unseen
        # (a full replay would take the title from that line).
        pos = head.end
        for raw in before[head.end - before_start : offset - before_start].split(b"\n"):
            obj = _parse(raw) if raw and not raw.isspace() else None
            pos += len(raw) + 1
            if obj is not None:
                _head_entry(head, obj)
            if _complete(head):
                break
        head.end = min(pos, offset)
    r.title = head.title or region_title
    r.first_model = head.first_model or region_first_model
    r.first_ts = head.first_ts if head.first_ts is not None else region_first_ts
    if r.last_model is None:
        r.last_model = r.first_model
    look_start = look_from + first_line
    r.skipped = (min(head.end, look_start), look_start)


def _lines_with(data: bytes, tokens: tuple[bytes, ...]) -> list[bytes]:
    """The lines of ``data`` that hold any of ``tokens``, in order."""
    starts: set[int] = set()
    for token in tokens:
        i = data.find(token)
        while i >= 0:
            start = data.rfind(b"\n", 0, i) + 1
            end = data.find(b"\n", i)
            end = len(data) if end < 0 else end
            starts.add(start)
            i = data.find(token, end)
    out = []
    for start in sorted(starts):
        end = data.find(b"\n", start)
        out.append(data[start : len(data) if end < 0 else end])
    return out


@dataclass
class _Head:
    title: str | None = None
    first_model: str | None = None
    first_ts: float | None = None
    end: int = 0  # where the scan stopped (a line start)
    read: int = 0


def _scan_head(fd: int, limit: int) -> _Head:
    """Read from the start until the title, first model and first timestamp are known."""
    head = _Head()
    buf = b""
    stop = min(limit, HEAD_LIMIT)
    while head.end < stop:
        piece = os.pread(fd, min(HEAD_CHUNK, limit - head.end - len(buf)), head.end + len(buf))
        if not piece:
            break
        head.read += len(piece)
        buf += piece
        start = 0
        while (nl := buf.find(b"\n", start)) >= 0:
            raw = buf[start:nl]
            start = nl + 1
            entry = _parse(raw) if raw and not raw.isspace() else None
            if entry is not None:
                _head_entry(head, entry)
            if _complete(head):
                head.end += start
                return head
        if start == 0 and head.end + len(buf) >= stop:
            break  # one line fills the rest of the head: what it hides is in the skipped part
        head.end += start
        buf = buf[start:]
    return head


def _complete(head: _Head) -> bool:
    return bool(head.title and head.first_model and head.first_ts is not None)


def _head_entry(head: _Head, obj: dict[str, Any]) -> None:
    ts = obj.get("ts")
    if head.first_ts is None and isinstance(ts, (int, float)):
        head.first_ts = ts
    if obj.get("type") not in ("message", "usage"):
        return
    entry = parse_entry(obj)
    if not isinstance(entry, (MessageEntry, UsageEntry)):
        return  # an invalid message
    if not head.first_model and entry.model:
        head.first_model = entry.model
    if not head.title and isinstance(entry, MessageEntry):
        head.title = entry.title()
