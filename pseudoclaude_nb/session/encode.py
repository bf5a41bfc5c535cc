"""One log entry as one JSON line, at any depth the interpreter can encode (the writer's encoder).

Text from outside can hold lone surrogates (a file name that is not UTF-8, as ``os.listdir``
returns it), which no UTF-8 JSON can hold. The runner and the tool registry escape them
before a message enters the conversation (``escape_value``), so memory and log agree; the
encoder escapes what still reaches it the same way rather than end the session.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from ..textsafe import escape_surrogates


class EncodeError(ValueError):
    """An entry cannot be written as one JSON line (nested deeper than the encoders go)."""


def encode_entry(entry: dict[str, Any]) -> bytes:
    """``entries.encode``, falling back to the standard library for what orjson refuses.

    orjson stops at 255 levels of nesting; ``json`` goes as deep as the interpreter's
    recursion limit allows (the loader reads up to 1,024). Deeper raises ``EncodeError``.
    Lone surrogates are written escaped (``\\xNN``/``\\uNNNN``, see ``escape_value``).
    """
    return encode_checked(entry)[1]


def encode_checked(entry: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    """(the entry as written, its line): the entry is a copy with surrogates escaped when it
    held any, so a caller that encodes it again (the redactor) encodes what was written."""
    try:  # entries.encode, called here directly: one frame less on every append
        return entry, orjson.dumps(entry, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError as exc:
        reason = str(exc)
        if "surrogates" in reason:  # orjson: "str is not valid UTF-8: surrogates not allowed"
            return _escaped(entry)
        if "ecursion" not in reason:
            raise EncodeError(f"an entry cannot be encoded as JSON: {exc}") from exc
    try:
        return entry, _json_line(entry)
    except UnicodeEncodeError:  # deep *and* a lone surrogate
        return _escaped(entry)
    except (RecursionError, ValueError, TypeError) as exc:
        raise _too_deep() from exc


def _escaped(entry: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    safe, _ = escape_value(entry)
    try:
        return safe, orjson.dumps(safe, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError as exc:
        if "ecursion" not in str(exc):
            raise EncodeError(f"an entry cannot be encoded as JSON: {exc}") from exc
    try:
        return safe, _json_line(safe)
    except (RecursionError, ValueError, TypeError) as exc:
        raise _too_deep() from exc


def _json_line(entry: dict[str, Any]) -> bytes:
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def _too_deep() -> EncodeError:
    return EncodeError(
        "an entry is nested too deeply to be written as JSON (tool-call arguments hundreds of levels deep)"
    )


def escape_value(value: Any) -> tuple[Any, int]:
    """``value`` with lone surrogates escaped in every string, keys included; and how many
    strings were changed. Nothing changed: ``value`` itself. Containers become dicts and
    lists (JSON's shapes). A loop, not recursion: tool-call arguments can be thousands of
    levels deep (README "Deep JSON never reaches a recursion limit")."""
    if isinstance(value, str):
        text, escaped = escape_surrogates(value)
        return text, int(escaped)
    if not isinstance(value, (dict, list, tuple)):
        return value, 0
    changed = 0

    def fix(item: Any) -> Any:
        nonlocal changed
        if isinstance(item, str):
            text, hit = escape_surrogates(item)
            changed += hit
            return text
        return item

    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        pairs = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in pairs:
            if isinstance(item, (dict, list, tuple)):
                copy: Any = {} if isinstance(item, dict) else []
                stack.append((item, copy))
                item = copy
            else:
                item = fix(item)
            if isinstance(target, dict):
                target[fix(key)] = item
            else:
                target.append(item)
    return (root, changed) if changed else (value, 0)
