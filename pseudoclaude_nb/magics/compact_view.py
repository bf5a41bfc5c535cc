"""What ``%compact`` shows of a change it has not made (``--preview``: a summary, or a
strategy's drop), of one it made, and of one it took back (``--undo``): a table and the
summary in a notebook, aligned text in a terminal."""

from __future__ import annotations

import html
import time

from ..context.plan import DropPlan, Plan, Preview
from ..context.undo import Undone
from ..events import Compacted, Dropped, Notice, RolloverCommitted
from ..textsafe import printable
from ..widgets.theme import FG2
from .tables import TABLE_STYLE

DROP_NEXT = "%compact --apply takes them out (they stay in the log); %compact --undo puts them back"
PREVIEW_NEXT = (
    "%compact --apply commits this summary as it is, %compact --apply --edit PATH your own text "
    "instead; %compact --preview asks for a new one"
)


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def preview_rows(plan: Preview, lost: int = 0) -> list[tuple[str, str]]:
    if isinstance(plan, DropPlan):
        widened = (
            f" (with {plural(len(plan.widened), 'message')} to keep tool calls whole)" if plan.widened else ""
        )
        rows = [
            ("drop", f"{plural(len(plan.dropped), 'message')}{widened}"),
            ("keep", plural(len(plan.new), "message")),
            ("estimate", f"~{plan.before:,} → ~{plan.after:,} tokens"),
        ]
    else:
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


def preview_text(plan: Preview, lost: int = 0) -> str:
    """The preview for a terminal; the summary (the model's text) with control characters escaped."""
    lines = [f"{_what(plan)} preview (nothing was written):"]
    lines += [f"  {label:<20}{value}" for label, value in preview_rows(plan, lost)]
    if isinstance(plan, DropPlan):
        lines.append(f"  {DROP_NEXT}")
        return printable("\n".join(lines))
    if plan.summary is not None:
        lines.append("  summary:")
        lines += [f"    {row}" for row in plan.summary.strip().splitlines()]
    if plan.new is None:
        lines.append(f"  would not compact: {plan.error}")
    else:
        lines.append(f"  {PREVIEW_NEXT}")
    return printable("\n".join(lines))


def preview_html(plan: Preview, lost: int = 0) -> str:
    rows = "".join(
        f"<tr><td style='text-align:left'>{html.escape(label)}</td><td style='text-align:left'>{html.escape(value)}</td></tr>"
        for label, value in preview_rows(plan, lost)
    )
    summary = (
        f"<pre style='white-space:pre-wrap;font-size:90%'>{html.escape(plan.summary.strip())}</pre>"
        if isinstance(plan, Plan) and plan.summary is not None
        else ""
    )
    if isinstance(plan, DropPlan):
        outcome = DROP_NEXT
    else:
        outcome = PREVIEW_NEXT if plan.new is not None else f"would not compact: {plan.error}"
    return (
        f"<div class='pc-compact-preview'><b>{html.escape(_what(plan))} preview</b> (nothing was written)"
        f"<table style='{TABLE_STYLE}'>{rows}</table>{summary}"
        f"<div style='font-size:85%;color:{FG2}'>{html.escape(outcome)}</div></div>"
    )


def _what(plan: Preview) -> str:
    return f"{plan.strategy} drop" if isinstance(plan, DropPlan) else "compaction"


def outcome_text(result: object, strategy: str) -> str:
    """What ``%compact`` did, in a line: the strategy's answer to it, applied."""
    if isinstance(result, Compacted):
        if result.ok:
            return f"compacted: ~{result.before_tokens:,} → ~{result.after_tokens:,} tokens"
        return printable(f"compaction failed: {result.error}; nothing was replaced")
    if isinstance(result, Dropped):
        return f"dropped {plural(result.messages, 'message')} ({strategy}): ~{result.before_tokens:,} → ~{result.after_tokens:,} tokens"
    if isinstance(result, RolloverCommitted):
        return f"rolled over to a new window: ~{result.before_tokens:,} → ~{result.after_tokens:,} tokens"
    if isinstance(result, int):
        return f"spilled {plural(result, 'tool result')} to files ({strategy})"
    if isinstance(result, Notice):
        return printable(f"{strategy}: {result.text}")
    return f"strategy {strategy} kept the context as it is: nothing was replaced"


def undone_text(done: Undone) -> str:
    what = {"compact": "compaction", "rollover": "rollover", "drop": "drop"}.get(done.reason, done.reason)
    kept = {"compaction": "summary", "rollover": "handoff"}.get(what, what)  # a drop's bytes: the drop's
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(done.ts)) if done.ts else "unknown time"
    dropped = (
        f"; {plural(done.dropped, 'message')} added since left out (still in the log and %sessions search)"
        if done.dropped
        else ""
    )
    return (
        f"undid the {what} of {when}: ~{done.before_tokens:,} → ~{done.after_tokens:,} tokens "
        f"({plural(done.restored, 'message')} restored{dropped}); the log keeps the undone "
        f"{kept}'s bytes (it is append-only: an undo adds a replace and deletes nothing)"
    )
