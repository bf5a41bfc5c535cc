"""How the request of a step reads: text for a terminal, an HTML table for a notebook.

Pure rendering of ``session.steps`` results, shared by ``%context --at/--diff`` and the
timeline's step scrubber (``widgets.steps``); it lives here, below both, so neither imports
the other. Everything read from the log goes through ``textsafe.printable`` (and
``html.escape`` for HTML): a crafted message must not drive the reader's terminal.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from ..context.estimate import estimate_text
from ..messages import Message
from ..session.steps import Row, StepDiff, StepRequest
from ..textsafe import printable
from .theme import FG2

PREVIEW = 80  # characters of a message's one-line preview
LISTED = 20  # rows of each kind a diff lists before "… N more"
EDGE = 100  # a request of more than 2 * EDGE messages shows its first and last EDGE (totals count all)
NOW_PARTS = (("system", "system prompt"), ("memory", "memory index"), ("tool_schemas", "tool schemas"))


# --- one line per message ----------------------------------------------------------------------


def preview(m: Message, width: int = PREVIEW) -> str:
    """The message in one escaped line of at most ``width`` characters (plus "…")."""
    if m.tool_result is not None:
        body = m.tool_result.content
    else:
        body = m.content
        if m.notebook is not None:
            body = body[m.notebook.chars :]  # the prompt; the block is its own part
        if m.tool_calls:
            calls = ", ".join(c.name for c in m.tool_calls)
            body = (body + " " if body else "") + f"⇢ {calls}"
    return printable(_cut(" ".join(body.split()), width), one_line=True)


def _cut(text: str, width: int = PREVIEW) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _part(row: Row) -> str:
    part = printable(row.part, one_line=True)
    return f"{part} [{printable(row.origin, one_line=True)}]" if row.origin else part


def _row_line(row: Row) -> str:
    return f"  {row.index:>4}  {printable(row.message.role, one_line=True):<9} {_part(row):<34} {row.tokens:>7,}  {preview(row.message)}"


def _history(req: StepRequest) -> list[str]:
    """What had been spilled, summarized or rolled over by this request."""
    reasons: dict[str, int] = {}
    for marker in req.replaces:
        reasons[marker.reason] = reasons.get(marker.reason, 0) + 1
    replaces = ", ".join(f"{printable(r, one_line=True)} ×{n}" for r, n in reasons.items()) or "none"
    ok = sum(1 for c in req.compactions if c.ok)
    failed = len(req.compactions) - ok
    out = [
        f"by then: {len(req.replaces)} replaces ({replaces}) · {req.spills} spilled results · "
        f"{ok} compactions" + (f" (+{failed} failed)" if failed else "") + f" · {req.rollovers} rollovers"
    ]
    for marker in req.replaces:
        if marker.reason == "fork":
            src = printable(str(marker.fields.get("source_session", "?")), one_line=True)
            out.append(f"  forked from session {src} at step {marker.fields.get('source_step', '?')}")
    if req.pins:
        tokens = sum(estimate_text(str(p.get("text", ""))) for p in req.pins)
        out.append(
            f"pins in force: {len(req.pins)} (~{tokens:,} tokens of pinned text, sent with the system prompt)"
        )
        out.extend(
            f"  [{n}] {printable(_cut(' '.join(str(p.get('text', '')).split())), one_line=True)}"
            for n, p in enumerate(req.pins, 1)
        )
    return out


def _now_line(now: dict[str, int] | None) -> str:
    head = "not in the log: the system prompt and tool schemas this request carried"
    if now is None:
        return head + " (today's are unknown: no provider is configured)"
    parts = ", ".join(f"{label} ~{now[key]:,}" for key, label in NOW_PARTS)
    return f"{head}; NOW (today's, not that request's): {parts} tokens"


def render_request(req: StepRequest, now: dict[str, int] | None = None) -> str:
    lines = [
        f"step {req.step.number} of {req.steps} · session {printable(req.session_id, one_line=True)} · "
        "the request the model received, read from the log",
        f"  {'#':>4}  {'role':<9} {'part [brought by]':<34} {'tokens':>7}  preview",
        *(_row_line(row) if row else _gap(req) for row in _shown(req.rows)),
        f"  {len(req.rows)} messages · ~{req.tokens:,} tokens estimated (bytes/3.5)"
        + (f" · provider measured {req.step.tokens:,} (prompt + output)" if req.step.tokens else ""),
        *_history(req),
        _now_line(now),
    ]
    lines.extend(f"! {printable(p, one_line=True)}" for p in req.problems)
    return "\n".join(lines)


def _cells(row: Row) -> str:
    cells = (
        str(row.index),
        printable(row.message.role, one_line=True),
        _part(row),
        f"{row.tokens:,}",
        preview(row.message),
    )
    return "".join(
        f"<td style='text-align:{'right' if i in (0, 3) else 'left'}'>{html.escape(c)}</td>"
        for i, c in enumerate(cells)
    )


def _shown(rows: Sequence[Row]) -> list[Row | None]:
    """The rows to show; ``None`` where the middle of a long request is left out (its rows
    are never made: ``session.steps.Rows`` builds a row when it is read)."""
    if len(rows) <= 2 * EDGE:
        return list(rows)
    return [*rows[:EDGE], None, *rows[-EDGE:]]


def _gap(req: StepRequest) -> str:
    return f"        … {len(req.rows) - 2 * EDGE:,} more messages (counted in the totals)"


def _table(rows: Iterable[Row | None]) -> str:
    body = "".join(
        f"<tr>{_cells(row)}</tr>"
        if row
        else "<tr><td colspan='5'>… more messages (counted in the totals)</td></tr>"
        for row in rows
    )
    return (
        "<table style='font-size:90%'><tr><th>#</th><th>role</th><th>part [brought by]</th>"
        f"<th>tokens</th><th>preview</th></tr>{body}</table>"
    )


def request_html(req: StepRequest, now: dict[str, int] | None = None) -> str:
    head = html.escape(
        f"step {req.step.number} of {req.steps} · session {printable(req.session_id, one_line=True)}"
    )
    total = f"{len(req.rows)} messages · ~{req.tokens:,} tokens estimated (bytes/3.5)"
    if req.step.tokens:
        total += f" · provider measured {req.step.tokens:,} (prompt + output)"
    notes = [*_history(req), _now_line(now), *(f"! {printable(p, one_line=True)}" for p in req.problems)]
    return (
        f"<div class='pc-context-step'><b>{head}</b>: the request the model received, read from the log"
        f"{_table(_shown(req.rows))}<div>{html.escape(total)}</div>"
        + "".join(f"<div style='font-size:85%;color:{FG2}'>{html.escape(n)}</div>" for n in notes)
        + "</div>"
    )


# --- the diff ------------------------------------------------------------------------------------


def _tokens(rows: Iterable[Row]) -> int:
    return sum(r.tokens for r in rows)


def _listed(rows: list[Row]) -> list[str]:
    out = [_row_line(r) for r in rows[:LISTED]]
    if len(rows) > LISTED:
        out.append(f"        … {len(rows) - LISTED} more")
    return out


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _diff_sections(d: StepDiff) -> list[tuple[str, list[Row]]]:
    """Removed and added always; a spill's cuts and other changes when there are any."""
    sections = [
        (f"removed: {_plural(len(d.removed), 'message')}, ~{_tokens(d.removed):,} tokens", d.removed),
        (f"added: {_plural(len(d.added), 'message')}, ~{_tokens(d.added):,} tokens", d.added),
    ]
    if d.cut:
        sections.append(
            (
                f"cut by a spill: {_plural(len(d.cut), 'result')}, ~{_tokens(a for a, _ in d.cut):,} → "
                f"~{_tokens(b for _, b in d.cut):,} tokens",
                [b for _, b in d.cut],
            )
        )
    if d.changed:
        sections.append(
            (
                f"changed: {_plural(len(d.changed), 'message')} (same id, other content)",
                [b for _, b in d.changed],
            )
        )
    return sections


def _diff_head(d: StepDiff) -> list[str]:
    a, b = d.a, d.b
    lines = [
        f"step {a.step.number} → step {b.step.number} · session {printable(b.session_id, one_line=True)} "
        f"(of {b.steps} steps; messages matched by id)",
        f"  {len(a.rows)} messages ~{a.tokens:,} tokens → {len(b.rows)} messages ~{b.tokens:,} tokens",
    ]
    reasons = ", ".join(printable(m.reason, one_line=True) for m in d.replaces)
    lines.append(f"  replaces in between: {len(d.replaces)}" + (f" ({reasons})" if reasons else ""))
    for c in d.compactions:
        what = "ok" if c.ok else printable(f"failed ({c.error})", one_line=True)
        before = f"{c.before_tokens:,}" if c.before_tokens is not None else "?"
        after = f"{c.after_tokens:,}" if c.after_tokens is not None else "?"
        lines.append(f"  compaction ({printable(c.trigger, one_line=True)}): {before} → {after}, {what}")
    return lines


def render_diff(d: StepDiff) -> str:
    lines = _diff_head(d)
    for title, rows in _diff_sections(d):
        lines.append(title)
        lines.extend(_listed(rows))
    return "\n".join(lines)


def diff_html(d: StepDiff) -> str:
    head, *rest = _diff_head(d)
    parts = [f"<div class='pc-context-diff'><b>{html.escape(head)}</b>"]
    parts.extend(f"<div>{html.escape(line)}</div>" for line in rest)
    for title, rows in _diff_sections(d):
        parts.append(f"<div><b>{html.escape(title)}</b></div>")
        if rows:
            parts.append(_table(rows[:LISTED]))
            if len(rows) > LISTED:
                parts.append(f"<div>… {len(rows) - LISTED} more</div>")
    parts.append("</div>")
    return "".join(parts)
