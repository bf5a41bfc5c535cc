"""The request at a step, read back from the log: what the model received for response N.

A *step* is one model response the runner logged: its ``usage`` entry, numbered from 1 in
file order — the points of the timeline's tokens-per-step curve, in order (a request the
provider refused, or one interrupted before its answer, logs no usage and is no step). The
request of step N is the effective conversation just before that response's answer was
appended (the runner appends the answer, then logs its usage), so it is the replayed state
at the usage line minus its last message.

Cost: what the request's own data costs, not the session's length (issue 47). The step is
found in the session's timeline (``step_index``: ``timeline.idx`` plus the bytes written
since), and the replay core (``replay.replay_stream``) reads only from the nearest replace at
or before it that committed — a replace drops everything before it — to the step. The
replaces, compactions, rollovers, spills and pins before the step are read by offset (a few
lines each), and a request's rows are made only when shown (``Rows``). The system prompt and
the tool schemas are not in the log: a ``StepRequest`` does not pretend to know them. No
IPython here; nothing is written.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, overload

from .. import safeio
from ..context.estimate import estimate_tokens, message_bytes, tokens_for_bytes
from ..errors import SessionError
from ..messages import Message
from .entries import CompactEntry
from .loader import log_path
from .replay import CHUNK, LoadResult, replay_stream, settle
from .step_fast import LogMessages, plan
from .step_figures import figures_for
from .step_index import Marker, Step, StepIndex, StepRangeError, step_index
from .step_origins import Origins

__all__ = [
    "Marker",
    "Row",
    "Rows",
    "Step",
    "StepDiff",
    "StepIndex",
    "StepRangeError",
    "StepRequest",
    "diff_steps",
    "part_of",
    "request_at",
    "scan",
]


@dataclass(frozen=True)
class Row:
    index: int  # 1-based
    message: Message
    part: str  # user text, notebook activity + user text, assistant text, tool call, tool result, spill preview, …
    origin: str | None  # the replace reason that brought this message in (compact, rollover, fork, …)
    tokens: int


class Rows(Sequence[Row]):
    """A request's rows, each made when it is read: a view of thousands of messages shows only
    its first and last hundred (``widgets.step_view``), and only those are built."""

    def __init__(self, messages: Sequence[Message], origins: Origins) -> None:
        self._messages = messages
        self._origins = origins
        self._made: dict[int, Row] = {}

    def __len__(self) -> int:
        return len(self._messages)

    @overload
    def __getitem__(self, i: int) -> Row: ...
    @overload
    def __getitem__(self, i: slice) -> list[Row]: ...
    def __getitem__(self, i: int | slice) -> Row | list[Row]:
        if isinstance(i, slice):
            ks = range(len(self))[i]
            # The messages at once: read from the log, they cost one open, not one each.
            messages = self._messages[i] if any(k not in self._made for k in ks) else [None] * len(ks)
            return [self._row(k, m) for k, m in zip(ks, messages, strict=True)]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._row(i)

    def __iter__(self) -> Iterator[Row]:
        for lo in range(0, len(self), 1024):
            yield from self[lo : lo + 1024]

    def _row(self, i: int, m: Message | None = None) -> Row:
        row = self._made.get(i)
        if row is None:
            m = m if m is not None else self._messages[i]
            # Numbered as people count: %context pin --message N.
            row = Row(i + 1, m, part_of(m), self._origins.get(m.id), tokens_for_bytes(message_bytes(m)))
            self._made[i] = row
        return row


@dataclass
class StepRequest:
    session_id: str
    step: Step
    steps: int  # how many the session has
    messages: Sequence[Message]  # read by offset when asked for, on a request told from the figures
    rows: Rows
    replaces: list[Marker]  # committed before this request, oldest first
    spills: int
    compactions: list[CompactEntry]  # ok or not
    rollovers: int  # committed rollovers
    pins: list[dict[str, Any]]
    problems: list[str]
    replayed_from: int = 0  # the byte the replay started at (the nearest committed replace, or 0)

    @cached_property
    def tokens(self) -> int:
        return estimate_tokens(self.messages)


# A request of at least this many messages is told from the step figures when it can be (the
# first one asked of a log without kept figures builds them: a pass over its messages).
FIGURES_FROM = 1_000

_KEPT: OrderedDict[Path, tuple[tuple[int, int, int], StepIndex]] = OrderedDict()
KEPT = 2  # step indexes kept, the latest asked for


def scan(path: str | Path) -> StepIndex:
    """The step index of a log: its usage entries, replace markers and the rest, by entry,
    from the session's timeline (``step_index``).

    The index of a log that has not changed since it was last asked for (same inode, size
    and modification time: the log is append-only) is kept and given again, with the
    markers and entries it has read since: ``%context --at`` step after step reads each of
    them once, as the scrubber does with its own index.
    """
    file = log_path(path)
    try:
        st = os.stat(file)
    except OSError:
        return step_index(file)  # which says what is wrong, as a SessionError
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    kept = _KEPT.get(file)
    if kept is not None and kept[0] == key:
        _KEPT.move_to_end(file)
        return kept[1]
    index = step_index(file)
    _KEPT[file] = (key, index)
    _KEPT.move_to_end(file)
    while len(_KEPT) > KEPT:
        _KEPT.popitem(last=False)
    return index


def request_at(path: str | Path, n: int | None = None, *, index: StepIndex | None = None) -> StepRequest:
    """The request of step ``n`` (default: the last), reconstructed from the log."""
    index = index or scan(path)
    step = index.check(len(index.steps) if n is None else n)
    at = index.entry(step.number)
    markers = index.markers(at)
    fast = _told(index, step, markers)
    messages: Sequence[Message]
    if fast is not None:
        r, start, messages, snapshot, units = fast
    else:
        units = 0
        r, start = _replay_from_last_commit(index, markers, step.end)
        state = r.messages
        ids = [m.id for m in state[: start.count]] if start is not None else []
        if state and state[-1].role == "assistant":
            state = state[:-1]  # the answer to this request
        r.messages = state
        settle(r)  # as a load of the log cut here would give it
        messages, snapshot = r.messages, lambda: ids
    before = start.entry if start is not None else 0
    # What the replay did not read: the lines before it that were unreadable, and replaces
    # that never completed (the state before each stood).
    r.bad_lines[:0] = index.bad_lines(before)
    if any(not m.committed for m in markers if m.entry < before):
        r.torn_replace = True
    last = step.number == len(index.steps)
    request = StepRequest(
        session_id=index.path.parent.name,
        step=step,
        steps=len(index.steps),
        messages=messages,
        rows=Rows(messages, Origins(index, markers, start, snapshot)),
        replaces=[m for m in markers if m.committed and (start is None or m.entry <= start.entry)],
        spills=index.count("spill", at),
        compactions=index.compactions(at),
        rollovers=sum(1 for e in index.rollovers(at) if e.phase == "commit"),
        # The last step's pins are those in force now: a pin set since still belongs to it.
        pins=index.pins_at(index.timeline.count if last else at),
        problems=r.problems(),
        replayed_from=start.offset if start is not None else 0,
    )
    if fast is not None:
        request.__dict__["tokens"] = tokens_for_bytes(units)  # estimate_tokens, from the figures' sum
    return request


def _told(
    index: StepIndex, step: Step, markers: list[Marker]
) -> tuple[LoadResult, Marker | None, LogMessages, Callable[[], list[str]], int] | None:
    """The request from the step figures, when it is the plain case (``step_fast``), with its
    messages' estimator units; else None. Nothing in it needed repair: its ``LoadResult``
    holds only what the caller adds from before its replace."""
    if index.request_size(step.number) < FIGURES_FROM:
        return None  # replayed in a few milliseconds: no figures built for it
    fig = figures_for(index)
    found = plan(index, fig, step, markers)
    if found is None or fig is None:
        return None
    messages = LogMessages(index, fig, found.first, found.end)
    count = found.start.count if found.start is not None else 0
    return (
        LoadResult(path=index.path),
        found.start,
        messages,
        lambda: [m.id for m in messages[:count]],
        found.units,
    )


def _replay_from_last_commit(
    index: StepIndex, markers: list[Marker], end: int
) -> tuple[LoadResult, Marker | None]:
    """The replayed state at byte ``end``: from the last replace before it that committed (the
    replay itself confirms it), else from the log's start. The line numbers ``LoadResult``
    reports are the log's."""
    for marker in reversed(markers):
        if not marker.committed:
            continue
        r = LoadResult(path=index.path)
        commits = _replay_range(index.path, marker.offset, end, r)
        if commits and commits[0] == marker.offset:
            r.bad_lines = [n + marker.line - 1 for n in r.bad_lines]
            return r, marker
    r = LoadResult(path=index.path)
    _replay_range(index.path, 0, end, r)
    return r, None


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
    index = scan(path)
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


def _replay_range(file: Path, start: int, end: int, r: LoadResult) -> list[int]:
    """The replay core over the log's bytes [start, end): the offsets of committed replaces."""
    try:
        with os.fdopen(safeio.open_file(file), "rb") as f:
            fd = f.fileno()

            def chunks() -> Iterator[bytes]:
                at = start
                while at < end and (piece := os.pread(fd, min(CHUNK, end - at), at)):
                    at += len(piece)
                    yield piece

            return replay_stream(chunks(), r, lambda offset, size: os.pread(fd, size, offset), base=start)
    except OSError as exc:
        raise SessionError(f"cannot read session log {file}: {exc.strerror or exc}") from exc
