"""The person's say over a replace at the moment it happens (``confirm_compaction``).

With confirmation on, a run pauses just before a Layer 2 replace (automatic, or the forced
one after "prompt too long") and before a rollover commit: the plan is shown as a
``Proposal`` and a ``Review`` — made for one run, handed down with each call like ``emit``,
never kept by the context — asks its ``ask`` callback for a ``Decision``: approve, edit
(commit the person's text instead, framed and logged like the model's) or reject (nothing
is replaced; this run does not ask again for that kind of replace, and the breaker does
not count it). When no one can answer (a kernel without stdin), ``default`` applies and
a notice says so: a run never hangs on a question.

The core asks through ``ask`` and nothing else; ``text_ask`` is the terminal form (it reads
``builtins.input`` at call time, which ipykernel routes to the notebook's stdin box). It
never imports IPython: a notebook passes its own ``show`` to draw the plan.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..events import Notice
from .layer1 import Emit

Kind = Literal["compact", "rollover", "drop"]
Action = Literal["approve", "edit", "reject"]
DEFAULTS = ("approve", "reject")
# What ``input`` raises when nobody can answer: EOF on a closed stdin, IPython's
# StdinNotImplementedError (a NotImplementedError) under nbclient/papermill, and the
# OSError/RuntimeError of a detached terminal. The same set as ``Permissions``.
NO_ANSWER = (EOFError, NotImplementedError, OSError, RuntimeError)
EDIT_END = "."
TRIES = 5  # unreadable answers before the question counts as unanswerable


@dataclass(frozen=True)
class Proposal:
    """One replace about to happen, for a person to judge."""

    kind: Kind  # compact (Layer 2) | rollover (a new window) | drop (a strategy's Drop)
    trigger: str  # compact: auto | forced; rollover: model | hard-limit
    text: str  # what may be edited: the summary, or the handoff as the new window shows it
    before: int  # estimated tokens now
    after: int  # estimated tokens after the replace
    replaced: int  # messages the text stands in for
    kept: int  # messages kept verbatim (the recent tail; 0 for a rollover)
    replaced_tokens: int = 0
    kept_tokens: int = 0

    @property
    def what(self) -> str:
        return {"compact": "compaction", "rollover": "rollover", "drop": "drop"}[self.kind]


@dataclass(frozen=True)
class Decision:
    action: Action
    text: str | None = None  # the edited text (``edit``)
    # Who decided: the person, or ``confirm_default`` when nobody could answer (said so in
    # the notices and the log, never "rejected by you" for an answer nobody gave).
    by_default: bool = field(default=False, compare=False)

    @property
    def who(self) -> str:
        return "by PseudoClaude.confirm_default (nobody could answer)" if self.by_default else "by you"


Ask = Callable[[Proposal], Decision]


@dataclass
class Review:
    """One run's reviewer: asks, applies ``default`` when nobody can answer, remembers rejections."""

    ask: Ask
    default: str = "approve"
    rejected: set[str] = field(default_factory=set)  # kinds rejected in this run

    def skips(self, kind: Kind) -> bool:
        """True when the person rejected this kind of replace earlier in this run: do not ask again."""
        return kind in self.rejected

    def decide(self, proposal: Proposal, emit: Emit) -> Decision:
        try:
            decision = self.ask(proposal)
        except NO_ANSWER as exc:
            action: Action = "reject" if self.default == "reject" else "approve"
            decision = Decision(action, by_default=True)
            emit(
                Notice(
                    f"the {proposal.what} could not be confirmed: nobody can answer here "
                    f"({type(exc).__name__}); PseudoClaude.confirm_default = {action!r} applies, so it "
                    f"is {'rejected' if action == 'reject' else 'approved as proposed'}",
                    "warning",
                )
            )
        if decision.action == "edit" and proposal.kind == "drop":
            emit(Notice("a drop has no text to edit; it is applied as proposed", "warning"))
            decision = Decision("approve")
        if decision.action == "edit" and not (decision.text or "").strip():
            emit(Notice(f"the edited {proposal.what} text was empty; the proposed text is used", "warning"))
            decision = Decision("approve")
        if decision.action == "reject":
            self.rejected.add(proposal.kind)
            emit(Notice(rejected_notice(proposal, decision.who), "warning"))
        elif decision.action == "edit":
            emit(Notice(f"the {proposal.what} is committed with your edited text"))
        return decision


def rejected_notice(p: Proposal, who: str = "by you") -> str:
    if p.trigger == "forced" or (p.kind == "rollover" and p.trigger == "hard-limit"):
        after = "the request is still too long, so this run may stop with advice"
    else:
        after = "the run goes on without it"
    return (
        f"{p.what} rejected {who}: nothing was replaced and {after}; this run will not ask again "
        f"(the next %agent run will){'; the breaker does not count it' if p.kind == 'compact' else ''}"
    )


def describe(p: Proposal) -> str:
    """The plan as plain text: what is replaced, what is kept, before → after, and the text."""
    if p.kind == "compact":
        head = (
            f"Layer 2 compaction ({p.trigger}) awaits your answer: {p.replaced} messages "
            f"(~{p.replaced_tokens:,} tokens) become the summary below; the recent tail of {p.kept} "
            f"messages (~{p.kept_tokens:,} tokens) is kept verbatim. ~{p.before:,} → ~{p.after:,} tokens."
        )
        label = "summary"
    elif p.kind == "drop":
        head = (
            f"A drop ({p.trigger}) awaits your answer: {p.replaced} messages (~{p.replaced_tokens:,} tokens) "
            f"leave the conversation (they stay in the log); {p.kept} stay. ~{p.before:,} → ~{p.after:,} tokens."
        )
        label = "messages dropped"
    else:
        head = (
            f"Rollover ({p.trigger}) awaits your answer: the window of {p.replaced} messages is replaced "
            f"by one message holding the original request and the handoff below. "
            f"~{p.before:,} → ~{p.after:,} tokens."
        )
        label = "handoff"
    return f"{head}\n--- {label} ---\n{p.text.rstrip()}\n--- end of {label} ---"


PROMPT = (
    "{what}: [a] approve  [e] edit  [r] reject — 'e TEXT' one line, 'e PATH' a file holding the text, "
    "or 'e' alone then lines ending with a lone '.'  > "
)


def text_ask(read: Callable[[str], str] | None = None, show: Callable[[Proposal], None] | None = None) -> Ask:
    """An ``Ask`` over a line reader (``builtins.input`` at call time when ``read`` is None).

    ``show`` draws the plan first (``print(describe(p))`` when None). Reader errors pass
    through, so that ``Review`` applies its default when nobody can answer.
    """

    def ask(proposal: Proposal) -> Decision:
        line = read if read is not None else builtins.input
        (show or _print)(proposal)
        for _ in range(TRIES):
            answer = line(PROMPT.format(what=proposal.what.capitalize())).strip()
            word, _, rest = answer.partition(" ")
            word = word.lower()
            if word in ("a", "approve", "y", "yes"):
                return Decision("approve")
            if word in ("r", "reject", "n", "no"):
                return Decision("reject")
            if word in ("e", "edit"):
                return Decision("edit", _edited(rest.strip(), line))
        raise EOFError(f"no readable answer after {TRIES} tries")

    return ask


def _edited(rest: str, line: Callable[[str], str]) -> str:
    if rest:
        path = Path(rest).expanduser()
        try:
            if path.is_file():
                return path.read_text(encoding="utf-8")
        except (OSError, ValueError):
            pass  # not a readable path: the text itself
        return rest
    lines: list[str] = []
    while (got := line("")).rstrip("\r\n") != EDIT_END:
        lines.append(got)
    return "\n".join(lines)


def _print(p: Proposal) -> None:
    print(describe(p))


__all__ = ["DEFAULTS", "Ask", "Decision", "Proposal", "Review", "describe", "text_ask"]
