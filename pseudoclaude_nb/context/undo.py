"""Undo a compaction, a rollover commit or a strategy's drop: put back the conversation it
replaced (SPEC §19).

An undo is one more replace, reason ``undo``: the log stays append-only and the undo is as
crash-safe as any replace (one write, one fsync; the loader yields the old state or the
new one). Its snapshot is the effective state right before the undone replace marker —
what the loader yields for the log cut at that byte — exactly (SPEC §19): messages added
after the undone replace are not part of it (they stay in the log and in history search;
``Undone.dropped`` counts them, so the magic says so). Its marker names the
replace it undoes (``undoes``: that marker's ``replace_id``; readers ignore the field,
SPEC §6.1): a second undo walks further back, and an undo is never undone itself.

Finding that state does not replay the log: the markers are found reading backwards (an
``mmap``), each one checked to be committed the way the loader checks it, and only the span
from the committed replace before the undone one up to it is replayed, with the loader's
own code (``replay``, ``settle``).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .. import safeio
from ..errors import SessionError, SessionWriteError
from ..messages import Message
from ..session.entries import MessageEntry, ReplaceEntry, parse_entry, plainly_valid
from ..session.replay import LoadResult, replay, settle
from .provider_compaction import undone

if TYPE_CHECKING:
    from .state import SharedState

UNDOABLE = ("compact", "rollover", "drop")
# How the writer starts every replace marker line (``entries.replace_entry``, encoded compactly).
MARKER_START = b'{"v":1,"type":"replace"'


@dataclass(frozen=True)
class Marker:
    """A committed replace marker: where it starts, what it says, the ids of its snapshot."""

    offset: int
    entry: ReplaceEntry
    snapshot: list[str]

    @property
    def undoes(self) -> str | None:
        value = self.entry.raw.get("undoes") if self.entry.reason == "undo" else None
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Undone:
    """What ``undo`` did: which replace (``reason``, at ``ts``) it undid, and the estimate."""

    reason: str  # compact | rollover | drop
    ts: float
    before_tokens: int
    after_tokens: int
    restored: int  # messages of the state before it
    dropped: int  # messages added after it, not part of that state


def undo(state: SharedState) -> Undone:
    """Replace the conversation by the state before the last compaction, rollover or drop not yet undone."""
    writer = state.writer
    if writer is None:
        raise SessionError("this conversation has no session log, so there is nothing to undo")
    if writer.failed is not None:
        raise SessionError(
            "the session log could not be written and is behind the conversation; run %agent once "
            "it can be written again (free disk space), then undo"
        )
    found = target_in(writer.path)
    if found is None:
        raise SessionError(
            "nothing to undo: this session has no compaction, rollover or drop that is not undone yet"
        )
    target, earlier = found
    current = state.conversation.messages()
    # A server compaction's block stays on the answer that carried it: dropped, or the
    # provider would drop the restored messages again (``provider_compaction.undone``).
    new = undone(state_before(writer.path, target, earlier))
    dropped = len(_since(current, target.snapshot))
    before = state.estimate()

    def failed(why: str) -> Exception:
        return SessionWriteError(
            f"the undo was not applied: {why}. The conversation is as it was; free disk space, "
            "then run %compact --undo again"
        )

    after = state.replaced("undo", current, new, failed=failed, undoes=target.entry.replace_id)
    state.sync_notes()  # the reminder and fallback belong to a window: the restored one's
    ts = target.entry.raw.get("ts")
    return Undone(
        target.entry.reason,
        float(ts) if isinstance(ts, (int, float)) else 0.0,
        before,
        after,
        len(new),
        dropped,
    )


def target_in(log: Path) -> tuple[Marker, Marker | None] | None:
    """The replace an undo undoes now, and the committed replace before it (None: none)."""
    with _mapped(log) as buf:
        undone: set[str] = set()
        target: Marker | None = None
        for marker in _markers_backwards(buf):
            if target is not None:
                return target, marker
            if marker.undoes is not None:
                undone.add(marker.undoes)
            elif marker.entry.reason in UNDOABLE and marker.entry.replace_id not in undone:
                target = marker
        return (target, None) if target is not None else None


def state_before(log: Path, target: Marker, earlier: Marker | None) -> list[Message]:
    """The loader's effective state for the log cut right before ``target``'s marker."""
    start = earlier.offset if earlier is not None else 0
    with _mapped(log) as buf:
        data = bytes(buf[start : target.offset])
    result = LoadResult(path=log)
    replay(data, result, base=start)
    settle(result)
    return result.messages


def _since(current: list[Message], snapshot: list[str]) -> list[Message]:
    """The messages appended after the snapshot's last message (none if it is gone)."""
    if not snapshot:
        return []
    last = snapshot[-1]
    for i in range(len(current) - 1, -1, -1):
        if current[i].id == last:
            return current[i + 1 :]
    return []


class _mapped:  # noqa: N801 - used as a context manager, like open()
    """The log mapped read-only (an empty log maps to ``b""``)."""

    def __init__(self, log: Path) -> None:
        self.log = log

    def __enter__(self) -> mmap.mmap | bytes:
        fd = safeio.open_file(self.log)
        try:
            size = os.fstat(fd).st_size
            self.buf: mmap.mmap | bytes = mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else b""
        finally:
            os.close(fd)
        return self.buf

    def __exit__(self, *exc: object) -> None:
        if isinstance(self.buf, mmap.mmap):
            self.buf.close()


def _markers_backwards(buf: mmap.mmap | bytes) -> Iterator[Marker]:
    """The committed replace markers of the log, newest first."""
    end = len(buf)
    while (at := buf.rfind(MARKER_START, 0, end)) >= 0:
        end = at
        if at > 0 and buf[at - 1 : at] != b"\n":
            continue  # the text inside some other line, not a line of its own
        marker = _committed(buf, at)
        if marker is not None:
            yield marker


def _committed(buf: mmap.mmap | bytes, at: int) -> Marker | None:
    """The marker at ``at`` if its snapshot is complete, read by the loader's rules (``replay``).

    An unreadable line inside the snapshot is skipped; any other entry, or the end of the
    log, before ``count`` tagged messages leaves the replace uncommitted.
    """
    entry = _entry_at(buf, at)
    if not isinstance(entry, ReplaceEntry):
        return None
    ids: list[str] = []
    pos = buf.find(b"\n", at) + 1 or len(buf)  # an unterminated marker line may still be whole
    while len(ids) < entry.count:
        if pos >= len(buf):
            return None
        nl = buf.find(b"\n", pos)
        stop = nl if nl >= 0 else len(buf)
        raw, pos = bytes(buf[pos:stop]), stop + 1
        obj = _loads(raw)
        if obj is None:
            continue  # blank or unreadable: skipped, the snapshot stays pending
        if obj.get("type") != "message" or obj.get("replace_id") != entry.replace_id:
            return None
        # A message entry's id is its message's id; an invalid message is skipped, as replay does.
        if plainly_valid(obj) or isinstance(parse_entry(obj), MessageEntry):
            ids.append(str(obj.get("id")))
    return Marker(at, entry, ids)


def _entry_at(buf: mmap.mmap | bytes, at: int) -> object:
    nl = buf.find(b"\n", at)
    obj = _loads(bytes(buf[at : nl if nl >= 0 else len(buf)]))
    return parse_entry(obj) if obj is not None else None


def _loads(raw: bytes) -> dict[str, Any] | None:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return obj if type(obj) is dict else None
