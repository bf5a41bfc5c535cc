"""The incremental replay behind ``meta.json``: what the catalog says of a log, kept current.

A sidecar describes the whole log (title, first and last model, physical and effective
message counts, first and last timestamp, status) exactly as a full replay
(``loader.load_session(path, full=True)``) would, but it is built by reading each byte of
the log once: the sidecar stores the replay's *state* and the byte offset it consumed, and
bringing it up to date reads only the bytes after that offset (``Replay.feed``).

The state is small, whatever the log's length: the effective conversation is kept as the
count of messages that survive the loader's repair (``loader._settle``) plus the one group
that can still change — the trailing assistant message with tool calls and the results
after it. The repair is local to such groups (a result pairs only with the calls directly
before it), so the count of a closed group never changes again.

Entries are parsed with the loader's own readers (``entries.plainly_valid``, ``valid_message``,
``MessageEntry.title``, ``replay._torn_note_part``), so a line counts here exactly when it counts there;
``tests/test_sidecar.py`` checks the equality over random logs, crashes and restarts.

The state also holds the pins in force (SPEC §19): a pin outlives every replace, so a resume
from the last replace (``fast_load``) takes those set before it from here (``stored_pins``)
instead of reading the log before it.

A workspace is untrusted (SPEC §19): a sidecar read from disk is used only when every value
is one a replay of its log could give (``plausible``), and a log's time more than a day
ahead counts as its file's (``dated``); anything else is rebuilt from the log.
"""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path
from typing import Any

import orjson

from .. import safeio
from ..messages import Message
from ..workspace import LOG_NAME, META_NAME
from .entries import PIN_TYPES, TORN_NOTE, MessageEntry, Pin, apply_pin, plainly_valid, valid_message
from .sidecar_meta import (
    CLOCK_SKEW,
    HEAD_BYTES,
    META_LIMIT,
    META_VERSION,
    MIN_MESSAGE_BYTES,
    TITLE_MAX,
    dated,
    head_digest,
    is_current,
    plausible,
    read_meta,
)

STATE_VERSION = 1
# The checks of a sidecar as read (its own module, light to import): used here and re-exported.
__all__ = [
    "CLOCK_SKEW",
    "HEAD_BYTES",
    "META_LIMIT",
    "META_VERSION",
    "MIN_MESSAGE_BYTES",
    "TITLE_MAX",
    "Replay",
    "catch_up",
    "dated",
    "head_digest",
    "is_current",
    "new_state",
    "plausible",
    "problems",
    "read_meta",
    "refresh",
    "stored_pins",
]
READ_CHUNK = 8 << 20  # a catch-up streams the log in pieces: memory stays bounded


def _torn(raw: bytes) -> bool:
    """``replay._torn_note_part``: the loader's reading of a bad line, imported only when a line is
    bad (a writer's sidecar, on a new session's way to its first request, reads none)."""
    from .replay import _torn_note_part

    return _torn_note_part(raw)


def _acc() -> dict[str, Any]:
    # settled: surviving messages of closed groups; orph: results dropped; trunc: calls cut;
    # group: the trailing assistant message with calls, [content?, call ids, result call ids].
    return {"settled": 0, "orph": 0, "trunc": False, "group": None}


def _shape(msg: Any) -> tuple[bool, Any, str, bool, list[str]]:
    """(is a result, its call id, role, has content, call ids) of a Message or a plainly valid entry."""
    if type(msg) is dict:
        result = msg.get("tool_result")
        calls = [c["id"] for c in msg.get("tool_calls", ())]
        return (
            result is not None,
            result and result["call_id"],
            msg["role"],
            bool(msg.get("content")),
            calls,
        )
    result = msg.tool_result
    return (
        result is not None,
        result.call_id if result is not None else None,
        msg.role,
        bool(msg.content),
        [c.id for c in msg.tool_calls],
    )


def _close(acc: dict[str, Any]) -> None:
    """Settle the open group the way ``repair_pairing`` does (identity when it is valid)."""
    group = acc["group"]
    if group is None:
        return
    content, calls, results = group
    ids, seen = set(calls), set()
    kept = 0
    for cid in results:
        if cid in ids and cid not in seen:
            seen.add(cid)
            kept += 1
    calls_kept = len({c for c in calls if c in seen})
    if calls_kept or content:
        acc["settled"] += 1 + kept
    acc["orph"] += len(results) - kept
    if calls_kept < len(calls):
        acc["trunc"] = True
    acc["group"] = None


def _add(acc: dict[str, Any], msg: Any) -> None:
    is_result, cid, role, content, calls = _shape(msg)
    if is_result:
        if acc["group"] is not None:
            acc["group"][2].append(cid)
        else:
            acc["orph"] += 1  # no call directly before it: an orphan
        return
    _close(acc)
    if role == "assistant" and calls:
        acc["group"] = [content, calls, []]
    else:
        acc["settled"] += 1
        if calls:
            acc["trunc"] = True  # a user message's calls are dropped


def _effective(acc: dict[str, Any]) -> tuple[int, int, bool]:
    """(effective messages, orphan results, truncated calls) as ``loader._settle`` leaves them."""
    acc = copy.deepcopy(acc)
    group = acc["group"]
    if group is not None and any(c not in set(group[2]) for c in group[1]):
        # The trailing assistant message's calls are not all answered: cut with its results.
        acc["group"], acc["trunc"] = None, True
    _close(acc)
    return acc["settled"], acc["orph"], acc["trunc"]


def new_state() -> dict[str, Any]:
    return {
        "v": STATE_VERSION,
        "lines": 0,  # lines consumed (each ended by \n)
        "bad": [],  # [1-based line, is part of a torn-line note] of unreadable lines
        "last_bad": None,
        "torn_tail": False,
        "torn_replace": False,
        "first_ts": None,
        "last_ts": None,
        "first_model": None,
        "last_model": None,
        "title": "",
        "physical": 0,
        "replaces": 0,  # committed; absent from a state stored before it was counted (then unknown)
        "acc": _acc(),
        "pending": None,  # [replace_id, count, got, acc, marker offset]
        "eff": 0,  # where the effective state begins: the offset of the last committed replace
        # The pins in force, [id, ts, text] each: a resume from the last replace reads them
        # here instead of the whole log before it (``fast_load``; no replace drops a pin).
        "pins": [],
    }


class Replay:
    """The loader's replay loop, one line at a time, over a JSON-able state."""

    def __init__(self, state: dict[str, Any] | None = None, offset: int = 0) -> None:
        self.state = state if state is not None else new_state()
        self.offset = offset  # bytes consumed: always the end of a whole line

    def feed(self, data: bytes) -> bytes:
        """Consume the whole lines of ``data`` (the log from ``offset`` on); return the cut rest."""
        end = data.rfind(b"\n") + 1
        if end:
            at = self.offset
            for raw in data[: end - 1].split(b"\n"):
                self._line(raw, last=False, at=at)
                at += len(raw) + 1
            self.offset += end
        return data[end:]

    def meta(self, tail: bytes, *, size: int, mtime: float, session_id: str) -> dict[str, Any]:
        """The sidecar for the log of ``size`` bytes whose unterminated last bytes are ``tail``."""
        saved = self.state
        self.state = s = copy.deepcopy(saved)
        try:
            if tail:
                self._line(tail, last=True, at=self.offset)
            effective, orphans, truncated = _effective(s["acc"])
            torn_replace = s["torn_replace"] or s["pending"] is not None
        finally:
            self.state = saved
        if s["bad"]:
            status = "incomplete"
        elif s["torn_tail"] or torn_replace or truncated or orphans > 0:
            status = "recovered"
        else:
            status = "ok"
        now = time.time()
        return {
            "id": session_id,
            "title": s["title"],
            "first_model": s["first_model"],
            "last_model": s["last_model"],
            "physical_messages": s["physical"],
            "effective_messages": effective,
            "replaces": s.get("replaces"),
            "bytes": size,
            "created": dated(s["first_ts"], mtime, now),
            "last_activity": dated(s["last_ts"], mtime, now),
            "status": status,
            "effective_from": s["eff"],
            "problems": problems(s, torn_replace, truncated, orphans),
        }

    # --- one line: the loop of ``loader._replay`` -------------------------------------------

    def _line(self, raw: bytes, *, last: bool, at: int) -> None:
        s = self.state
        index = s["lines"]
        s["lines"] += 1
        if not raw or raw.isspace():
            return
        try:
            entry = orjson.loads(raw)
        except orjson.JSONDecodeError:
            entry = None
        if type(entry) is not dict:
            if last:
                s["torn_tail"] = True
            else:
                s["bad"].append([index + 1, _torn(raw)])
                s["last_bad"] = index + 1
            return
        kind = entry.get("type")
        if s["last_bad"] is not None:
            if kind == "note" and entry.get("kind") == TORN_NOTE and s["last_bad"] == index:
                flag = s["bad"].pop()[1]
                s["torn_tail"] = True
                frag = index - 1
                while flag and s["bad"] and s["bad"][-1][0] == frag:
                    flag = s["bad"].pop()[1]
                    frag -= 1
            s["last_bad"] = None
        pending = s["pending"]
        if pending is not None and (kind != "message" or entry.get("replace_id") != pending[0]):
            s["torn_replace"], s["pending"] = True, None
            pending = None
        ts = entry.get("ts")
        if isinstance(ts, (int, float)):
            if s["first_ts"] is None:
                s["first_ts"] = ts
            s["last_ts"] = ts
        if kind == "message":
            msg = entry if plainly_valid(entry) else valid_message(entry)
            if msg is None:
                s["bad"].append([index + 1, _torn(raw)])
                return
            s["physical"] += 1
            self._model(entry)
            if not s["title"]:
                s["title"] = MessageEntry(entry, msg if isinstance(msg, Message) else None).title()
            rid = entry.get("replace_id")
            if rid is None:
                _add(s["acc"], msg)
            elif pending is not None and rid == pending[0]:
                _add(pending[3], msg)
                pending[2] += 1
                if pending[2] == pending[1]:
                    s["acc"], s["pending"], s["eff"] = pending[3], None, pending[4]
                    _count_replace(s)
        elif kind == "usage":
            self._model(entry)
        elif kind in PIN_TYPES:
            pins = {p[0]: Pin(p[0], p[2], p[1]) for p in s["pins"]}
            apply_pin(pins, entry)
            s["pins"] = [[p.id, p.ts, p.text] for p in pins.values()]
        elif kind == "replace":
            count, rid = entry.get("count"), entry.get("replace_id")
            if not isinstance(count, int) or count < 0 or not isinstance(rid, str):
                s["bad"].append([index + 1, _torn(raw)])
            elif count == 0:
                s["acc"], s["eff"] = _acc(), at
                _count_replace(s)
            else:
                s["pending"] = [rid, count, 0, _acc(), at]

    def _model(self, entry: dict[str, Any]) -> None:
        model = entry.get("model")
        if model and isinstance(model, str):
            s = self.state
            s["first_model"] = s["first_model"] or model
            s["last_model"] = model


def _count_replace(s: dict[str, Any]) -> None:
    if type(s.get("replaces")) is int:
        s["replaces"] += 1


def problems(s: dict[str, Any], torn_replace: bool, truncated: bool, orphans: int) -> list[str]:
    """What ``LoadResult.problems`` says of the same log (a full replay's)."""
    out = []
    bad = [b[0] for b in s["bad"]]
    if bad:
        shown = ", ".join(map(str, bad[:10]))
        more = f" (+{len(bad) - 10} more)" if len(bad) > 10 else ""
        out.append(f"recovery incomplete: {'line' if len(bad) == 1 else 'lines'} {shown}{more} unreadable")
    if s["torn_tail"]:
        out.append("a torn line from a crash was skipped")
    if torn_replace:
        out.append("an unfinished replace was discarded (the state before it stands)")
    if truncated:
        out.append("tool calls without results were cut")
    if orphans:
        out.append(f"{orphans} tool results without their call were dropped")
    return out


def catch_up(fd: int, replay: Replay, size: int) -> bytes:
    """Feed ``replay`` the log (open as ``fd``) from its offset to ``size``; the unterminated rest."""
    rest = b""
    at = replay.offset
    while at < size:
        piece = os.pread(fd, min(READ_CHUNK, size - at), at)
        if not piece:
            break
        at += len(piece)
        rest = replay.feed(rest + piece) if rest else replay.feed(piece)
    return rest


# --- the sidecar file ------------------------------------------------------------------------


def refresh(session_dir: Path, meta: dict[str, Any] | None = None, *, fsync: bool = True) -> dict[str, Any]:
    """Bring ``session_dir``'s sidecar up to date with its log and write it; the new sidecar.

    Reads only the bytes after the sidecar's offset when the sidecar belongs to this log
    (same first bytes, not longer than the log); otherwise replays the log from the start,
    streaming it. Raises ``OSError`` when the log cannot be read.
    """
    session_dir = Path(session_dir)
    if meta is None:
        meta = read_meta(session_dir)
    with os.fdopen(safeio.open_file(session_dir / LOG_NAME), "rb") as f:
        fd = f.fileno()
        st = os.fstat(fd)
        size = st.st_size
        if is_current(meta, st):
            return meta
        replay = _resumed(fd, meta, size)
        resumed = bool(replay.offset) or replay.state != new_state()
        try:
            rest = catch_up(fd, replay, size)
            out = replay.meta(rest, size=size, mtime=st.st_mtime, session_id=session_dir.name)
        except (TypeError, KeyError, IndexError, ValueError, AttributeError):
            if not resumed:
                raise
            out = {}
        out["offset"] = replay.offset
        if resumed and not plausible(out, size):
            # A stored state someone edited into nonsense (or crafted: a title of escapes,
            # 10**15 messages): start over from the log.
            replay = Replay()
            rest = catch_up(fd, replay, size)
            out = replay.meta(rest, size=size, mtime=st.st_mtime, session_id=session_dir.name)
        out = {"version": META_VERSION, **out}
        out["mtime_ns"] = st.st_mtime_ns
        out["offset"] = replay.offset
        out["head"] = head_digest(fd, replay.offset)
        out["replay"] = replay.state
    safeio.write_atomic(
        session_dir / META_NAME, json.dumps(out, ensure_ascii=False, separators=(",", ":")), fsync=fsync
    )
    return out


def _resumed(fd: int, meta: dict[str, Any] | None, size: int) -> Replay:
    """The replay the sidecar stored, when it is of this log; a fresh one otherwise."""
    if meta is None or meta.get("version") != META_VERSION:
        return Replay()
    offset, state, head = meta.get("offset"), meta.get("replay"), meta.get("head")
    if (
        type(offset) is not int
        or not 0 <= offset <= size
        or not isinstance(state, dict)
        or state.get("v") != STATE_VERSION
        or not isinstance(head, str)
        or head_digest(fd, offset) != head
        or (offset and os.pread(fd, 1, offset - 1) != b"\n")
    ):
        return Replay()
    if set(state) | {"replaces"} != set(new_state()):  # stored before replaces were counted: still good
        return Replay()
    lines, bad = state.get("lines"), state.get("bad")
    if type(lines) is not int or not 0 <= lines <= offset or type(bad) is not list or len(bad) > lines:
        return Replay()  # more lines than bytes: not this log's replay
    if not _pins_ok(state.get("pins"), offset):
        return Replay()
    return Replay(state, offset)


def _pins_ok(pins: object, offset: int) -> bool:
    """Whether ``pins`` is a pin list a replay of ``offset`` bytes can give (``[id, ts, text]`` each)."""
    if type(pins) is not list or len(pins) > offset // MIN_MESSAGE_BYTES:
        return False
    return all(
        type(p) is list
        and len(p) == 3
        and type(p[0]) is str
        and type(p[1]) in (int, float)
        and type(p[2]) is str
        and len(p[2]) <= offset
        for p in pins
    )


def stored_pins(fd: int, session_dir: Path, size: int) -> tuple[list[Pin], int]:
    """The pins in force at the sidecar's offset, and that offset; ``([], 0)`` without a usable sidecar.

    Read-only (the sidecar is not brought up to date): the fast load adds the pin entries
    after the offset itself. A sidecar of another log, or one edited into nonsense, counts
    as none (``_resumed``).
    """
    replay = _resumed(fd, read_meta(session_dir), size)
    return [Pin(p[0], p[2], p[1]) for p in replay.state["pins"]], replay.offset
