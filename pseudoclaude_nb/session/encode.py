"""One log entry as one JSON line, at any depth the interpreter can encode (the writer's encoder)."""

from __future__ import annotations

import json
from typing import Any

import orjson


class EncodeError(ValueError):
    """An entry cannot be written as one JSON line (nested deeper than the encoders go)."""


def encode_entry(entry: dict[str, Any]) -> bytes:
    """``entries.encode``, falling back to the standard library for what orjson refuses.

    orjson stops at 255 levels of nesting; ``json`` goes as deep as the interpreter's
    recursion limit allows (the loader reads up to 1,024). Deeper raises ``EncodeError``.
    """
    try:  # entries.encode, called here directly: one frame less on every append
        return orjson.dumps(entry, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError as exc:
        if "ecursion" not in str(exc):
            raise EncodeError(f"an entry cannot be encoded as JSON: {exc}") from exc
    try:
        return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    except (RecursionError, ValueError, TypeError) as exc:
        raise EncodeError(
            "an entry is nested too deeply to be written as JSON (tool-call arguments hundreds of levels deep)"
        ) from exc
