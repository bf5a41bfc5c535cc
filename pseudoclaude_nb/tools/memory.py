"""The ``read_memory`` tool: one memory note's body, on demand, within a budget.

Only the index of memory is in the system prompt; a body enters the context when the
model asks for it, at most 4 KB per body and 20 KB per run (a ``MemoryReader`` is made for
each run). ``withhold_bodies`` takes bodies read in earlier runs back out of the messages,
for runs with memory off: then neither the index nor any body may reach the model.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field

from ..errors import ToolError
from ..memory.index import age_phrase
from ..memory.manager import MemoryManager
from ..messages import Message
from ..redact import redact_text
from .registry import Tool, ToolArgs

READ_MEMORY = "read_memory"
BODY_BYTES = 4_096
RUN_BYTES = 20_000
WITHHELD = "[memory withheld: memory is off for this run, so this note's text is not shown]"

READ_MEMORY_DESCRIPTION = (
    "Read the full text of one memory note listed in the memory index of the system prompt. "
    "Read a note only when the task needs it: at most 4 KB of a note and 20 KB per run are "
    "shown. A note may be stale (its age and status are shown): check it against the workspace "
    "before relying on it."
)


class ReadMemoryArgs(ToolArgs):
    name: str = Field(min_length=1, description="the note's name, as listed in the memory index")
    level: Literal["project", "user"] | None = Field(
        None, description="project or user memory; omitted: project first, then user"
    )


def cut_utf8(text: str, limit: int) -> tuple[str, int]:
    """At most ``limit`` bytes of ``text``, never half a character; and how many bytes were cut."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text, 0
    shown = data[: max(limit, 0)].decode("utf-8", errors="ignore")
    return shown, len(data) - len(shown.encode("utf-8"))


class MemoryReader:
    """Reads note bodies for one run and keeps its budget."""

    def __init__(
        self, manager: MemoryManager, *, body_bytes: int = BODY_BYTES, run_bytes: int = RUN_BYTES
    ) -> None:
        self.manager = manager
        self.body_bytes = body_bytes
        self.run_bytes = run_bytes
        self.used = 0

    def read(self, name: str, level: str | None = None) -> str:
        found = self.manager.find(name, level)
        if not found:
            where = f"{level} memory" if level else "project or user memory"
            raise ToolError(
                f"there is no note named {name!r} in {where}; use a name exactly as the memory "
                "index in the system prompt lists it"
            )
        topic = found[0]
        left = self.run_bytes - self.used
        body, cut = cut_utf8(redact_text(topic.body), min(self.body_bytes, left))
        if cut and not body:
            raise ToolError(
                f"this run has read its {self.run_bytes:,} bytes of memory notes; work from the "
                "workspace, or ask the user"
            )
        self.used += len(body.encode("utf-8"))
        age = age_phrase(topic.updated, dt.datetime.now(dt.timezone.utc))
        text = (
            f"{topic.level} memory note {topic.name!r}: {topic.description}\n"
            f"({topic.type}, {age}, {topic.status}, source {topic.source})\n\n{body}"
        )
        if cut:
            why = (
                f"notes show at most {self.body_bytes:,} bytes"
                if min(self.body_bytes, left) == self.body_bytes
                else f"this run's {self.run_bytes:,}-byte budget for memory notes is used up"
            )
            text += f"\n[… {cut:,} more bytes not shown: {why}]"
        return text


def read_memory_tool(reader: MemoryReader) -> Tool:
    def run(args: ReadMemoryArgs) -> str:
        return reader.read(args.name, args.level)

    return Tool(name=READ_MEMORY, description=READ_MEMORY_DESCRIPTION, args=ReadMemoryArgs, handler=run)


def withhold_bodies(messages: list[Message]) -> tuple[list[Message], int]:
    """``messages`` with the results of earlier ``read_memory`` calls replaced by ``WITHHELD``."""
    calls = {c.id for m in messages for c in m.tool_calls if c.name == READ_MEMORY}
    if not calls:
        return messages, 0
    out, count = [], 0
    for m in messages:
        result = m.tool_result
        if result is not None and result.call_id in calls and result.content != WITHHELD:
            m = m.model_copy(update={"tool_result": result.model_copy(update={"content": WITHHELD})})
            count += 1
        out.append(m)
    return out, count
