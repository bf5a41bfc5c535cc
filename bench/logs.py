"""Build realistic session logs with the product's own writer (fsync off, so building is fast).

The shape is that of a long agent session under Layer 1 and Layer 2: appends, a usage
entry after each response, spill entries with previews instead of huge results, and now
and then a ``compact`` replace (summary + recent tail) whenever the estimate would cross
a 200K window's line. The last replace comes near the end, followed by a few hundred KB
of appends: the effective state a resume needs is small, the physical log is not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pseudoclaude_nb.context.estimate import message_bytes, tokens_for_bytes
from pseudoclaude_nb.context.spill import preview
from pseudoclaude_nb.context.summarize import compacted
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import Message, ToolResult, Usage
from pseudoclaude_nb.session.entries import CompactEntry, SpillEntry, UsageEntry
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import LOG_NAME, new_session_dir

from .workload import Workload

MODEL = "bench-model"
SPILL_BYTES = 50_000
WINDOW_LINE_BYTES = 167_000 * 35 // 10  # Layer 2's line for a 200K window, in bytes at 3.5/token
TAIL_MESSAGES = 40


@dataclass
class BuiltLog:
    path: Path
    bytes: int
    physical_messages: int
    replaces: int
    last_replace_offset: int
    largest_line: int
    largest_message_line: int  # the largest line that is one non-spilled message


def spilled(writer: SessionWriter, folder: Path, message: Message) -> Message:
    """``message`` as Layer 1 leaves it in the log: a result over the spill limit becomes its
    preview, with the spill entry written first (the file itself is not written: no view reads it)."""
    result = message.tool_result
    if result is None or len(result.content.encode()) <= SPILL_BYTES:
        return message
    rel = f"tool-results/{result.call_id}.txt"
    writer.record(
        SpillEntry.new(
            call_id=result.call_id, tool="read_file", path=rel, bytes=len(result.content), sha256="0" * 64
        )
    )
    shown = preview(result.content, f".pseudoclaude/sessions/{folder.name}/{rel}")
    return message.model_copy(
        update={"tool_result": ToolResult(call_id=result.call_id, content=shown, spilled=rel)}
    )


def build_log(
    workspace: Path,
    target_bytes: int,
    *,
    seed: int = 7,
    final_appends: int = 160,
    redact: bool = True,
) -> BuiltLog:
    """A log of about ``target_bytes`` whose last replace is ``final_appends`` messages before the end."""
    folder = new_session_dir(workspace)
    work = Workload(seed)
    conversation = Conversation()
    writer = SessionWriter(folder, model=MODEL, fsync=False, redact=redact)
    writer.attach(conversation)
    state = {"bytes": 0, "messages": 0, "replaces": 0}
    summary = work.assistant_text() * 8

    def append(message: Message) -> None:
        message = spilled(writer, folder, message)
        conversation.append(message)
        state["bytes"] += message_bytes(message)
        state["messages"] += 1
        if message.role == "assistant":
            tokens = tokens_for_bytes(state["bytes"])
            writer.record(
                UsageEntry.new(
                    Usage(input_tokens=tokens, output_tokens=200), messages=len(conversation), model=MODEL
                )
            )

    def compact() -> None:
        messages = conversation.messages()
        start = max(0, len(messages) - TAIL_MESSAGES)
        while start > 0 and messages[start].tool_result is not None:
            start -= 1
        new = compacted(summary, messages[start:])
        conversation.replace("compact", new)
        writer.record(CompactEntry.new(trigger="auto", before_tokens=0, after_tokens=0, ok=True, error=None))
        state["bytes"] = sum(message_bytes(m) for m in new)
        state["replaces"] += 1

    stream = work.messages(10**9)
    last_replace = 0
    left: int | None = None  # appends still to make after the last replace
    try:
        pending = next(stream)
        while True:
            if pending.role == "assistant":  # a model request is due: the pre-step boundary
                if left is not None and left <= 0:
                    break
                if state["bytes"] > WINDOW_LINE_BYTES and left is None:
                    size = os.fstat(writer._fd).st_size  # noqa: SLF001 - the bench's own writer
                    last_replace = size
                    compact()
                    if size >= target_bytes:
                        left = final_appends
            append(pending)
            if left is not None:
                left -= 1
            pending = next(stream)
    finally:
        writer.close()
    path = folder / LOG_NAME
    data = path.read_bytes()
    lines = data.split(b"\n")
    largest = max(len(x) + 1 for x in lines)
    largest_message = max((len(x) + 1 for x in lines if b'"type":"message"' in x[:40]), default=0)
    return BuiltLog(
        path=path,
        bytes=len(data),
        physical_messages=data.count(b'"type":"message"'),
        replaces=state["replaces"],
        last_replace_offset=last_replace,
        largest_line=largest,
        largest_message_line=largest_message,
    )


def build_session(
    workspace: Path,
    *,
    messages: int | None = None,
    steps: int | None = None,
    window_tokens: int | None = None,
    tail: int = TAIL_MESSAGES,
    seed: int = 7,
) -> BuiltLog:
    """A session of ``messages`` messages or ``steps`` model responses (whichever is given),
    written by the product's writer as a long run leaves it: a usage entry after each answer,
    results over the spill limit spilled (a preview in the log), and — with ``window_tokens``
    — a ``compact`` replace (summary + the last ``tail`` messages) whenever the estimate would
    cross Layer 2's line for that window (83 % of it). Without ``window_tokens`` it never
    compacts: every message is in the effective state (a session resumed from before
    compaction existed, or imported, can be so; its context is then far past any window).
    """
    if (messages is None) == (steps is None):
        raise ValueError("give messages or steps")
    folder = new_session_dir(workspace)
    work = Workload(seed)
    conversation = Conversation()
    writer = SessionWriter(folder, model=MODEL, fsync=False)
    writer.attach(conversation)
    line = None if window_tokens is None else int(window_tokens * 0.83 * 3.5)
    summary = work.assistant_text() * 4
    state = {"bytes": 0, "messages": 0, "steps": 0, "replaces": 0}
    last_replace = 0

    def done() -> bool:  # asked before each answer: a session ends where a step could start
        if messages is not None:
            return state["messages"] >= messages
        return state["steps"] >= (steps or 0)

    stream = work.messages(10**9)
    try:
        while True:
            message = next(stream)
            if message.role == "assistant" and done():
                break  # at a step's boundary: the last step's results are all in
            if message.role == "assistant" and line is not None and state["bytes"] > line:
                current = conversation.messages()
                start = max(0, len(current) - tail)
                while start > 0 and current[start].tool_result is not None:
                    start -= 1
                new = compacted(summary, current[start:])
                last_replace = os.fstat(writer._fd).st_size  # noqa: SLF001 - the bench's own writer
                conversation.replace("compact", new)
                writer.record(
                    CompactEntry.new(trigger="auto", before_tokens=0, after_tokens=0, ok=True, error=None)
                )
                state["bytes"] = sum(message_bytes(m) for m in new)
                state["replaces"] += 1
            message = spilled(writer, folder, message)
            conversation.append(message)
            state["bytes"] += message_bytes(message)
            state["messages"] += 1
            if message.role == "assistant":
                state["steps"] += 1
                writer.record(
                    UsageEntry.new(
                        Usage(input_tokens=tokens_for_bytes(state["bytes"]), output_tokens=200),
                        messages=len(conversation),
                        model=MODEL,
                    )
                )
    finally:
        writer.close()
    path = folder / LOG_NAME
    size = path.stat().st_size
    return BuiltLog(
        path=path,
        bytes=size,
        physical_messages=state["messages"],
        replaces=state["replaces"],
        last_replace_offset=last_replace,
        largest_line=0,
        largest_message_line=0,
    )
