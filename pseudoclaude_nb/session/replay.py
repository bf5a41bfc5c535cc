"""The replay core: a log's bytes into the effective conversation (rules in ``session.loader``).

``replay_stream`` reads entries through ``entries.parse_entry`` (the one parser) and applies
the replace protocol, a chunk at a time (``replay_file`` from a file, ``replay`` from bytes
in memory); ``settle`` makes the result protocol-valid without inventing results. No file
is opened here except to count ``effective_from_line`` on demand.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import orjson

from .. import safeio
from ..messages import Message, pairing_problems, repair_pairing
from .entries import (
    PIN_TYPES,
    TORN_NOTE,
    CompactEntry,
    MessageEntry,
    NoteEntry,
    OtherEntry,
    Pin,
    ReplaceEntry,
    RolloverEntry,
    SpillEntry,
    UsageEntry,
    effective_pins,
    parse_entry,
    plainly_valid,
)
from .legacy import upgrade_legacy


@dataclass
class LoadResult:
    path: Path
    messages: list[Message] = field(default_factory=list)
    bad_lines: list[int] = field(default_factory=list)
    torn_tail: bool = False
    torn_replace: bool = False
    truncated_tool_calls: bool = False
    orphan_results: int = 0
    first_model: str | None = None
    last_model: str | None = None
    first_ts: float | None = None
    last_ts: float | None = None
    title: str = ""
    physical_messages: int = 0
    replaces: int = 0
    usage_anchor: tuple[int, int] | None = None  # (tokens, conversation length)
    spills: list[SpillEntry] = field(default_factory=list)
    compacts: list[CompactEntry] = field(default_factory=list)
    rollovers: list[RolloverEntry] = field(default_factory=list)
    notes: list[NoteEntry] = field(default_factory=list)
    # The pin and unpin entries, in log order (a fast load puts the pins in force before
    # its region first, from the sidecar: see ``fast_load``); ``pins`` is what they leave.
    pin_ops: list[dict[str, Any]] = field(default_factory=list)
    bytes: int = 0
    effective_from_byte: int = 0  # where the effective state begins: the last committed replace
    bytes_read: int = 0  # what the load read of the file (all of it, unless the fast path skipped a part)
    skipped: tuple[int, int] | None = None  # [start, end) the fast path did not read; None: full replay
    # issue-14: image parts whose file is missing or altered (a text note stands in for each)
    bad_images: list[str] = field(default_factory=list)
    _effective_line: int | None = field(default=1, repr=False)

    @property
    def effective_from_line(self) -> int:
        """The 1-based line where the effective state begins (counted on first use after a fast load)."""
        if self._effective_line is None:
            with os.fdopen(safeio.open_file(self.path), "rb") as f:
                prefix = f.read(self.effective_from_byte)
            self._effective_line = prefix.count(b"\n") + 1
        return self._effective_line

    @property
    def pins(self) -> list[Pin]:
        """The pins in force (SPEC §19): no replace drops them, only an unpin."""
        return effective_pins(self.pin_ops)

    @property
    def partial(self) -> bool:
        """True when the fast path skipped part of the log (see the module docstring)."""
        return self.skipped is not None

    @property
    def session_id(self) -> str:
        return self.path.parent.name

    @property
    def incomplete(self) -> bool:
        return bool(self.bad_lines)

    @property
    def repaired(self) -> bool:
        """True when the effective state differs from a plain replay of the physical log."""
        return self.torn_replace or self.truncated_tool_calls or self.orphan_results > 0

    def problems(self) -> list[str]:
        """What a user should be told, one short phrase each."""
        out = []
        if self.bad_lines:
            shown = ", ".join(map(str, self.bad_lines[:10]))
            more = f" (+{len(self.bad_lines) - 10} more)" if len(self.bad_lines) > 10 else ""
            noun = "line" if len(self.bad_lines) == 1 else "lines"
            out.append(f"recovery incomplete: {noun} {shown}{more} unreadable")
        if self.torn_tail:
            out.append("a torn line from a crash was skipped")
        if self.torn_replace:
            out.append("an unfinished replace was discarded (the state before it stands)")
        if self.truncated_tool_calls:
            out.append("tool calls without results were cut")
        if self.orphan_results:
            out.append(f"{self.orphan_results} tool results without their call were dropped")
        for shown in self.bad_images[:10]:
            out.append(f"image {shown}: a text note stands in for it")
        if len(self.bad_images) > 10:
            out.append(f"{len(self.bad_images) - 10} more images unusable")
        return out


CHUNK = 1 << 20  # what a streamed replay reads at a time


@dataclass
class _Pending:
    replace_id: str
    count: int
    line: int
    offset: int
    messages: list[Any] = field(default_factory=list)
    spots: array[int] = field(default_factory=lambda: array("q"))


Reread = Callable[[int, int], bytes]


def replay(data: bytes, r: LoadResult, *, base: int = 0, start: int = 0) -> list[int]:
    """Replay ``data[start:]`` (the log from byte ``base`` on) into ``r``; see ``replay_stream``."""
    view = memoryview(data)

    def chunks() -> Iterator[bytes]:
        if start == 0 and len(data) <= CHUNK:
            yield data
            return
        for at in range(start, len(data), CHUNK):
            yield bytes(view[at : at + CHUNK])

    def reread(offset: int, size: int) -> bytes:
        at = start + offset - base
        return data[at : at + size]

    return replay_stream(chunks(), r, reread, base=base)


def replay_file(fd: int, r: LoadResult, *, held_before: int = 0) -> list[int]:
    """Replay the whole file ``fd`` (read from its start, ``CHUNK`` bytes at a time) into ``r``; sets its sizes.

    ``held_before``: see ``replay_stream``.
    """

    def chunks() -> Iterator[bytes]:
        while piece := os.pread(fd, CHUNK, r.bytes):
            r.bytes += len(piece)
            yield piece

    r.bytes = 0
    commits = replay_stream(
        chunks(), r, lambda offset, size: os.pread(fd, size, offset), held_before=held_before
    )
    r.bytes_read = r.bytes
    return commits


def _batches(chunks: Iterable[bytes]) -> Iterator[tuple[list[bytes], bool]]:
    """The lines of the stream, a chunk's worth at a time; ``True`` with the unterminated tail."""
    carry: list[bytes] = []  # the pieces of a line not ended yet
    for chunk in chunks:
        lines = chunk.split(b"\n")
        if len(lines) == 1:
            carry.append(chunk)
            continue
        if carry:
            carry.append(lines[0])
            lines[0] = b"".join(carry)
        tail = lines.pop()
        carry = [tail] if tail else []
        yield lines, False
    if carry:
        yield [b"".join(carry)], True


def replay_stream(
    chunks: Iterable[bytes], r: LoadResult, reread: Reread, *, base: int = 0, held_before: int = 0
) -> list[int]:
    """Replay a log read as ``chunks`` (from byte ``base`` on) into ``r``; the offsets of committed replaces.

    Streamed: only the effective state is kept, never the log. A line is held as its decoded
    entry while it is part of the state; a replace drops what it replaces once it commits,
    and while it is pending the state it would replace is held as the offsets of its lines
    (``reread`` reads one back, should the replace not complete). Line numbers in ``r``
    count from ``base``; offsets are absolute. The loop keeps its figures in local
    variables (this is the full replay's hot path).

    ``held_before`` is a hint: the offset of a replace marker the caller expects to be the
    last. A message line before it is checked and counted as any other, then held by offset
    only, since a later replace will drop it; should it be in the final state after all (the
    hint was wrong, or that replace never completed), it is read back like a line held
    during a pending replace. Keeping fewer decoded entries makes a long log's replay
    ~17 % cheaper in CPU (the bench's 200 MB log).
    """
    state: list[MessageEntry | None] = []  # None: held as its line's offset and size in ``spots``
    spots = array("q")  # offset, size of each line of ``state``
    pending: _Pending | None = None
    anchor: tuple[int, int] | None = None
    last_bad: int | None = None
    heads: dict[int, bytes] = {}  # the start of each unreadable line (a torn-note fragment?)
    commits: list[int] = []  # offsets of committed replace markers
    bad = r.bad_lines
    first_ts = last_ts = first_model = last_model = None
    title = ""
    physical = replaces = 0
    index = -1
    pos = base
    loads, JSONDecodeError = orjson.loads, orjson.JSONDecodeError  # noqa: N806 - a local alias
    parse, plainly, message_entry = parse_entry, plainly_valid, MessageEntry  # local aliases: the hot path
    head_size = len(_TORN_NOTE_HEAD) + 1

    for lines, unterminated in _batches(chunks):
        for raw in lines:
            index += 1
            at = pos
            pos += len(raw) + 1
            if not raw or raw.isspace():  # isspace: no copy, unlike strip
                continue
            try:
                obj = loads(raw)
            except JSONDecodeError:
                obj = None
            if type(obj) is not dict:
                if unterminated:
                    r.torn_tail = True
                else:
                    bad.append(index + 1)
                    heads[index] = raw[:head_size]
                    last_bad = index + 1
                continue

            kind = obj.get("type")
            if last_bad is not None:
                if kind == "note" and obj.get("kind") == TORN_NOTE and last_bad == index:
                    # The writer marked the line before as a crash's torn tail, now mended.
                    bad.pop()
                    r.torn_tail = True
                    # A crash during an earlier mend left part of its note: that torn line mended
                    # the one before it too (recovered, not incomplete).
                    frag = index - 1  # the line just mended (0-based)
                    while _torn_note_part(heads.get(frag, b"")) and bad and bad[-1] == frag:
                        bad.pop()  # the line before the fragment (1-based frag)
                        frag -= 1
                last_bad = None

            if pending is not None and (kind != "message" or obj.get("replace_id") != pending.replace_id):
                r.torn_replace, pending = True, None

            ts = obj.get("ts")
            if isinstance(ts, (int, float)):
                if first_ts is None:
                    first_ts = ts
                last_ts = ts

            # parse_entry's own first step for a message, inlined: most lines are plainly valid ones.
            entry = message_entry(obj) if kind == "message" and plainly(obj) else parse(obj)
            if entry is None:
                bad.append(index + 1)  # a message or replace marker that is not a valid one
                heads[index] = raw[:head_size]
                continue
            cls = type(entry)
            if cls is MessageEntry:
                entry = cast(MessageEntry, entry)  # what `cls is` says (mypy does not narrow by it)
                # A plainly valid entry becomes a Message only if it is in the final state.
                physical += 1
                model = obj.get("model")
                if model and isinstance(model, str):
                    first_model = first_model or model
                    last_model = model
                if not title:
                    title = entry.title()
                if at < held_before:
                    entry = None
                rid = obj.get("replace_id")
                if rid is None:
                    state.append(entry)
                    spots.append(at)
                    spots.append(len(raw))
                elif pending is not None and rid == pending.replace_id:
                    pending.messages.append(entry)
                    pending.spots.append(at)
                    pending.spots.append(len(raw))
                    if len(pending.messages) == pending.count:
                        r._effective_line = pending.line
                        commits.append(pending.offset)
                        state, spots, pending, anchor = pending.messages, pending.spots, None, None
                        replaces += 1
                # else: a snapshot entry of a replace already discarded; ignore it.
            elif cls is UsageEntry:
                anchor = entry.anchor or anchor  # type: ignore[union-attr]
                model = entry.model  # type: ignore[union-attr]
                if model:
                    first_model = first_model or model
                    last_model = model
            elif cls is ReplaceEntry:
                if entry.count == 0:  # type: ignore[union-attr]
                    state, spots, anchor = [], array("q"), None
                    r._effective_line = index + 1
                    commits.append(at)
                    replaces += 1
                else:
                    pending = _Pending(entry.replace_id, entry.count, index + 1, at)  # type: ignore[union-attr]
                    # Until it commits, the state it would replace is held by offset only.
                    state = [None] * len(state)
            else:
                _collect(r, entry)

    if pending is not None:
        r.torn_replace = True
    r.messages = _messages(state, spots, reread)
    r.usage_anchor = anchor
    r.first_ts, r.last_ts, r.first_model, r.last_model = first_ts, last_ts, first_model, last_model
    r.title, r.physical_messages, r.replaces = title, physical, replaces
    if commits:
        r.effective_from_byte = commits[-1]
    return commits


def _messages(state: list[MessageEntry | None], spots: array[int], reread: Reread) -> list[Message]:
    """The state's messages, each entry dropped as its message is made (a line held by offset is read back)."""
    out = []
    for i, entry in enumerate(state):
        if entry is None:
            obj = orjson.loads(reread(spots[2 * i], spots[2 * i + 1]))
            parsed = parse_entry(obj)
            assert isinstance(parsed, MessageEntry)  # it was a valid message when first read
            entry = parsed
        state[i] = None
        out.append(entry.message)
    return out


def _collect(r: LoadResult, entry: Any) -> None:
    cls = type(entry)
    if cls is SpillEntry:
        r.spills.append(entry)
    elif cls is CompactEntry:
        r.compacts.append(entry)
    elif cls is RolloverEntry:
        r.rollovers.append(entry)
    elif cls is NoteEntry:
        r.notes.append(entry)
    elif cls is OtherEntry and entry.raw.get("type") in PIN_TYPES:
        r.pin_ops.append(entry.raw)
    # Unknown types (OtherEntry) are ignored: forward compatibility.


_TORN_NOTE_HEAD = b'{"v":1,"type":"note","kind":"' + TORN_NOTE.encode() + b'"'


def _torn_note_part(raw: bytes) -> bool:
    """True for what a crash leaves of the writer's torn-line note: a prefix of it, or it cut short."""
    return bool(raw) and (raw.startswith(_TORN_NOTE_HEAD) or _TORN_NOTE_HEAD.startswith(raw))


def settle(r: LoadResult) -> None:
    """Make the replayed state protocol-valid without inventing results."""
    msgs = r.messages
    # A trailing assistant message whose calls are not all answered: the crash (or an
    # interrupt) came before its tools finished. Cut it and its partial results.
    i = len(msgs)
    while i > 0 and msgs[i - 1].tool_result is not None:
        i -= 1
    if i > 0 and msgs[i - 1].role == "assistant" and msgs[i - 1].tool_calls:
        answered = {m.tool_result.call_id for m in msgs[i:] if m.tool_result is not None}
        if any(c.id not in answered for c in msgs[i - 1].tool_calls):
            msgs = msgs[: i - 1]
            r.truncated_tool_calls = True
    if pairing_problems(msgs):
        repaired = repair_pairing(msgs)
        results_before = sum(1 for m in msgs if m.tool_result is not None)
        calls_before = sum(len(m.tool_calls) for m in msgs)
        r.orphan_results += results_before - sum(1 for m in repaired if m.tool_result is not None)
        calls_after = sum(len(m.tool_calls) for m in repaired)
        if calls_after < calls_before:
            r.truncated_tool_calls = True
        msgs = repaired
    if r.usage_anchor is not None and r.usage_anchor[1] > len(msgs):
        r.usage_anchor = None
    r.messages = upgrade_legacy(msgs)
    _check_images(r)


def _check_images(r: LoadResult) -> None:
    """Image parts whose file is missing or altered become text notes, reported (issue-14).

    Part of ``settle``, so the fast path and the full replay agree on it.
    """
    if not any(m.parts for m in r.messages):
        return
    from . import images  # the store reads files: only sessions with images pay for it

    folder = r.path.parent
    out: list[Message] = []
    for m in r.messages:
        if not m.parts:
            out.append(m)
            continue
        kept, notes = [], []
        for part in m.parts:
            why = images.problem(folder, part)
            if why is None:
                kept.append(part)
            else:
                r.bad_images.append(f"{part.path} {why}")
                notes.append(part.note(why))
        if notes:
            m = _with_note(m, "\n".join(notes), tuple(kept))
        out.append(m)
    r.messages = out


def _with_note(m: Message, note: str, parts: tuple[Any, ...]) -> Message:
    if m.tool_result is not None:
        result = m.tool_result.model_copy(update={"content": f"{m.tool_result.content}\n{note}"})
        return m.model_copy(update={"tool_result": result, "parts": parts})
    return m.model_copy(update={"content": f"{m.content}\n{note}", "parts": parts})
