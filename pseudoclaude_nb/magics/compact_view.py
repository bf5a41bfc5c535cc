"""What ``%compact`` shows of a compaction it has not made (``--preview``) and of one it took
back (``--undo``): a table and the summary in a notebook, aligned text in a terminal."""

from __future__ import annotations

import html
import time

from ..context.layer2 import Plan
from ..context.undo import Undone
from ..textsafe import printable
from ..widgets.theme import FG2
from .tables import TABLE_STYLE

PREVIEW_NEXT = (
    "%compact --apply commits this summary as it is, %compact --apply --edit PATH your own text "
    "instead; %compact --preview asks for a new one"
)


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def preview_rows(plan: Plan, lost: int = 0) -> list[tuple[str, str]]:
    rows = [
        ("summarize", f"{plural(plan.head, 'message')}, ~{plan.head_tokens:,} tokens"),
        ("keep (recent tail)", f"{plural(plan.tail, 'message')}, ~{plan.tail_tokens:,} tokens"),
        ("estimate", f"~{plan.before:,} → ~{plan.after:,} tokens"),
    ]
    if lost:
        rows.append(
            ("prompt cache", f"invalidates ~{lost:,} cached tokens (system prompt and tools stay cached)")
        )
    return rows


def preview_text(plan: Plan, lost: int = 0) -> str:
    """The preview for a terminal; the summary (the model's text) with control characters escaped."""
    lines = ["compaction preview (nothing was written):"]
    lines += [f"  {label:<20}{value}" for label, value in preview_rows(plan, lost)]
    if plan.summary is not None:
        lines.append("  summary:")
        lines += [f"    {row}" for row in plan.summary.strip().splitlines()]
    if plan.new is None:
        lines.append(f"  would not compact: {plan.error}")
    else:
        lines.append(f"  {PREVIEW_NEXT}")
    return printable("\n".join(lines))


def preview_html(plan: Plan, lost: int = 0) -> str:
    rows = "".join(
        f"<tr><td style='text-align:left'>{html.escape(label)}</td><td style='text-align:left'>{html.escape(value)}</td></tr>"
        for label, value in preview_rows(plan, lost)
    )
    summary = (
        f"<pre style='white-space:pre-wrap;font-size:90%'>{html.escape(plan.summary.strip())}</pre>"
        if plan.summary is not None
        else ""
    )
    outcome = PREVIEW_NEXT if plan.new is not None else f"would not compact: {plan.error}"
    return (
        "<div class='pc-compact-preview'><b>compaction preview</b> (nothing was written)"
        f"<table style='{TABLE_STYLE}'>{rows}</table>{summary}"
        f"<div style='font-size:85%;color:{FG2}'>{html.escape(outcome)}</div></div>"
    )


def undone_text(done: Undone) -> str:
    what = "compaction" if done.reason == "compact" else "rollover"
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(done.ts)) if done.ts else "unknown time"
    dropped = (
        f"; {plural(done.dropped, 'message')} added since left out (still in the log and %sessions search)"
        if done.dropped
        else ""
    )
    return (
        f"undid the {what} of {when}: ~{done.before_tokens:,} → ~{done.after_tokens:,} tokens "
        f"({plural(done.restored, 'message')} restored{dropped}); the log keeps the undone "
        f"{'summary' if what == 'compaction' else 'handoff'}'s bytes (it is append-only: an undo "
        "adds a replace and deletes nothing)"
    )
