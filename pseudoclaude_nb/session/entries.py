"""The log's entry format, schema version 1 (SPEC §6.1): one value type per entry kind.

One JSON object per line. Every entry has ``v``, ``type``, ``id`` and ``ts``; a message
entry's ``id`` is the message id. Readers ignore unknown fields and types, so later
versions can add both without breaking old readers.

Each kind is one frozen type here, with both directions in one place: ``new(...)`` makes
the entry to write (its ``raw`` is the line's object, in the order it is written; a writer
takes it through ``SessionRecord.record``) and ``read(obj)`` parses a decoded line. A
message's entry is written by ``message_entry`` (messages reach the log through the
conversation's hooks, not ``record``); pins are read by ``apply_pin``.

``parse_entry`` is the one reader of an entry: every module that reads the log (loader,
history index, timeline, archive, the first-request scan, the spill browser) gets the same
typed entries from it, with one tolerance. ``None`` means an unreadable entry (a bad line):
not an object, a message that is not a valid message, a replace marker without its count or
id. Other known types are read field by field (a wrong field reads as missing); unknown
types are ``OtherEntry``, ignored by readers.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, cast

import orjson
from pydantic import ValidationError

from ..messages import ImagePart, Message, NotebookMark, Usage, new_id

SCHEMA_VERSION = 1
# The kind of note the writer adds after ending a line a crash left torn.
TORN_NOTE = "torn-line"


def _entry(type_: str, **fields: Any) -> dict[str, Any]:
    entry = {"v": SCHEMA_VERSION, "type": type_, "id": fields.pop("id", None) or new_id()}
    entry["ts"] = fields.pop("ts", None) or time.time()
    entry.update(fields)
    return entry


def message_entry(msg: Message, *, replace_id: str | None = None, model: str | None = None) -> dict[str, Any]:
    # The keys every entry starts with, then the message's own (``id`` and ``ts`` third and
    # fourth): one dict, built on every append.
    entry = msg.to_dict({"v": SCHEMA_VERSION, "type": "message"})
    if not entry["id"]:
        entry["id"] = new_id()
    if not entry["ts"]:
        entry["ts"] = time.time()
    if model:
        entry["model"] = model
    if replace_id:
        entry["replace_id"] = replace_id
    return entry


# --- pins (SPEC §19): not part of the conversation, so no replace ever drops them -----------------

PIN_TYPES = ("pin", "unpin")


@dataclass(frozen=True, slots=True)
class Pin:
    """One pin in force: its id (the ``pin`` entry's), its text as pinned, and when."""

    id: str
    text: str
    ts: float


@dataclass(frozen=True, slots=True)
class PinEntry:
    """A pin to write (SPEC §19); read back by ``apply_pin``."""

    raw: dict[str, Any]

    @classmethod
    def new(cls, text: str, *, id: str | None = None, ts: float | None = None) -> PinEntry:
        return cls(_entry("pin", id=id, ts=ts, text=text))


@dataclass(frozen=True, slots=True)
class UnpinEntry:
    """An unpin to write; read back by ``apply_pin``."""

    raw: dict[str, Any]

    @classmethod
    def new(cls, pin_id: str) -> UnpinEntry:
        return cls(_entry("unpin", pin=pin_id))


def apply_pin(pins: dict[str, Pin], raw: dict[str, Any]) -> None:
    """Apply one decoded ``pin`` or ``unpin`` entry to ``pins`` (id -> pin, in log order).

    Pin entries stay ``OtherEntry`` for ``parse_entry`` (readers that do not know them, and
    the step index that copies them, see them as they are); this is their one reading. A
    pin without a string id or text is ignored, like any unreadable field; applying an
    entry twice changes nothing (the fast load relies on it, see ``fast_load``).
    """
    kind = raw.get("type")
    if kind == "pin":
        pid, text = raw.get("id"), raw.get("text")
        ts: Any = raw.get("ts")  # a number only when its type says so, below
        if type(pid) is str and type(text) is str and pid not in pins:
            pins[pid] = Pin(pid, text, float(ts) if type(ts) in (int, float) else 0.0)
    elif kind == "unpin" and type(raw.get("pin")) is str:
        pins.pop(raw["pin"], None)


def effective_pins(ops: list[dict[str, Any]]) -> list[Pin]:
    """The pins in force after ``ops`` (pin and unpin entries in log order)."""
    pins: dict[str, Pin] = {}
    for raw in ops:
        apply_pin(pins, raw)
    return list(pins.values())


def encode(entry: dict[str, Any]) -> bytes:
    """One line, newline included. orjson keeps non-ASCII as UTF-8 and is ~4x faster."""
    return orjson.dumps(entry, option=orjson.OPT_APPEND_NEWLINE)


def message_from_entry(entry: dict[str, Any]) -> Message:
    return Message.model_validate(
        {
            "id": entry["id"],
            "role": entry["role"],
            "content": entry.get("content") or "",
            "tool_calls": entry.get("tool_calls") or (),
            "tool_result": _tool_result(entry.get("tool_result")),
            "ts": entry.get("ts") or 0.0,
            "notebook": _notebook_mark(entry.get("notebook")),
            "parts": _parts(entry.get("parts")),
            "host": entry.get("host") if isinstance(entry.get("host"), str) else None,
        }
    )


def _parts(value: Any) -> tuple[ImagePart, ...]:
    """The readable image parts; parts of unknown types (a later version's) are ignored."""
    out = []
    for item in value if isinstance(value, list) else ():
        if isinstance(item, dict) and item.get("type") == "image":
            try:
                out.append(ImagePart.model_validate(item))
            except ValueError:
                continue
    return tuple(out)


def _tool_result(value: Any) -> Any:
    """The result as logged, without a ``spilled`` mark of the wrong type (the result stays)."""
    if isinstance(value, dict) and "spilled" in value and not isinstance(value["spilled"], str | None):
        return {k: v for k, v in value.items() if k != "spilled"}
    return value


def _notebook_mark(value: Any) -> NotebookMark | None:
    """A readable mark, or none: a damaged mark must not cost the message itself."""
    try:
        return NotebookMark.model_validate(value) if isinstance(value, dict) else None
    except ValueError:
        return None


# --- parsing: one typed entry per line ---------------------------------------------------------


@dataclass(slots=True)
class MessageEntry:
    """A ``message`` entry; the ``Message`` is built when first asked for (most entries of a
    long log are replaced before anyone needs them as messages)."""

    raw: dict[str, Any]
    parsed: Message | None = None  # already validated (an entry that needed the lenient reading)

    @property
    def id(self) -> str:
        return cast(str, self.raw["id"])  # a message's id is a string, as parse_entry admitted it

    @property
    def ts(self) -> Any:
        return self.raw.get("ts")

    @property
    def replace_id(self) -> Any:
        return self.raw.get("replace_id")

    @property
    def model(self) -> str | None:
        model = self.raw.get("model")
        return model if model and isinstance(model, str) else None

    @property
    def message(self) -> Message:
        if self.parsed is None:
            self.parsed = Message.model_validate(self.raw)
        return self.parsed

    def title(self) -> str:
        """The title this message gives a session (its text collapsed, 80 characters), or ""."""
        if self.parsed is not None:
            m = self.parsed
            return m.text_for_title()[:80] if m.role == "user" and m.content and m.tool_result is None else ""
        raw = self.raw
        content = raw.get("content", "")
        if raw["role"] != "user" or not content or raw.get("tool_result") is not None:
            return ""
        mark = raw.get("notebook")
        if type(mark) is dict and type(mark.get("chars")) is int:
            content = content[mark["chars"] :]  # issue-13: the title is what the user typed
        return " ".join(content.split())[:80]


@dataclass(frozen=True, slots=True)
class ReplaceEntry:
    """The next ``count`` entries tagged ``replace_id`` are the new conversation (written by the
    writer's replace hook, with any extra marker fields after these: an undo's ``undoes``, the
    ``strategy`` whose action it was)."""

    raw: dict[str, Any]
    reason: str
    replace_id: str
    count: int

    @classmethod
    def new(cls, reason: str, replace_id: str, count: int) -> ReplaceEntry:
        return cls(
            _entry("replace", reason=reason, replace_id=replace_id, count=count), reason, replace_id, count
        )

    @staticmethod
    def read(e: dict[str, Any]) -> ReplaceEntry | None:
        count, rid = e.get("count"), e.get("replace_id")
        if not isinstance(count, int) or count < 0 or not isinstance(rid, str):
            return None
        return ReplaceEntry(e, str(e.get("reason") or ""), rid, count)


@dataclass(frozen=True, slots=True)
class UsageEntry:
    """A response's usage: the anchor of the next estimate."""

    raw: dict[str, Any]
    anchor: tuple[int, int] | None  # (prompt total + output, conversation length); None: unreadable
    model: str | None

    @classmethod
    def new(cls, usage: Usage, *, messages: int, model: str | None) -> UsageEntry:
        return cls.read(_entry("usage", **usage.to_dict(), messages=messages, model=model))

    @staticmethod
    def read(e: dict[str, Any]) -> UsageEntry:
        return UsageEntry(e, _anchor(e), _model(e))


@dataclass(frozen=True, slots=True)
class SpendEntry:
    """A request that was not a step of the conversation (``purpose``: ``summary``, ``memory``).

    Its own type, not ``usage``: a reader that anchors its estimate on usage entries (and any
    older reader, which ignores unknown types) never takes a summary's size for the
    conversation's."""

    raw: dict[str, Any]
    purpose: str
    model: str | None

    @classmethod
    def new(cls, usage: Usage, *, purpose: str, model: str | None) -> SpendEntry:
        return cls.read(_entry("spend", **usage.to_dict(), purpose=purpose, model=model))

    @staticmethod
    def read(e: dict[str, Any]) -> SpendEntry:
        return SpendEntry(e, str(e.get("purpose") or ""), _model(e))


@dataclass(frozen=True, slots=True)
class SpillEntry:
    """Layer 1 wrote a result to ``path``; logged before its preview."""

    raw: dict[str, Any]
    call_id: str | None
    tool: str | None
    path: str | None  # relative to the session directory
    bytes: int
    sha256: str | None

    @classmethod
    def new(cls, *, call_id: str, tool: str, path: str, bytes: int, sha256: str) -> SpillEntry:
        raw = _entry("spill", call_id=call_id, tool=tool, path=path, bytes=bytes, sha256=sha256)
        return cls(raw, call_id, tool, path, bytes, sha256)

    @staticmethod
    def read(e: dict[str, Any]) -> SpillEntry:
        size = e.get("bytes")
        return SpillEntry(
            e,
            _str(e.get("call_id")),
            _str(e.get("tool")),
            _str(e.get("path")),
            size if type(size) is int else 0,
            _str(e.get("sha256")),
        )


@dataclass(frozen=True, slots=True)
class CompactEntry:
    """A compaction attempt ended (after its replace, when it made one)."""

    raw: dict[str, Any]
    trigger: str
    before_tokens: int | None
    after_tokens: int | None
    ok: bool
    error: str | None

    @classmethod
    def new(
        cls, *, trigger: str, before_tokens: int, after_tokens: int, ok: bool, error: str | None
    ) -> CompactEntry:
        raw = _entry(
            "compact",
            trigger=trigger,
            before_tokens=before_tokens,
            after_tokens=after_tokens,
            ok=ok,
            error=error,
        )
        return cls(raw, trigger, before_tokens, after_tokens, ok, error)

    @staticmethod
    def read(e: dict[str, Any]) -> CompactEntry:
        return CompactEntry(
            e,
            str(e.get("trigger") or "auto"),
            _int(e.get("before_tokens")),
            _int(e.get("after_tokens")),
            bool(e.get("ok")),
            _str(e.get("error")),
        )


@dataclass(frozen=True, slots=True)
class RolloverEntry:
    """``phase`` intent (the model called new_context) or commit (the window was replaced)."""

    raw: dict[str, Any]
    phase: str | None  # intent | commit
    reason: str | None
    handoff: dict[str, Any]
    related_files: list[dict[str, Any]]
    call_id: str | None
    message_uuid: str | None

    @classmethod
    def new(
        cls,
        *,
        phase: str,
        reason: str,
        handoff: dict[str, Any],
        related_files: list[dict[str, Any]],
        call_id: str | None,
        message_uuid: str | None,
        before_tokens: int | None = None,
        after_tokens: int | None = None,
    ) -> RolloverEntry:
        """A commit carries the estimate before and after (``before_tokens``, ``after_tokens``)."""
        extra = (
            {} if before_tokens is None else {"before_tokens": before_tokens, "after_tokens": after_tokens}
        )
        raw = _entry(
            "rollover",
            phase=phase,
            reason=reason,
            handoff=handoff,
            related_files=related_files,
            call_id=call_id,
            message_uuid=message_uuid,
            **extra,
        )
        return cls(raw, phase, reason, handoff, related_files, call_id, message_uuid)

    @staticmethod
    def read(e: dict[str, Any]) -> RolloverEntry:
        handoff, files = e.get("handoff"), e.get("related_files")
        return RolloverEntry(
            e,
            _str(e.get("phase")),
            _str(e.get("reason")),
            handoff if isinstance(handoff, dict) else {},
            [f for f in files if isinstance(f, dict)] if isinstance(files, list) else [],
            _str(e.get("call_id")),
            _str(e.get("message_uuid")),
        )


@dataclass(frozen=True, slots=True)
class NoteEntry:
    """A line for a reader of the session (a host note, a warning)."""

    raw: dict[str, Any]
    text: str
    level: str
    kind: str | None = None  # TORN_NOTE: the writer ended a line a crash left torn

    @classmethod
    def new(cls, text: str, level: str = "info") -> NoteEntry:
        return cls(_entry("note", text=text, level=level), text, level)

    @classmethod
    def torn(cls) -> NoteEntry:
        """The note the writer adds after ending a torn line: its ``kind`` right after ``type``
        (a reader recognises it by that head, ``replay._TORN_NOTE_HEAD``)."""
        text = "a line torn by a crash or failed write precedes this note"
        raw = _entry("note", text=text, level="warning")
        raw = {"v": raw.pop("v"), "type": raw.pop("type"), "kind": TORN_NOTE, **raw}
        return cls(raw, text, "warning", TORN_NOTE)

    @staticmethod
    def read(e: dict[str, Any]) -> NoteEntry:
        return NoteEntry(e, str(e.get("text") or ""), str(e.get("level") or "info"), _str(e.get("kind")))


@dataclass(frozen=True, slots=True)
class OtherEntry:
    """A type this version does not know: read past (forward compatibility)."""

    raw: dict[str, Any] = field(default_factory=dict)


Entry = (
    MessageEntry
    | ReplaceEntry
    | UsageEntry
    | SpendEntry
    | SpillEntry
    | CompactEntry
    | RolloverEntry
    | NoteEntry
    | OtherEntry
)
# What ``SessionRecord.record`` writes: every kind but messages and replace markers, which
# reach the log through the conversation's hooks.
Recorded = (
    UsageEntry | SpendEntry | SpillEntry | CompactEntry | RolloverEntry | NoteEntry | PinEntry | UnpinEntry
)

# The one dispatch from a line's ``type`` to its reader (messages are read in ``parse_entry``).
_READERS: dict[str, Any] = {
    "usage": UsageEntry.read,
    "spend": SpendEntry.read,
    "replace": ReplaceEntry.read,
    "spill": SpillEntry.read,
    "compact": CompactEntry.read,
    "rollover": RolloverEntry.read,
    "note": NoteEntry.read,
}


def decode(raw: bytes) -> dict[str, Any] | None:
    """The JSON object of one line, or None (not JSON, not an object)."""
    try:
        entry = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return entry if type(entry) is dict else None


def parse_line(raw: bytes) -> Entry | None:
    obj = decode(raw)
    return None if obj is None else parse_entry(obj)


def parse_entry(e: Any) -> Entry | None:
    """The typed entry of one decoded line; None when the line is unreadable (see the module)."""
    if type(e) is not dict:
        return None
    kind = e.get("type")
    if kind == "message":
        if plainly_valid(e):
            return MessageEntry(e)
        msg = valid_message(e)
        return None if msg is None else MessageEntry(e, msg)
    read = _READERS.get(kind) if type(kind) is str else None
    return OtherEntry(e) if read is None else cast(Entry | None, read(e))


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


def _model(e: dict[str, Any]) -> str | None:
    model = e.get("model")
    return model if model and isinstance(model, str) else None


# The keys a message entry has when it holds only the base fields (SPEC §6.1). An entry with
# any other key (reasoning, a notebook mark, a durable mark, a key of a later version) is
# validated in full instead, so an optional field of the wrong type drops that field, never
# the message.
# The durable marks of issue 12 (``host``, a result's ``spilled``) are checked here too: a
# spilled preview is common in a long log, and full validation would cost the replay ~40%.
_BASE_KEYS = frozenset(
    {"v", "type", "id", "ts", "role", "content", "tool_calls", "tool_result", "model", "replace_id", "host"}
)
_RESULT_KEYS = frozenset({"call_id", "content", "is_error", "spilled"})


def plainly_valid(e: dict[str, Any]) -> bool:
    """True when the entry is a message with only the base fields, each of exactly its type,
    so that ``Message.model_validate`` accepts it as it stands (checked in Python: ~3x cheaper
    than validating, and most entries are never needed as messages after a replace)."""
    if not e.keys() <= _BASE_KEYS:
        return False
    if type(e.get("id")) is not str or e.get("role") not in ("user", "assistant"):
        return False
    if type(e.get("content", "")) is not str or type(e.get("ts")) not in (float, int):
        return False
    if "host" in e and type(e["host"]) is not str:
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
        and type(result.get("spilled", "")) is str
    )


def valid_message(entry: dict[str, Any]) -> Message | None:
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
        messages = int(entry["messages"])
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    # A count from disk is believed only within sense (a 5,000-digit number is damage).
    return (tokens, messages) if 0 <= tokens < 2**53 and 0 <= messages < 2**53 else None
