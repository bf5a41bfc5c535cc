"""The physical log as a sequence of items, for the timeline view (no UI here).

Every entry in file order — messages by role, tool calls, spills, usage points, replace
markers with their reason — marked as inside or outside the effective window (the last
committed replace and what came after it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import orjson

from . import safeio
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
    images: int = 0  # issue-14: image parts of a message


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
        effective = lineno >= loaded.effective_from_line
        try:
            e = orjson.loads(raw)
        except orjson.JSONDecodeError:
            e = None
        if not isinstance(e, dict):
            items.append(Item(lineno, "bad", "unreadable line", raw[:2000].decode("utf-8", "replace"), False))
            continue
        items.append(_item(lineno, e, effective))
    return Timeline(file.parent.name, items, len(loaded.messages), loaded.problems())


def _item(lineno: int, e: dict, effective: bool) -> Item:
    kind = e.get("type")
    detail = json.dumps(e, ensure_ascii=False, indent=1)
    if kind == "message":
        result = e.get("tool_result")
        parts = e.get("parts")
        pictures = sum(1 for p in parts if isinstance(p, dict) and p.get("type") == "image") if isinstance(parts, list) else 0
        shown = f" · {pictures} image{'s' if pictures > 1 else ''}" if pictures else ""
        if isinstance(result, dict):
            text = str(result.get("content", ""))
            return Item(lineno, "tool_result", f"result {_short(text, 50)}{shown}", text, effective, images=pictures)
        calls = e.get("tool_calls") or []
        content = str(e.get("content") or "")
        if calls:
            names = ", ".join(str(c.get("name")) for c in calls if isinstance(c, dict))
            label = f"calls {names}" + (f" · {_short(content, 40)}" if content else "")
            return Item(lineno, "tool_call", label, detail, effective)
        role = "user" if e.get("role") == "user" else "assistant"
        return Item(lineno, role, _short(content) + shown, content, effective, images=pictures)
    if kind == "usage":
        tokens = sum(
            int(e.get(k) or 0)
            for k in (
                "input_tokens",
                "cache_creation_input_tokens",
                "cache_read_input_tokens",
                "output_tokens",
            )
        )
        return Item(lineno, "usage", f"usage {tokens:,} tokens", detail, effective, tokens=tokens)
    if kind == "replace":
        reason = str(e.get("reason") or "")
        return Item(
            lineno,
            "replace",
            f"replace ({reason}), {e.get('count')} messages",
            detail,
            effective,
            reason=reason,
        )
    if kind == "spill":
        return Item(
            lineno, "spill", f"spill {e.get('tool')} {int(e.get('bytes') or 0):,} bytes", detail, effective
        )
    if kind == "compact":
        ok = "ok" if e.get("ok") else f"failed: {e.get('error')}"
        label = f"compact ({e.get('trigger')}) {e.get('before_tokens')} → {e.get('after_tokens')} {ok}"
        return Item(lineno, "compact", label, detail, effective)
    if kind == "rollover":
        return Item(lineno, "rollover", f"rollover {e.get('phase')} ({e.get('reason')})", detail, effective)
    if kind == "note":
        return Item(lineno, "note", f"note: {_short(str(e.get('text') or ''), 60)}", detail, effective)
    return Item(lineno, str(kind or "unknown"), f"{kind} entry", detail, effective)
