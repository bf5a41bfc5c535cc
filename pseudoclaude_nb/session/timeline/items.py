"""One log entry as the timeline shows it (``Item``): its kind, a one-line label, its detail.

Read from the log by offset when an entry is shown; the scan (``scan``) uses the
same reading for the lines it parses, so a kind there is the kind shown here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from ...textsafe import printable
from ..entries import (
    CompactEntry,
    Entry,
    MessageEntry,
    NoteEntry,
    ReplaceEntry,
    RolloverEntry,
    SpillEntry,
    UsageEntry,
    parse_line,
)

KINDS = (
    "user",
    "assistant",
    "tool_call",
    "tool_result",
    "spill",
    "usage",
    "replace",
    "compact",
    "rollover",
    "note",
    "bad",
    "unknown",
)
KIND_CODE = {k: i for i, k in enumerate(KINDS)}


@dataclass(frozen=True)
class Item:
    line: int
    kind: str  # user | assistant | tool_call | tool_result | spill | usage | replace | compact | rollover | note | bad
    label: str
    detail: str
    effective: bool
    tokens: int = 0  # usage items: prompt total + output
    reason: str = ""  # replace items
    images: int = 0  # issue-14: image parts of a message

    def __post_init__(self) -> None:
        # Shown in a terminal as they are (the list, a saved notebook's text form): a log
        # from a cloned repository must not move the cursor or set the clipboard.
        object.__setattr__(self, "label", printable(self.label, one_line=True))
        object.__setattr__(self, "kind", printable(self.kind, one_line=True))


def _short(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def parse_item(lineno: int, raw: bytes, effective: bool, detail: bool = True) -> Item:
    entry = parse_line(raw)
    if entry is None:
        return Item(lineno, "bad", "unreadable line", raw[:2000].decode("utf-8", "replace"), False)
    return entry_item(lineno, entry, effective, with_detail=detail)


def _count(value: object) -> int:
    """A count read from disk: a non-negative integer below 2**53, else 0 (strings, lists, 1e308…)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float) and not (0 <= value < 2**53):
        return 0
    return int(value) if 0 <= value < 2**53 else 0


def _detail(e: dict[str, Any]) -> str:
    try:
        return json.dumps(e, ensure_ascii=False, indent=1)
    except (RecursionError, ValueError):
        return "(an entry nested too deeply to show)"


class _Plain:
    """A plainly valid message entry (``entries.plainly_valid``: no notebook mark, no image
    parts, each field of exactly its type) read as ``entry_item`` reads a ``Message``, without
    validating it: a page of entries is labelled without building a model per line."""

    parts = ()
    notebook = None

    def __init__(self, raw: dict[str, Any]) -> None:
        self.role = raw["role"]
        self.content = self.prompt_text = raw.get("content", "")
        result = raw.get("tool_result")
        self.tool_result = SimpleNamespace(content=result["content"]) if result is not None else None
        self.tool_calls = [SimpleNamespace(name=c["name"]) for c in raw.get("tool_calls", ())]


def entry_item(lineno: int, entry: Entry, effective: bool, *, with_detail: bool = True) -> Item:
    e = entry.raw
    detail = _detail(e) if with_detail else ""
    if isinstance(entry, MessageEntry):
        m = entry.parsed if entry.parsed is not None else _Plain(e)
        pictures = len(m.parts)
        shown = f" · {pictures} image{'s' if pictures > 1 else ''}" if pictures else ""
        if m.tool_result is not None:
            text = m.tool_result.content
            label = f"result {_short(text, 50)}{shown}"
            return Item(lineno, "tool_result", label, text, effective, images=pictures)
        if m.tool_calls:
            names = ", ".join(c.name for c in m.tool_calls)
            label = f"calls {names}" + (f" · {_short(m.content, 40)}" if m.content else "")
            return Item(lineno, "tool_call", label, detail, effective)
        label = _short(m.content)
        if m.notebook is not None:  # issue-13: the notebook activity block, by its field
            cells = getattr(m.notebook, "cells", 0)
            label = f"[{cells} notebook cell{'' if cells == 1 else 's'}] " + _short(m.prompt_text)
        return Item(lineno, m.role, label + shown, m.content, effective, images=pictures)
    if isinstance(entry, UsageEntry):
        tokens = usage_tokens(e)
        return Item(lineno, "usage", f"usage {tokens:,} tokens", detail, effective, tokens=tokens)
    if isinstance(entry, ReplaceEntry):
        return Item(
            lineno,
            "replace",
            f"replace ({entry.reason}), {entry.count} messages",
            detail,
            effective,
            reason=entry.reason,
        )
    if isinstance(entry, SpillEntry):
        return Item(lineno, "spill", f"spill {entry.tool} {entry.bytes:,} bytes", detail, effective)
    if isinstance(entry, CompactEntry):
        ok = "ok" if entry.ok else f"failed: {entry.error}"
        before, after = (
            f"{n:,}" if isinstance(n, int) else "?" for n in (entry.before_tokens, entry.after_tokens)
        )
        label = f"compact ({entry.trigger}) {before} → {after} tokens, {ok}"  # as %context writes it
        return Item(lineno, "compact", label, detail, effective)
    match entry:
        case RolloverEntry(phase=phase, reason=reason):
            return Item(lineno, "rollover", f"rollover {phase} ({reason})", detail, effective)
    if isinstance(entry, NoteEntry):
        return Item(lineno, "note", f"note: {_short(entry.text, 60)}", detail, effective)
    kind = e.get("type")
    return Item(lineno, str(kind or "unknown"), f"{kind} entry", detail, effective)


def usage_tokens(e: dict[str, Any]) -> int:
    """A usage entry's prompt total plus output, each count read within sense (``_count``)."""
    total = 0
    for key in _TOKEN_KEYS:
        value = e.get(key)
        total += value if type(value) is int and 0 <= value < 2**53 else _count(value)
    return total


_TOKEN_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
