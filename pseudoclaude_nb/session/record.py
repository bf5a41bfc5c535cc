"""The one route to a session's log for everything that is not a message.

Messages reach the log through the conversation's hooks (``SessionWriter.attach``). Every
other entry is a value of its kind (``entries.NoteEntry.new(...)``, ``CompactEntry.new(...)``,
…) handed to ``record``: the context layer, the runner and the agent depend on this small
Protocol, not on the concrete writer (``SessionWriter`` is one; ``NO_RECORD`` is the one of a
context without a session).
"""

from __future__ import annotations

from typing import Protocol

from .entries import Recorded


class SessionRecord(Protocol):
    def record(self, entry: Recorded) -> None:
        """Write ``entry`` (one line, redacted, durable like an append)."""
        ...


class _NoRecord:
    """No session to write to (a context in a test, a dry plan): every entry is dropped."""

    def record(self, entry: Recorded) -> None:
        """Dropped: there is no log."""


NO_RECORD: SessionRecord = _NoRecord()

__all__ = ["NO_RECORD", "SessionRecord"]
