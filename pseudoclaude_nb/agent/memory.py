"""Memory in a run: the index a run's requests carry, note bodies withheld when memory is off,
and the update queued after a run that ended normally.

``RunMemory`` is one part of the agent: it owns the ``MemoryManager`` of the current
workspace. The update runs in the background; what it did is said at the next run (or by
``%memory``), and a run waits for a pending one only ``wait`` seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..config import PseudoClaude
from ..events import MemoryUpdated, Notice, RunEvent
from ..memory import MemoryManager, user_memory_dir
from ..messages import Message
from ..providers import Provider
from ..providers.base import AnswersMemory
from ..session.entries import NoteEntry, SpendEntry
from ..tools.memory import withhold_bodies
from .session import ActiveSession

# How long a run waits for the previous run's memory update before going on without it.
MEMORY_WAIT_SECONDS = 15.0


class RunMemory:
    """The agent's project and user memory, as runs use it."""

    def __init__(self, settings: PseudoClaude, workspace: Callable[[], Path]) -> None:
        self.settings = settings
        self._workspace = workspace  # the agent's: it follows %config PseudoClaude.workspace
        self.wait = MEMORY_WAIT_SECONDS
        self._memory: MemoryManager | None = None

    @property
    def memory(self) -> MemoryManager:
        """The project memory of the current workspace and the user memory (``%memory``)."""
        ws, user = self._workspace(), user_memory_dir()
        if self._memory is None or self._memory.workspace != ws or self._memory.user.root != user:
            self._memory = MemoryManager(ws, user)
        return self._memory

    def pending(self) -> MemoryManager | None:
        """The memory whose update is still running, if any (never builds one: a kernel that
        never used memory has none)."""
        return self._memory if self._memory is not None and self._memory.pending else None

    def index(self, enabled: bool) -> str | None:
        """The index for the next request (after any pending update), or ``None``; says nothing
        (``%context`` only describes: the run says what went wrong)."""
        if not enabled:
            return None
        self.memory.wait(self.wait)
        try:
            return self.memory.prompt_index()
        except OSError:
            return None

    def for_run(self, enabled: bool, events: list[RunEvent]) -> str | None:
        """The index for this run; what earlier updates did, and any problem, as events."""
        if not enabled:
            return None
        if not self.memory.wait(self.wait):
            events.append(
                Notice(
                    "the memory update of the previous run is still running; this run sees memory "
                    "as it was before it",
                    "warning",
                )
            )
        for report in self.memory.take_reports():
            events.append(
                MemoryUpdated(tuple(report.changes), tuple(report.ignored), report.error, report.session_id)
            )
            events.append(Notice(report.summary(), "warning" if report.error or report.ignored else "info"))
        try:
            index = self.memory.prompt_index()
        except OSError as exc:
            events.append(Notice(f"memory left out of this run: {exc}; check %memory show", "warning"))
            index = None
        events.extend(Notice(text, "warning") for text in self.memory.take_notices())
        return index

    def withhold(self, active: ActiveSession) -> Notice | None:
        """Memory is off: notes read in earlier runs leave the conversation (an ``edit`` replace)."""
        messages, count = withhold_bodies(active.conversation.messages())
        if not count:
            return None
        active.conversation.replace("edit", messages)
        active.context.forget_anchor()  # the last usage measured the bodies
        return Notice(f"memory is off: {count} memory note(s) read earlier are withheld from this run")

    def update(self, messages: list[Message], provider: Provider, active: ActiveSession) -> None:
        if not _plays_memory(provider):
            return
        log = active.record
        self.memory.update_async(
            messages,
            provider=provider,
            policy=self.settings.memory_policy,
            session_id=active.id,
            note=lambda text, level: log.record(NoteEntry.new(text, level)),
            spent=lambda usage, model: log.record(SpendEntry.new(usage, purpose="memory", model=model)),
        )


def _plays_memory(provider: Provider) -> bool:
    """Whether to ask ``provider`` for a memory update at all (``AnswersMemory`` says when not)."""
    return provider.answers_memory if isinstance(provider, AnswersMemory) else True
