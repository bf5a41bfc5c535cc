"""The notebook's face of ``confirm_compaction``: the plan drawn as HTML, the answer read by ``input``.

A kernel runs one cell at a time and blocks while ``%agent`` runs, so widget button clicks
would only arrive after the run (comm messages are not processed mid-cell). ``input``
is the channel a frontend does answer mid-cell (ipykernel's stdin request, the same box
the permission prompt uses), so the answer is read there; this module only draws the plan
above it. It asks nothing of the core beyond the ``Ask`` callback it returns.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from IPython.display import display

from ..context.confirm import Ask, Proposal, describe, text_ask
from ..textsafe import printable
from .theme import BORDER, BRAND, FG1, FG2, MONO


def proposal_html(p: Proposal) -> str:
    """The plan: what is replaced, what is kept, before → after, and the text to approve or edit."""
    if p.kind == "compact":
        title = f"Layer 2 compaction ({p.trigger}) — your answer is asked below"
        facts = (
            f"{p.replaced} messages (~{p.replaced_tokens:,} tokens) become the summary; the recent tail of "
            f"{p.kept} messages (~{p.kept_tokens:,} tokens) is kept verbatim"
        )
        label = "summary"
    elif p.kind == "drop":
        title = f"A strategy's drop ({p.trigger}) — your answer is asked below"
        facts = (
            f"{p.replaced} messages (~{p.replaced_tokens:,} tokens) leave the conversation (they stay in "
            f"the log); {p.kept} stay"
        )
        label = "messages dropped"
    else:
        title = f"Rollover ({p.trigger}) — your answer is asked below"
        facts = (
            f"the window of {p.replaced} messages becomes one message: the original request, this "
            "handoff and the related files"
        )
        label = "handoff"
    text = html.escape(printable(p.text))
    return (
        f"<div style='color:{FG1};border-left:3px solid {BRAND};padding-left:8px;margin:4px 0'>"
        f"<div style='font-weight:600'>{html.escape(title)}</div>"
        f"<div style='color:{FG2};font-size:90%'>{html.escape(facts)}; "
        f"~{p.before:,} → ~{p.after:,} tokens</div>"
        f"<details open><summary style='color:{FG2};font-size:90%'>{label} "
        f"({len(p.text):,} characters)</summary>"
        f"<pre style='font-family:{MONO};white-space:pre-wrap;max-height:24em;overflow:auto;"
        f"border:1px solid {BORDER};padding:6px;margin:4px 0'>{text}</pre></details>"
        f"<div style='color:{FG2};font-size:90%'>a: approve · e TEXT: replace the {label} with one "
        f"line · e PATH: with a file's text · e: type lines, end with a lone '.' · r: reject</div>"
        "</div>"
    )


def show(p: Proposal) -> None:
    display({"text/html": proposal_html(p), "text/plain": printable(describe(p))}, raw=True)


def notebook_ask(read: Callable[[str], str] | None = None) -> Ask:
    """The ``Ask`` a notebook run passes down: the plan as HTML, the answer from ``input``."""
    return text_ask(read, show)


__all__ = ["notebook_ask", "proposal_html", "show"]
