"""Bounds on what a provider hands back about its own management of the context (issue 41).

Under ``--strategy api`` the provider returns a block that must go back verbatim on every
later request — Anthropic's ``compaction`` block today (``providers.anthropic_stream``), an
OpenAI Responses compaction item next — and its shape is the server's choice: a block nested
900 deep ended ``%agent`` with a raw ``TypeError`` (orjson's recursion limit) after the answer
had been paid for, and a 20 MB block was kept and would have gone back with every request.

So every such block is kept only within these bounds, the same for every provider:

- ``MAX_DEPTH``: nesting of objects and arrays (a real block is two or three deep);
- ``MAX_BYTES``: its JSON text (a real summary is a few thousand tokens; 1 MiB is ~300,000).

``kept_json`` checks a block as parsed from the wire and returns the JSON text to keep, or
raises ``OutOfBounds`` saying which bound; ``loaded`` reads one back (from a log, which a
cloned workspace may have written) under the same bounds; ``readable_text`` is the part a
person can read (the summary), for search and for a request that cannot take the block. A
provider that refuses a block keeps the answer it came with and sets ``refused_block`` (a
one-line reason: ``providers.base.RefusesBlocks``) for the context host to raise after the
answer is in the conversation (``context.provider_compaction.refusal``). Only the standard library and orjson: the history index imports this.
"""

from __future__ import annotations

from typing import Any

import orjson

MAX_DEPTH = 32
MAX_BYTES = 1 << 20
# The fields a person can read, in the order they are looked for (Anthropic: "content").
READABLE_FIELDS = ("content", "summary", "text")


class OutOfBounds(ValueError):
    """A provider's block past ``MAX_DEPTH`` or ``MAX_BYTES``; the message says which and by how much."""


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep ``value`` nests (a scalar is 0), counted without recursion and only up to
    ``limit + 1`` (a deeper value is not walked further)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        level += 1
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        stack.extend((child, level) for child in children)
    return deepest


def kept_json(value: Any, *, what: str = "the provider's compaction block") -> str:
    """``value``'s JSON text to keep verbatim; ``OutOfBounds`` when it is too deep or too big."""
    found = depth(value)
    if found > MAX_DEPTH:
        raise OutOfBounds(f"{what} nests more than {MAX_DEPTH} levels deep (at least {found})")
    try:
        text = orjson.dumps(value)
    except orjson.JSONEncodeError as exc:  # e.g. an integer past 64 bits
        raise OutOfBounds(f"{what} is not JSON this package can keep ({exc})") from None
    if len(text) > MAX_BYTES:
        raise OutOfBounds(f"{what} is {len(text):,} bytes (at most {MAX_BYTES:,} are kept)")
    return text.decode()


def loaded(data: str | None) -> dict[str, Any] | None:
    """A kept block read back (from a log: a workspace may have written it), or None when it
    is not a JSON object within the bounds."""
    if not data or len(data) > MAX_BYTES:
        return None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or depth(value) > MAX_DEPTH:
        return None
    return value


def readable_text(data: str | None) -> str | None:
    """The readable part of a kept block (its summary), or None when it has none."""
    block = loaded(data)
    if block is None:
        return None
    for name in READABLE_FIELDS:
        text = block.get(name)
        if isinstance(text, str) and text.strip():
            return text
    return None


def megabytes(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MB"


def too_big(n: int, what: str = "compaction item") -> str | None:
    """Why a provider's opaque part of ``n`` bytes (an OpenAI compaction item: encrypted, so
    neither its depth nor its text can be checked) is not kept; None: it is."""
    if n <= MAX_BYTES:
        return None
    return (
        f"the provider's {what} was {megabytes(n)}, over the {megabytes(MAX_BYTES)} kept "
        "(provider_blocks.MAX_BYTES); it was not kept, so the conversation goes on uncompacted — "
        "the answer and its cost are kept"
    )
