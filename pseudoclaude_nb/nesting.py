"""How deep JSON nests, measured without recursion.

Python's ``json`` recurses once per level and raises ``RecursionError`` near the
interpreter's limit (about 1,000); orjson stops at 255 (encode) or 1,024 (decode). What
comes from outside is refused past a limit with a clear error: a model's tool-call arguments
after ``json`` parsed them (``value_depth``; its ``RecursionError`` is caught), an import
manifest before it is parsed (``text_nesting``). What is already in memory (a message built
by hand, a log an older version wrote) is sized by ``encoded_size``, at any depth.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

# Deeper tool-call arguments are refused where they arrive (providers): no tool schema
# nests anywhere near this, and every reader and encoder of the package stays far from
# its recursion limit below it.
MAX_ARGUMENT_DEPTH = 100

_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(rb"[\[\]{}]")


def text_nesting(data: bytes | str) -> int:
    """How deep ``[``/``{`` nest in JSON text, outside strings (strings skipped in C)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_JSON_STRING.sub(b"", raw)):
        if bracket in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def value_depth(value: Any, stop: int | None = None) -> int:
    """How deep lists and dicts nest in ``value`` (a scalar is 0), in a loop; past ``stop``
    it returns as soon as it knows the depth is over it (``stop + 1``)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if stop is not None and deepest > stop:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def encoded_size(value: Any) -> int:
    """The UTF-8 length of ``json.dumps(value, ensure_ascii=False)``, at any depth.

    ``json.dumps`` itself when it can; past its recursion limit an iterative walk that
    gives the same count for JSON values (and ``str()`` for anything else).
    """
    try:
        return len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    except (RecursionError, ValueError, TypeError):
        pass
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            total += 2 + 2 * max(0, len(item) - 1)  # the braces, ", " between items
            for key, inner in item.items():
                total += _scalar_size(key if isinstance(key, str) else str(key)) + 2  # and ": "
                stack.append(inner)
        elif isinstance(item, (list, tuple)):
            total += 2 + 2 * max(0, len(item) - 1)
            stack.extend(item)
        else:
            total += _scalar_size(item)
    return total


def _scalar_size(item: Any) -> int:
    try:
        return len(json.dumps(item, ensure_ascii=False).encode("utf-8"))
    except (ValueError, TypeError):
        return len(str(item).encode("utf-8", "replace"))
