"""What to say when a request does not fit the window even after compacting once.

Issue 32: with a 2,048-token window the system prompt and tool schemas alone were 1,951
tokens, and the advice was "Try %compact, start afresh with %sessions new, or run with
--strategy rollover" — none of which can shrink the fixed part (rollover even adds tools).
``too_long_advice`` measures the parts of the request that do not depend on the
conversation (system prompt with memory, tool schemas, the prompt's notebook block) and
says, with those numbers, what would fit; it offers only what can help.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..messages import Message
from ..nesting import encoded_size
from .estimate import estimate_text, estimate_tokens, tokens_for_bytes

# Room a request needs beyond its prompt: a short answer or one tool call.
ANSWER_ROOM = 512


@dataclass(frozen=True)
class FixedPrompt:
    system: int
    tools: int
    tool_count: int
    notebook: int
    conversation: int
    counted: bool = False  # scaled to the server's count

    @property
    def fixed(self) -> int:
        return self.system + self.tools + self.notebook

    def scaled_to(self, prompt: int | None) -> FixedPrompt:
        """The parts scaled to the server's own count of the whole prompt, when it said one
        (issue 32: bytes/3.5 was 29 % low on Gemma's tool schemas)."""
        total = self.fixed + self.conversation
        if not prompt or total <= 0 or prompt <= total:
            return self
        f = prompt / total
        return FixedPrompt(
            round(self.system * f),
            round(self.tools * f),
            self.tool_count,
            round(self.notebook * f),
            round(self.conversation * f),
            counted=True,
        )


def measure(system: str, tools: Sequence[dict[str, Any]], messages: Sequence[Message]) -> FixedPrompt:
    """The request's parts by the estimate (bytes/3.5)."""
    notebook = 0
    last = messages[-1] if messages else None
    if last is not None and last.notebook is not None:
        notebook = estimate_text(last.content[: last.notebook.chars])
    return FixedPrompt(
        system=estimate_text(system),
        tools=tokens_for_bytes(encoded_size(list(tools))) if tools else 0,
        tool_count=len(tools),
        notebook=notebook,
        conversation=max(0, estimate_tokens(messages) - notebook),
    )


def too_long_advice(
    reason: str,
    window: int,
    parts: FixedPrompt,
    *,
    rollover_helps: bool,
    compactable: bool,
    history: bool,
    smaller_tools: bool = False,
) -> str:
    """The error text: why, with numbers, and only advice that can work. ``compactable``:
    there is old history to summarize; ``history``: more than this run's prompt;
    ``smaller_tools``: the compact tool set would be smaller than what was sent; ``rollover_helps``:
    the run does not offer rollover's hand-off already (so suggesting it is new)."""
    need = parts.fixed + ANSWER_ROOM
    numbers = (
        f"system prompt (with memory) ~{parts.system:,} + tool schemas ~{parts.tools:,} "
        f"({parts.tool_count} tools)"
        + (f" + notebook block ~{parts.notebook:,}" if parts.notebook else "")
        + f" = ~{parts.fixed:,} tokens before any conversation"
        + (" (the server's count, shared out by the estimate)" if parts.counted else " (estimated)")
    )
    if need > window:
        fits = [
            f"a window of at least ~{_round_up(need):,} tokens (start the server with a larger "
            "context, e.g. llama-server -c, and let it be learned or pass --context-window)"
        ]
        if smaller_tools:
            fits.append("a smaller tool set (%config PseudoClaude.compact_tools = True)")
        if parts.notebook:
            fits.append("no notebook block (--no-notebook)")
        return (
            f"{reason} — the fixed part of the prompt alone does not fit the {window:,}-token window: "
            f"{numbers}, and an answer needs room too. Compacting or a new session cannot help; "
            f"what would fit: {'; or '.join(fits)}."
        )
    advice = []
    if compactable:
        advice.append("%compact")
    if history:
        advice.append("a new session (%sessions new)")
        if rollover_helps and parts.fixed * 2 < window:
            advice.append("the rollover strategy (--strategy rollover)")
    else:
        advice.append(f"a shorter prompt (it is ~{parts.conversation:,} tokens)")
        if parts.notebook:
            advice.append("no notebook block (--no-notebook)")
    return (
        f"{reason} — even after compacting once ({numbers}; the conversation ~{parts.conversation:,}). "
        f"Try {', or '.join(advice)}."
    )


def _round_up(tokens: int, step: int = 1024) -> int:
    return -(-tokens // step) * step
