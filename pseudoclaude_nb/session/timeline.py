"""The physical log as a sequence of items, for the timeline view (no UI here).

Every entry in file order — messages by role, tool calls, spills, usage points, replace
markers with their reason — marked as inside or outside the effective window (the last
committed replace and what came after it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from . import safeio
from .entries import (
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
from .loader import load_session, log_path


@dataclass(frozen=True)
class Item:
    line: int
    kind: str  # user | assistant | tool_call | tool_result | spill | usage | replace | compact | rollover | note | bad
    label: str
    detail: str
    effective: bool
    tokens: int = 0  # usage items: prompt total + output
    reason: str = ""  # replace items


@dataclass(frozen=True)
class Timeline:
    session_id: str
    items: list[Item]
    effective_messages: int
    problems: list[str]

    @property
    def usage_curve(self) -> list[tuple[int, int]]:
        """(item index, tokens) of every usage point: the tokens-per-step curve."""
        return [(i, it.tokens) for i, it in enumerate(self.items) if it.kind == "usage"]


def _short(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def build_timeline(path: str | Path) -> Timeline:
    file = log_path(path)
    loaded = load_session(file, full=True)
    items: list[Item] = []
    for lineno, raw in enumerate(safeio.read_bytes(file).split(b"\n"), start=1):
        if not raw.strip():
            continue
        entry = parse_line(raw)
        if entry is None:
            items.append(Item(lineno, "bad", "unreadable line", raw[:2000].decode("utf-8", "replace"), False))
            continue
        items.append(_item(lineno, entry, lineno >= loaded.effective_from_line))
    return Timeline(file.parent.name, items, len(loaded.messages), loaded.problems())


def _count(value: object) -> int:
    """A count read from disk: a non-negative integer below 2**53, else 0 (strings, lists, 1e308…)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0
    if isinstance(value, float) and not (0 <= value < 2**53):
        return 0
    return int(value) if 0 <= value < 2**53 else 0


def _detail(e: dict) -> str:
    try:
        return json.dumps(e, ensure_ascii=False, indent=1)
    except (RecursionError, ValueError):
        return "(an entry nested too deeply to show)"


def _item(lineno: int, entry: Entry, effective: bool) -> Item:
    e = entry.raw
    detail = _detail(e)
    if isinstance(entry, MessageEntry):
        m = entry.message
        if m.tool_result is not None:
            text = m.tool_result.content
            return Item(lineno, "tool_result", f"result {_short(text, 50)}", text, effective)
        if m.tool_calls:
            names = ", ".join(c.name for c in m.tool_calls)
            label = f"calls {names}" + (f" · {_short(m.content, 40)}" if m.content else "")
            return Item(lineno, "tool_call", label, detail, effective)
        label = _short(m.content)
        if m.notebook is not None:  # issue-13: the notebook activity block, by its field
            cells = getattr(m.notebook, "cells", 0)
            label = f"[{cells} notebook cell{'' if cells == 1 else 's'}] " + _short(m.prompt_text)
        return Item(lineno, m.role, label, m.content, effective)
    if isinstance(entry, UsageEntry):
        tokens = sum(
            _count(e.get(k))
            for k in (
                "input_tokens",
                "cache_creation_input_tokens",
                "cache_read_input_tokens",
                "output_tokens",
            )
        )
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
        label = f"compact ({entry.trigger}) {entry.before_tokens} → {entry.after_tokens} {ok}"
        return Item(lineno, "compact", label, detail, effective)
    match entry:
        case RolloverEntry(phase=phase, reason=reason):
            return Item(lineno, "rollover", f"rollover {phase} ({reason})", detail, effective)
    if isinstance(entry, NoteEntry):
        return Item(lineno, "note", f"note: {_short(entry.text, 60)}", detail, effective)
    kind = e.get("type")
    return Item(lineno, str(kind or "unknown"), f"{kind} entry", detail, effective)
