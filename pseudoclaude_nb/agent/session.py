"""The agent's current session: its folder, log writer, conversation and context, with what
its next run must still say (a model change, a long idle, the cells not yet reported).

Its own module so the parts of the agent that read it (memory, notebook activity, the plan)
need not import the agent.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..context.host import ContextHost
from ..conversation import Conversation
from ..session import SessionWriter
from ..session.record import SessionRecord


@dataclass
class ActiveSession:
    dir: Path
    writer: SessionWriter
    conversation: Conversation
    context: ContextHost
    previous_model: str | None = None  # from a resume; said once, by the next run
    idle_since: float | None = None  # last activity: a resume's log, or the last run
    notebook_seen: int | None = None  # the last cell reported to this session (None: none yet)

    @property
    def id(self) -> str:
        return self.dir.name

    @property
    def record(self) -> SessionRecord:
        """Where notes go (the log's one route besides messages)."""
        return self.writer
