"""The log's entry format, schema version 1 (SPEC §6.1): building and encoding lines.

One JSON object per line. Every entry has ``v``, ``type``, ``id`` and ``ts``; a message
entry's ``id`` is the message id. Readers ignore unknown fields and types, so later
versions can add both without breaking old readers.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

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
    data = msg.to_dict()
    entry = _entry(
        "message",
        id=data.pop("id"),
        ts=data.pop("ts"),
        **data,
    )
    if model:
        entry["model"] = model
    if replace_id:
        entry["replace_id"] = replace_id
    return entry


def replace_entry(reason: str, replace_id: str, count: int) -> dict[str, Any]:
    return _entry("replace", reason=reason, replace_id=replace_id, count=count)


def usage_entry(usage: Usage, *, messages: int, model: str | None) -> dict[str, Any]:
    return _entry("usage", **usage.to_dict(), messages=messages, model=model)


def note_entry(text: str, level: str = "info") -> dict[str, Any]:
    return _entry("note", text=text, level=level)


def spill_entry(*, call_id: str, tool: str, path: str, bytes: int, sha256: str) -> dict[str, Any]:
    return _entry("spill", call_id=call_id, tool=tool, path=path, bytes=bytes, sha256=sha256)


def compact_entry(
    *, trigger: str, before_tokens: int, after_tokens: int, ok: bool, error: str | None
) -> dict[str, Any]:
    return _entry(
        "compact", trigger=trigger, before_tokens=before_tokens, after_tokens=after_tokens, ok=ok, error=error
    )


def rollover_entry(
    *,
    phase: str,
    reason: str,
    handoff: dict[str, Any],
    related_files: list[dict[str, Any]],
    call_id: str | None,
    **extra: Any,
) -> dict[str, Any]:
    """``phase`` intent (the model called new_context) or commit (the window was replaced)."""
    return _entry(
        "rollover",
        phase=phase,
        reason=reason,
        handoff=handoff,
        related_files=related_files,
        call_id=call_id,
        **extra,
    )


def encode(entry: dict[str, Any]) -> bytes:
    """One line, newline included. orjson keeps non-ASCII as UTF-8 and is ~4x faster."""
    return orjson.dumps(entry) + b"\n"


def message_from_entry(entry: dict[str, Any]) -> Message:
    return Message.model_validate(
        {
            "id": entry["id"],
            "role": entry["role"],
            "content": entry.get("content") or "",
            "tool_calls": entry.get("tool_calls") or (),
            "tool_result": entry.get("tool_result"),
            "ts": entry.get("ts") or 0.0,
            "notebook": _notebook_mark(entry.get("notebook")),
            "parts": _parts(entry.get("parts")),
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


def _notebook_mark(value: Any) -> NotebookMark | None:
    """A readable mark, or none: a damaged mark must not cost the message itself."""
    try:
        return NotebookMark.model_validate(value) if isinstance(value, dict) else None
    except ValueError:
        return None
