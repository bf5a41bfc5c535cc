"""The request at a step, read back from the log: what the model received for response N.

A *step* is one model response the runner logged: its ``usage`` entry, numbered from 1 in
file order — the points of the timeline's tokens-per-step curve, in order (a request the
provider refused, or one interrupted before its answer, logs no usage and is no step). The request of step N is the effective conversation just before that
response's answer was appended (the runner appends the answer, then logs its usage), so it
is the replayed state at the usage line minus its last message.

Cost: one scan of the log (each line decoded by ``entries.parse_line``, the one parser)
for the step index, origins and pins, then the replay core (``replay.replay_stream``) over
the prefix up to step N — linear in the prefix, never once per step. The system prompt and
the tool schemas are not in the log: a ``StepRequest`` does not pretend to know them.
No IPython here; nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import safeio
from ..context.estimate import estimate_tokens, message_bytes, tokens_for_bytes
from ..errors import SessionError
from ..messages import Message
from .entries import (
    PIN_TYPES,
    CompactEntry,
    MessageEntry,
    Pin,
    ReplaceEntry,
    UsageEntry,
    apply_pin,
    parse_line,
)
from .loader import log_path
from .replay import CHUNK, LoadResult, replay_stream, settle

_MARKER_KEYS = frozenset(("v", "type", "id", "ts", "reason", "replace_id", "count"))


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
    """A replace marker as the scan saw it (committed or not: ``replay`` decides)."""

    offset: int
    line: int
    reason: str
    replace_id: str
    fields: dict[str, Any]  # the marker's other fields (a fork names its source), for display


@dataclass
class StepIndex:
    path: Path
    steps: list[Step] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    pins: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # (offset, pin/unpin entry)
    origins: dict[str, str] = field(default_factory=dict)  # message id -> the replace that brought it
    size: int = 0

    def check(self, n: int) -> Step:
        """Step ``n``, or a ``StepRangeError`` naming the valid range."""
        if not self.steps:
            raise StepRangeError(
                f"session {self.path.parent.name} has no steps yet (no model response is logged)"
            )
        if not 1 <= n <= len(self.steps):
            raise StepRangeError(
                f"step {n} is out of range: session {self.path.parent.name} has steps 1–{len(self.steps)}"
            )
        return self.steps[n - 1]

    def pins_at(self, end: int) -> list[dict[str, Any]]:
        """The pin entries in force at byte ``end`` (``entries.apply_pin``'s reading), as logged."""
        pins: dict[str, Pin] = {}
        logged: dict[str, dict[str, Any]] = {}
        for offset, entry in self.pins:
            if offset >= end:
                break
            apply_pin(pins, entry)
            if entry["type"] == "pin":
                logged.setdefault(entry["id"], entry)
        return [logged[pid] for pid in pins]


@dataclass(frozen=True)
class Row:
    index: int  # 1-based
    message: Message
    part: str  # user text, notebook activity + user text, assistant text, tool call, tool result, spill preview, …
    origin: str | None  # the replace reason that brought this message in (compact, rollover, fork, …)
    tokens: int


@dataclass
class StepRequest:
    session_id: str
    step: Step
    steps: int  # how many the session has
    messages: list[Message]
    rows: list[Row]
    replaces: list[Marker]  # committed before this request, oldest first
    spills: int
    compactions: list[CompactEntry]  # ok or not
    rollovers: int  # committed rollovers
    pins: list[dict[str, Any]]
    problems: list[str]

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.messages)


def scan(path: str | Path, *, origins_through: int | None = None) -> StepIndex:
    """The step index of a log: usage entries, replace markers, pin entries, in one pass.

    It also notes which replace first brought each message (``StepIndex.origins``), up to
    step ``origins_through`` (default: all): that costs a set of the ids seen, so it stops
    where it is no longer needed.
    """
    file = log_path(path)
    index = StepIndex(path=file)
    reasons: dict[str, str] = {}
    plain: set[str] = set()
    try:
        with os.fdopen(safeio.open_file(file), "rb") as f:
            for lineno, at, raw in _lines(f.fileno()):
                entry = parse_line(raw)
                if isinstance(entry, UsageEntry):
                    tokens = entry.anchor[0] if entry.anchor else 0
                    end = at + len(raw) + 1
                    index.steps.append(Step(len(index.steps) + 1, lineno, end, tokens, entry.model))
                elif isinstance(entry, ReplaceEntry):
                    extra = {k: v for k, v in entry.raw.items() if k not in _MARKER_KEYS}
                    index.markers.append(Marker(at, lineno, entry.reason, entry.replace_id, extra))
                    reasons[entry.replace_id] = entry.reason
                elif isinstance(entry, MessageEntry):
                    if origins_through is not None and len(index.steps) >= origins_through:
                        continue
                    mid, rid = entry.id, entry.replace_id
                    if rid is None:
                        plain.add(mid)
                    elif mid not in plain and mid not in index.origins and rid in reasons:
                        index.origins[mid] = reasons[rid]
                elif entry is not None and _pin_entry(entry.raw):
                    index.pins.append((at, entry.raw))
            index.size = os.fstat(f.fileno()).st_size
    except OSError as exc:
        raise SessionError(f"cannot read session log {file}: {exc.strerror or exc}") from exc
    return index


def request_at(path: str | Path, n: int | None = None, *, index: StepIndex | None = None) -> StepRequest:
    """The request of step ``n`` (default: the last), reconstructed from the log."""
    index = index or scan(path, origins_through=n)
    step = index.check(len(index.steps) if n is None else n)
    r = LoadResult(path=index.path)
    commits = set(_replay_until(index.path, step.end, r))
    state = r.messages
    if state and state[-1].role == "assistant":
        state = state[:-1]  # the answer to this request
    r.messages = state
    settle(r)  # as a load of the log cut here would give it
    replaces = [m for m in index.markers if m.offset in commits]
    rows = [
        Row(i, m, part_of(m), index.origins.get(m.id), tokens_for_bytes(message_bytes(m)))
        for i, m in enumerate(r.messages, 1)  # numbered as people count: %context pin --message N
    ]
    return StepRequest(
        session_id=index.path.parent.name,
        step=step,
        steps=len(index.steps),
        messages=r.messages,
        rows=rows,
        replaces=replaces,
        spills=len(r.spills),
        compactions=list(r.compacts),
        rollovers=sum(1 for e in r.rollovers if e.phase == "commit"),
        # The last step's pins are those in force now: a pin set since still belongs to it.
        pins=index.pins_at(index.size if step.number == len(index.steps) else step.end),
        problems=r.problems(),
    )


def _pin_entry(raw: dict[str, Any]) -> bool:
    """A pin or unpin entry (read by ``entries.apply_pin``; kept as logged, to be copied)."""
    return raw.get("type") in PIN_TYPES and isinstance(raw.get("id"), str)


def part_of(m: Message) -> str:
    """What kind of message this is, from its fields (never its text)."""
    if m.tool_result is not None:
        if m.is_spill_preview:
            return "spill preview"
        return "tool error" if m.tool_result.is_error else "tool result"
    if m.role == "assistant":
        if m.tool_calls:
            names = ", ".join(c.name for c in m.tool_calls)
            return f"assistant text + tool call ({names})" if m.content else f"tool call ({names})"
        return "assistant text"
    if m.host:
        return f"host note ({m.host})"
    if m.notebook is not None:
        return "notebook activity + user text"
    return "user text"


# --- the diff of two steps ---------------------------------------------------------------------


@dataclass
class StepDiff:
    a: StepRequest
    b: StepRequest
    removed: list[Row]
    added: list[Row]
    cut: list[tuple[Row, Row]]  # (at A, at B): the same tool result, now a spill preview
    changed: list[tuple[Row, Row]]  # the same id, other content
    replaces: list[Marker]  # committed after A's request, up to B's
    compactions: list[CompactEntry]  # compact entries logged between


def diff_steps(path: str | Path, a: int, b: int) -> StepDiff:
    """What changed between the requests of steps ``a`` and ``b``, message by message (by id)."""
    index = scan(path, origins_through=max(a, b))
    index.check(a)
    index.check(b)
    ra, rb = request_at(path, a, index=index), request_at(path, b, index=index)
    ids_a = {row.message.id: row for row in ra.rows}
    ids_b = {row.message.id: row for row in rb.rows}
    cut, changed = [], []
    for mid, row in ids_b.items():
        before = ids_a.get(mid)
        if before is None or before.message.to_dict() == row.message.to_dict():
            continue
        if row.message.is_spill_preview and not before.message.is_spill_preview:
            cut.append((before, row))
        else:
            changed.append((before, row))
    seen = {m.offset for m in ra.replaces}
    return StepDiff(
        a=ra,
        b=rb,
        removed=[row for mid, row in ids_a.items() if mid not in ids_b],
        added=[row for mid, row in ids_b.items() if mid not in ids_a],
        cut=cut,
        changed=changed,
        replaces=[m for m in rb.replaces if m.offset not in seen],
        compactions=rb.compactions[len(ra.compactions) :] if b > a else [],
    )


# --- reading ---------------------------------------------------------------------------------


def _replay_until(file: Path, end: int, r: LoadResult) -> list[int]:
    """The replay core over the log's first ``end`` bytes: the offsets of committed replaces."""
    try:
        with os.fdopen(safeio.open_file(file), "rb") as f:
            fd = f.fileno()

            def chunks() -> Iterator[bytes]:
                at = 0
                while at < end and (piece := os.pread(fd, min(CHUNK, end - at), at)):
                    at += len(piece)
                    yield piece

            return replay_stream(chunks(), r, lambda offset, size: os.pread(fd, size, offset))
    except OSError as exc:
        raise SessionError(f"cannot read session log {file}: {exc.strerror or exc}") from exc


def _lines(fd: int) -> Iterator[tuple[int, int, bytes]]:
    """(1-based line, offset, bytes without the newline) of each line, read a chunk at a time."""
    at = 0
    lineno = 0
    carry = b""
    while piece := os.pread(fd, CHUNK, at + len(carry)):
        data = carry + piece
        start = 0
        while (nl := data.find(b"\n", start)) >= 0:
            lineno += 1
            yield lineno, at + start, data[start:nl]
            start = nl + 1
        at += start
        carry = data[start:]
    if carry:
        yield lineno + 1, at, carry
