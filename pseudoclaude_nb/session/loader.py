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

Only I/O errors raise, with the path in the message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from ..errors import SessionError
from ..messages import Message, pairing_problems, repair_pairing
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
    effective_from_line: int = 1  # where the effective state begins: the last committed replace
    notes: list[dict[str, Any]] = field(default_factory=list)
    bytes: int = 0

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
        return out


@dataclass
class _Pending:
    replace_id: str
    count: int
    line: int
    messages: list[Message] = field(default_factory=list)


def log_path(path_or_dir: str | Path) -> Path:
    path = Path(path_or_dir)
    return path / LOG_NAME if path.is_dir() else path


def load_session(path: str | Path) -> LoadResult:
    """Load a session directory or its ``conversation.jsonl``."""
    file = log_path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise SessionError(f"cannot read session log {file}: {exc.strerror or exc}") from exc
    result = LoadResult(path=file, bytes=len(data))
    _replay(data, result)
    _settle(result)
    return result


def _replay(data: bytes, r: LoadResult) -> None:
    lines = data.split(b"\n")
    ends_clean = data.endswith(b"\n") or not data
    state: list[Message] = []
    pending: _Pending | None = None
    anchor: tuple[int, int] | None = None
    last_bad: int | None = None
    last = len(lines) - 1

    for index, raw in enumerate(lines):
        if not raw.strip():
            continue
        lineno = index + 1
        try:
            entry = orjson.loads(raw)
        except orjson.JSONDecodeError:
            entry = None
        if not isinstance(entry, dict):
            if index == last and not ends_clean:
                r.torn_tail = True
            else:
                r.bad_lines.append(lineno)
                last_bad = lineno
            continue

        kind = entry.get("type")
        if kind == "note" and entry.get("kind") == TORN_NOTE and last_bad == lineno - 1:
            # The writer marked the line before as a crash's torn tail, now mended.
            r.bad_lines.pop()
            r.torn_tail = True
        last_bad = None

        if pending is not None and (kind != "message" or entry.get("replace_id") != pending.replace_id):
            r.torn_replace, pending = True, None

        ts = entry.get("ts")
        if isinstance(ts, (int, float)):
            r.first_ts = ts if r.first_ts is None else r.first_ts
            r.last_ts = ts

        if kind == "message":
            try:
                msg = message_from_entry(entry)
            except (ValidationError, KeyError, TypeError):
                r.bad_lines.append(lineno)
                continue
            r.physical_messages += 1
            model = entry.get("model")
            if isinstance(model, str) and model:
                r.first_model = r.first_model or model
                r.last_model = model
            if not r.title and msg.role == "user" and msg.content and msg.tool_result is None:
                r.title = msg.text_for_title()[:80]
            rid = entry.get("replace_id")
            if rid is None:
                state.append(msg)
            elif pending is not None and rid == pending.replace_id:
                pending.messages.append(msg)
                if len(pending.messages) == pending.count:
                    r.effective_from_line = pending.line
                    state, pending, anchor = pending.messages, None, None
                    r.replaces += 1
            # else: a snapshot entry of a replace already discarded; ignore it.
        elif kind == "replace":
            count, rid = entry.get("count"), entry.get("replace_id")
            if not isinstance(count, int) or count < 0 or not isinstance(rid, str):
                r.bad_lines.append(lineno)
            elif count == 0:
                state, anchor = [], None
                r.effective_from_line = lineno
                r.replaces += 1
            else:
                pending = _Pending(rid, count, lineno)
        elif kind == "usage":
            anchor = _anchor(entry) or anchor
            model = entry.get("model")
            if isinstance(model, str) and model:
                r.first_model = r.first_model or model
                r.last_model = model
        elif kind == "spill":
            r.spills.append(entry)
        elif kind == "compact":
            r.compacts.append(entry)
        elif kind == "rollover":
            r.rollovers.append(entry)
        elif kind == "note":
            r.notes.append(entry)
        # Unknown types are ignored: forward compatibility.

    if pending is not None:
        r.torn_replace = True
    r.messages = state
    r.usage_anchor = anchor


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
