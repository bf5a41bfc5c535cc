"""The session loader: replay a log into the effective conversation, never raising on content.

It owns reading ``conversation.jsonl``. Replay rules (SPEC §6.3):

* ``message`` appends; ``replace`` opens a pending snapshot that commits only when all
  ``count`` entries tagged with its ``replace_id`` have arrived. A snapshot cut off by EOF
  or by any other entry is discarded, so a replace is atomic: old state or new state.
* An unreadable line is skipped and its 1-based number kept in ``bad_lines``. An
  unreadable *last* line without ``\\n`` is a torn tail (a crash mid-write), as is a line
  the writer later marked torn; neither makes the recovery ``incomplete``.
* After replay, tool calls without results are cut (a trailing call with everything after
  it), and results without calls are dropped: results are never invented, because the
  host cannot know whether the tool ran.

Resume cost follows the effective state, not the physical log. When the last *complete*
replace lies ``FAST_MIN_SKIP`` (16 MiB) or more into the log, the log is read backwards to
it and only the region from it on is replayed (with the same code), plus the head of the
file for what the region cannot say (title, first model, first timestamp: looked for in
the first MiB) and a 1 MiB look-back before the replace for the entries that explain it
(its spill entries, a rollover intent, failed compactions). The messages, the anchor and
every flag about them are exactly those of a full replay (``test_session_loader_fast``).
What lies between head and look-back is not read (``LoadResult.skipped``), so:

* ``bad_lines``, ``torn_replace``, ``physical_messages``, ``replaces`` and the entry lists
  (``spills``, ``compacts``, ``rollovers``, ``notes``) describe the part that was read.
  Damage in the skipped part cannot change the effective state, and resume does not
  report it; ``load_session(path, full=True)`` replays everything and reports every line
  (the catalog rebuilds its sidecars that way, so ``%sessions list`` still shows it);
* an unreadable line *inside* the region makes the loader replay the whole log instead,
  so every line it reports carries its true line number;
* ``effective_from_line`` stays exact: it is counted when first asked for.

Only I/O errors raise, with the path in the message.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from ..errors import SessionError
from ..messages import Message, pairing_problems, repair_pairing
from . import safeio
from .entries import TORN_NOTE, message_from_entry
from .paths import LOG_NAME


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
    spills: list[dict[str, Any]] = field(default_factory=list)
    compacts: list[dict[str, Any]] = field(default_factory=list)
    rollovers: list[dict[str, Any]] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
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


@dataclass
class _Pending:
    replace_id: str
    count: int
    line: int
    messages: list[Any] = field(default_factory=list)


# Resume reads from the last complete replace only when that lies this far into the log.
# Below, the whole log is replayed: ~60 ms at most here (~290 MB/s), and a full replay
# numbers every unreadable line.
FAST_MIN_SKIP = 16 << 20
_CHUNK = 256 << 10  # the first backward read; each further one doubles
_HEAD_CHUNK = 64 << 10
_HEAD_LIMIT = 1 << 20  # title, first model and first timestamp are looked for this far
_LOOKBACK = 1 << 20  # before the replace: the spills, intent and failures that led to it
# Tokens that find candidate lines; each line found is parsed before it counts. They do
# not start with a quote: CPython's bytes.find is ~20x slower on JSON for such needles.
_REPLACE = b'replace"'
_LOOKBACK_TOKENS = (b'spill"', b'compact"', b'rollover"', b'note"')


def log_path(path_or_dir: str | Path) -> Path:
    path = Path(path_or_dir)
    return path / LOG_NAME if path.is_dir() else path


def load_session(path: str | Path, *, full: bool = False) -> LoadResult:
    """Load a session directory or its ``conversation.jsonl``.

    ``full`` replays the whole log even when it is large (every bad line reported, counts
    of the whole log); by default a large log is read from its last complete replace.
    """
    file = log_path(path)
    try:
        # No link followed, regular files only: a FIFO or /dev/zero as a log is refused, not read.
        with os.fdopen(safeio.open_file(file), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if not full and size >= FAST_MIN_SKIP:
                fast = _load_fast(f.fileno(), file, size)
                if fast is not None:
                    _settle(fast)
                    _check_images(fast)
                    return fast
            f.seek(0)
            data = f.read()
    except OSError as exc:
        raise SessionError(f"cannot read session log {file}: {exc.strerror or exc}") from exc
    result = LoadResult(path=file, bytes=len(data), bytes_read=len(data))
    _replay(data, result)
    _settle(result)
    _check_images(result)
    return result


def _check_images(r: LoadResult) -> None:
    """Image parts whose file is missing or altered become text notes, reported (issue-14)."""
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


def _replay(data: bytes, r: LoadResult, *, base: int = 0) -> list[int]:
    """Replay ``data`` (the log from byte ``base`` on) into ``r``; the offsets of committed replaces.

    Line numbers in ``r`` count from the start of ``data``; offsets are absolute. The loop
    keeps its figures in local variables (this is the full replay's hot path).
    """
    lines = data.split(b"\n")
    ends_clean = data.endswith(b"\n") or not data
    state: list[Any] = []  # Messages, or entries that are plainly valid ones
    pending: _Pending | None = None
    anchor: tuple[int, int] | None = None
    last_bad: int | None = None
    last = len(lines) - 1
    commits: list[int] = []  # line indexes of committed replace markers
    bad = r.bad_lines
    first_ts = last_ts = first_model = last_model = None
    title = ""
    physical = replaces = 0
    loads, JSONDecodeError = orjson.loads, orjson.JSONDecodeError  # noqa: N806 - a local alias

    for index, raw in enumerate(lines):
        if not raw or raw.isspace():  # isspace: no copy, unlike strip
            continue
        try:
            entry = loads(raw)
        except JSONDecodeError:
            entry = None
        if type(entry) is not dict:
            if index == last and not ends_clean:
                r.torn_tail = True
            else:
                bad.append(index + 1)
                last_bad = index + 1
            continue

        kind = entry.get("type")
        if last_bad is not None:
            if kind == "note" and entry.get("kind") == TORN_NOTE and last_bad == index:
                # The writer marked the line before as a crash's torn tail, now mended.
                bad.pop()
                r.torn_tail = True
                # A crash during an earlier mend left part of its note: that torn line mended
                # the one before it too (recovered, not incomplete).
                frag = index - 1  # the line just mended (0-based)
                while _torn_note_part(lines[frag]) and bad and bad[-1] == frag:
                    bad.pop()  # the line before the fragment (1-based frag)
                    frag -= 1
            last_bad = None

        if pending is not None and (kind != "message" or entry.get("replace_id") != pending.replace_id):
            r.torn_replace, pending = True, None

        ts = entry.get("ts")
        if isinstance(ts, (int, float)):
            if first_ts is None:
                first_ts = ts
            last_ts = ts

        if kind == "message":
            # A plainly valid entry becomes a Message only if it is in the final state;
            # anything else is validated now (and may be a bad line).
            msg: Message | dict[str, Any] | None = entry if _plainly_valid(entry) else _valid_message(entry)
            if msg is None:
                bad.append(index + 1)
                continue
            physical += 1
            model = entry.get("model")
            if model and isinstance(model, str):
                first_model = first_model or model
                last_model = model
            if not title:
                title = _title(msg)
            rid = entry.get("replace_id")
            if rid is None:
                state.append(msg)
            elif pending is not None and rid == pending.replace_id:
                pending.messages.append(msg)
                if len(pending.messages) == pending.count:
                    r._effective_line = pending.line
                    commits.append(pending.line - 1)
                    state, pending, anchor = pending.messages, None, None
                    replaces += 1
            # else: a snapshot entry of a replace already discarded; ignore it.
        elif kind == "usage":
            anchor = _anchor(entry) or anchor
            model = entry.get("model")
            if model and isinstance(model, str):
                first_model = first_model or model
                last_model = model
        elif kind == "replace":
            count, rid = entry.get("count"), entry.get("replace_id")
            if not isinstance(count, int) or count < 0 or not isinstance(rid, str):
                bad.append(index + 1)
            elif count == 0:
                state, anchor = [], None
                r._effective_line = index + 1
                commits.append(index)
                replaces += 1
            else:
                pending = _Pending(rid, count, index + 1)
        else:
            _collect(r, kind, entry)

    if pending is not None:
        r.torn_replace = True
    r.messages = [m if type(m) is not dict else Message.model_validate(m) for m in state]
    r.usage_anchor = anchor
    r.first_ts, r.last_ts, r.first_model, r.last_model = first_ts, last_ts, first_model, last_model
    r.title, r.physical_messages, r.replaces = title, physical, replaces
    offsets = _offsets(lines, commits, base)
    if offsets:
        r.effective_from_byte = offsets[-1]
    return offsets


def _offsets(lines: list[bytes], indexes: list[int], base: int) -> list[int]:
    """The byte offsets of the lines at ``indexes`` (ascending), counted in one pass."""
    out, pos, at = [], base, 0
    for index in indexes:
        pos += sum(map(len, lines[at:index])) + (index - at)
        at = index
        out.append(pos)
    return out


def _collect(r: LoadResult, kind: Any, entry: dict[str, Any]) -> None:
    if kind == "spill":
        r.spills.append(entry)
    elif kind == "compact":
        r.compacts.append(entry)
    elif kind == "rollover":
        r.rollovers.append(entry)
    elif kind == "note":
        r.notes.append(entry)
    # Unknown types are ignored: forward compatibility.


# --- the fast path: from the last complete replace -------------------------------------------------


def _load_fast(fd: int, file: Path, size: int) -> LoadResult | None:
    """The load from the last complete replace, or None when the whole log must be replayed.

    None when no replace completes far enough from the start, or when the region after it
    holds an unreadable line (its true line number needs the whole file).
    """
    end = size
    buf = b""  # the file from ``end`` - len(buf) to ``size``, read backwards in growing chunks
    chunk = _CHUNK
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
            if offset < FAST_MIN_SKIP:
                return None  # too little to skip: the full replay is as cheap
            result = LoadResult(path=file, bytes=size)
            commits = _replay(buf[at:], result, base=offset)
            if commits and commits[0] == offset:
                if result.bad_lines:
                    return None
                result.bytes_read = read
                _finish_fast(fd, result, offset, buf[:at], start)
                return result
        searched = start + first
        if start < FAST_MIN_SKIP:
            return None  # no complete replace far enough from the start
    return None


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


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        entry = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return entry if isinstance(entry, dict) else None


def _finish_fast(fd: int, r: LoadResult, offset: int, before: bytes, before_start: int) -> None:
    """Complete a region's result with what the rest of the log must say."""
    r._effective_line = None  # counted on demand
    region_title, region_first_model, region_first_ts = r.title, r.first_model, r.first_ts
    # The look-back: entries just before the replace explain it (its spill entries, the
    # rollover intent it commits, compactions that failed first).
    look_from = max(0, offset - _LOOKBACK)
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
        entry = _parse(raw) if raw and not raw.isspace() else None
        if entry is None:
            continue
        kind = entry.get("type")
        if isinstance(entry.get("ts"), (int, float)):
            last_ts = entry["ts"]
        model = entry.get("model")
        if (
            isinstance(model, str)
            and model
            and (kind == "usage" or (kind == "message" and _valid_message(entry)))
        ):
            last_model = model
        if kind == "spill":
            spills.append(entry)
        elif kind == "compact":
            compacts.append(entry)
        elif kind == "rollover":
            rollovers.append(entry)
        elif kind == "note":
            notes.append(entry)
            if entry.get("kind") == TORN_NOTE:
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
    stop = min(limit, _HEAD_LIMIT)
    while head.end < stop:
        piece = os.pread(fd, min(_HEAD_CHUNK, limit - head.end - len(buf)), head.end + len(buf))
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
            if head.title and head.first_model and head.first_ts is not None:
                head.end += start
                return head
        if start == 0 and head.end + len(buf) >= stop:
            break  # one line fills the rest of the head: what it hides is in the skipped part
        head.end += start
        buf = buf[start:]
    return head


def _head_entry(head: _Head, entry: dict[str, Any]) -> None:
    ts = entry.get("ts")
    if head.first_ts is None and isinstance(ts, (int, float)):
        head.first_ts = ts
    kind = entry.get("type")
    if kind not in ("message", "usage"):
        return
    msg = _valid_message(entry) if kind == "message" else None
    if kind == "message" and msg is None:
        return
    model = entry.get("model")
    if not head.first_model and isinstance(model, str) and model:
        head.first_model = model
    if not head.title and msg is not None and msg.role == "user" and msg.content and msg.tool_result is None:
        head.title = msg.text_for_title()[:80]


_TORN_NOTE_HEAD = b'{"v":1,"type":"note","kind":"' + TORN_NOTE.encode() + b'"'


def _torn_note_part(raw: bytes) -> bool:
    """True for what a crash leaves of the writer's torn-line note: a prefix of it, or it cut short."""
    return bool(raw) and (raw.startswith(_TORN_NOTE_HEAD) or _TORN_NOTE_HEAD.startswith(raw))


# The keys a message entry has when it holds only the base fields (SPEC §6.1). An entry with
# any other key (reasoning, a notebook mark, parts, a key of a later version) is validated in
# full instead, so an optional field of the wrong type drops that field, never the message.
_BASE_KEYS = frozenset(
    {"v", "type", "id", "ts", "role", "content", "tool_calls", "tool_result", "model", "replace_id"}
)
_RESULT_KEYS = frozenset({"call_id", "content", "is_error"})


def _plainly_valid(e: dict[str, Any]) -> bool:
    """True when the entry is a message with only the base fields, each of exactly its type,
    so that ``Message.model_validate`` accepts it as it stands (checked in Python: ~3x cheaper
    than validating, and most entries are never needed as messages after a replace)."""
    if not e.keys() <= _BASE_KEYS:
        return False
    if type(e.get("id")) is not str or e.get("role") not in ("user", "assistant"):
        return False
    if type(e.get("content", "")) is not str or type(e.get("ts")) not in (float, int):
        return False
    calls = e.get("tool_calls", ())
    if type(calls) is not list and calls != ():
        return False
    for c in calls:
        if type(c) is not dict or type(c.get("id")) is not str or type(c.get("name")) is not str:
            return False
        if type(c.get("arguments", {})) is not dict:
            return False
    result = e.get("tool_result")
    if result is None:
        return True
    return (
        type(result) is dict
        and result.keys() <= _RESULT_KEYS
        and type(result.get("call_id")) is str
        and type(result.get("content")) is str
        and type(result.get("is_error", False)) is bool
    )


def _title(msg: Message | dict[str, Any]) -> str:
    """The title a message gives a session (its text collapsed, 80 characters), or ""."""
    if type(msg) is dict:
        content = msg.get("content", "")
        if msg["role"] != "user" or not content or msg.get("tool_result") is not None:
            return ""
        mark = msg.get("notebook")
        if type(mark) is dict and type(mark.get("chars")) is int:
            content = content[mark["chars"] :]  # issue-13: the title is what the user typed
        return " ".join(content.split())[:80]
    assert isinstance(msg, Message)
    if msg.role != "user" or not msg.content or msg.tool_result is not None:
        return ""
    return msg.text_for_title()[:80]


def _valid_message(entry: dict[str, Any]) -> Message | None:
    """The message of a ``message`` entry, or None when it is not a valid one."""
    if "id" in entry and "ts" in entry:
        # Validated as it stands (unknown keys are ignored); what this rejects gets the
        # lenient reading below (null content or tool_calls, a null ts), as before.
        try:
            return Message.model_validate(entry)
        except ValidationError:
            pass
    try:
        return message_from_entry(entry)
    except (ValidationError, KeyError, TypeError):
        return None


def _anchor(entry: dict[str, Any]) -> tuple[int, int] | None:
    try:
        tokens = (
            int(entry.get("input_tokens") or 0)
            + int(entry.get("cache_creation_input_tokens") or 0)
            + int(entry.get("cache_read_input_tokens") or 0)
            + int(entry.get("output_tokens") or 0)
        )
        return tokens, int(entry["messages"])
    except (KeyError, TypeError, ValueError):
        return None


def _settle(r: LoadResult) -> None:
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
    r.messages = msgs
