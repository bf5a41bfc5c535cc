"""Layer 2: replace old history by a model-written summary — the pure parts.

Functions from messages to messages; the request to the model and the bookkeeping live
in ``context.layer2``. The summary keeps evidence tiers apart, so that a guess made in turn 5
does not come back in turn 50 as a fact.
"""

from __future__ import annotations

from ..messages import Message
from .estimate import estimate_tokens, message_bytes, tokens_for_bytes

SUMMARY_SYSTEM = (
    "You write the working summary of a coding session that has outgrown its context "
    "window. Another instance of the agent continues from your summary alone, so be "
    "specific (paths, names, commands, numbers) and keep facts and guesses apart."
)

SUMMARY_INSTRUCTION = """Summarize the conversation so far for the agent that continues it.
Use exactly these sections, in this order:

## Confirmed requirements
What the user asked for or confirmed, each item with its source (the user's words, a file, a test).
## Agent inferences (unverified)
What the agent concluded or assumed without confirmation. Never promote these to requirements.
## Unresolved problems
Errors, failing checks and open questions, with the exact message where there is one.
## Files and changes
Files read, created or changed, and what changed in each.
## Next steps
What remains to be done, in order.

Do not invent anything that is not in the conversation."""

CONTINUATION = (
    "<summary>\n{summary}\n</summary>\n\n"
    "This session continues from an earlier part that was replaced by the summary above, "
    "to keep the context within the model's window."
)
ACKNOWLEDGEMENT = "Understood. I'll continue from the summary."
BOUNDARY_REMINDER = (
    "Reminder: the summary is not the full text of files, errors or tool output. Re-read "
    "what you need (read_file, grep) before relying on details from before it."
)


def layer2_threshold(context_window: int, summary_reserve: int, safety_margin: int) -> int:
    """167,000 for a 200K window, 95,000 for 128K (with the default reserves)."""
    return context_window - summary_reserve - safety_margin


def tail_start(messages: list[Message], recent_tokens: int) -> int:
    """Index where the recent tail begins.

    The newest messages up to ``recent_tokens``, at least the last message, and never
    starting inside a tool exchange: a tail that would begin with a tool result extends
    back to the assistant message that made the call.
    """
    if not messages:
        return 0
    start, used = len(messages) - 1, tokens_for_bytes(message_bytes(messages[-1]))
    while start > 0:
        cost = tokens_for_bytes(message_bytes(messages[start - 1]))
        if used + cost > recent_tokens:
            break
        start, used = start - 1, used + cost
    while start > 0 and messages[start].tool_result is not None:
        start -= 1
    return start


def drop_oldest_exchange(head: list[Message]) -> list[Message]:
    """The head without its oldest exchange, starting again at a user text message.

    Used when the summary request itself is too long. A tool call is never separated
    from its results, and the request still opens with the user, as providers require.
    """
    start = 1
    while start < len(head) and (head[start].role != "user" or head[start].tool_result is not None):
        start += 1
    return head[start:]


def summary_messages(head: list[Message]) -> list[Message]:
    """The messages of the summary request: the old history, then the instruction.

    Images older than the recent tail go to the summarizer as their text notes (issue-14):
    the summary can name them, and no image is sent for a summary.
    """
    return [*map(images_as_notes, head), Message(role="user", content=SUMMARY_INSTRUCTION)]


def images_as_notes(m: Message) -> Message:
    """The message with each image part replaced by its text note (path, type, size)."""
    if not m.parts:
        return m
    note = "\n".join(p.note("an image shown earlier") for p in m.parts)
    if m.tool_result is not None:
        result = m.tool_result.model_copy(update={"content": f"{m.tool_result.content}\n{note}"})
        return m.model_copy(update={"tool_result": result, "parts": ()})
    return m.model_copy(update={"content": f"{m.content}\n{note}".lstrip("\n"), "parts": ()})


def compacted(summary: str, tail: list[Message]) -> list[Message]:
    """The new conversation: summary as a continuation, acknowledgement, reminder, tail."""
    return [
        Message(role="user", content=CONTINUATION.format(summary=summary.strip())),
        Message(role="assistant", content=ACKNOWLEDGEMENT),
        Message(role="user", content=BOUNDARY_REMINDER),
        *tail,
    ]


def freed_fraction(before: int, after: int) -> float:
    return (before - after) / before if before > 0 else 0.0


__all__ = [
    "compacted",
    "drop_oldest_exchange",
    "estimate_tokens",
    "freed_fraction",
    "layer2_threshold",
    "summary_messages",
    "tail_start",
]
