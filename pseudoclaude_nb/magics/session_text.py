"""How sessions read as text in ``%sessions``: sizes, times, titles, statuses, message lines.

Pure formatting, no I/O (a bad ``--limit``/``--tail`` pair is a ``UsageError``);
``magics.sessions`` shows what these return. Everything read from a log or a sidecar goes
through ``safe_line`` or ``_title`` (``textsafe.printable``): a cloned session's title of
terminal escapes (OSC 52 sets the clipboard, ``ESC[2J`` clears the screen) prints as text.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING

from IPython.core.error import UsageError

from ..textsafe import printable

if TYPE_CHECKING:  # only read here: %sessions list must not import pydantic's models (issue 34)
    from ..messages import Message

SHOW_EDGE = 20  # without --limit/--tail, a long conversation shows its first and last 20 messages
TITLE_WIDTH = 60


def _window(total: int, *, limit: int | None, tail: int | None) -> list[int | None]:
    """Indexes of the messages to print; ``None`` where some are left out."""
    if limit is not None and tail is not None:
        raise UsageError("use --limit N (the first N messages) or --tail N (the last N), not both")
    if limit is not None:
        return list(range(min(limit, total))) + ([None] if limit < total else [])
    if tail is not None:
        return ([None] if tail < total else []) + list(range(max(total - tail, 0), total))
    if total <= 2 * SHOW_EDGE + 1:
        return list(range(total))
    return [*range(SHOW_EDGE), None, *range(total - SHOW_EDGE, total)]


def safe_line(text: object) -> str:
    """A name or a line from disk (an id, a model, a problem) as one printable line."""
    return printable(str(text), one_line=True)


def _title(title: str, width: int = TITLE_WIDTH) -> str:
    """A title that fits the column, cut at a word boundary, its control characters escaped."""
    title = safe_line(" ".join(title.split()))
    if len(title) <= width:
        return title
    cut = title[: width - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > width // 2 else cut).rstrip(" ,.;:") + "…"


def _status(status: str, current: bool) -> str:
    # "open" means a writer holds the lock: this kernel's own session, or one in use elsewhere.
    if status == "open":
        return "current" if current else "in use"
    return status


def _relative(path: Path, workspace: Path) -> str:
    """A path inside the workspace as the reader sees it from the notebook: relative."""
    try:
        return str(path.relative_to(workspace))
    except ValueError:
        return str(path)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _when(ts: float) -> str:
    try:
        return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "?"
    except (OverflowError, ValueError, OSError):  # a time read from disk no calendar holds
        return "?"


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def message_cells(i: int, m: Message, width: int = 100) -> tuple[str, str, str]:
    """A message as a row of ``%sessions show``: its number, role and first ``width`` characters."""
    if m.tool_result is not None:
        flag = " error" if m.tool_result.is_error else ""
        body = f"tool result{flag} [{m.tool_result.call_id}] {len(m.tool_result.content):,} chars: {m.tool_result.content}"
    else:
        body = m.content
        if m.tool_calls:
            calls = ", ".join(c.name for c in m.tool_calls)
            body = (body + " " if body else "") + f"⇢ calls {calls}"
    body = safe_line(" ".join(body.split()))
    if len(body) > width:
        body = body[: width - 1] + "…"
    return str(i), safe_line(m.role), body


# The tools that change the open notebook (SPEC §20): %sessions show lists what they did.
NOTEBOOK_CHANGES = ("insert_cell", "edit_cell", "delete_cell", "run_cell")


def notebook_changes(messages: list[tuple[int, Message]]) -> str | None:
    """The agent's changes to the notebook among the numbered ``messages`` shown, as one line,
    each with its message number and whether it was made (``None`` when there were none)."""
    outcome = {
        m.tool_result.call_id: m.tool_result.is_error for _, m in messages if m.tool_result is not None
    }
    made: list[str] = []
    for i, m in messages:
        for call in m.tool_calls:
            if call.name in NOTEBOOK_CHANGES:
                index = call.arguments.get("index")
                what = f"#{i} {call.name}({index if isinstance(index, int) else '?'})"
                made.append(what + (" refused" if outcome.get(call.id) else ""))
    if not made:
        return None
    return f"notebook changes ({len(made)}): " + " · ".join(made)
