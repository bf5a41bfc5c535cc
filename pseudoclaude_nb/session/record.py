"""The one route to a session's log for everything that is not a message.

Messages reach the log through the conversation's hooks (``SessionWriter.attach``). Notes,
usage, spill, compact and rollover entries go through ``SessionRecord``: the context layer,
the runner and the agent depend on this small Protocol, not on the concrete writer
(``SessionWriter`` is one; ``NO_RECORD`` is the one of a context without a session).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..messages import Usage


class SessionRecord(Protocol):
    def note(self, text: str, level: str = "info") -> None:
        """A line for a reader of the session (a host note, a warning)."""
        ...

    def usage(self, usage: Usage, *, messages: int, model: str | None) -> None:
        """A response's usage: the anchor of the next estimate (``messages`` = conversation length)."""
        ...

    def spend(self, usage: Usage, *, purpose: str, model: str | None) -> None:
        """A request that is not a step of the conversation (``purpose``: a Layer 2 summary):
        counted in the session's cost, never an anchor of its estimate."""
        ...

    def spill(self, *, call_id: str, tool: str, path: str, bytes: int, sha256: str) -> None:
        """Layer 1 wrote a result to ``path`` (relative to the session); logged before its preview."""
        ...

    def compact(
        self, *, trigger: str, before_tokens: int, after_tokens: int, ok: bool, error: str | None
    ) -> None:
        """A Layer 2 attempt ended (after its replace, when it made one)."""
        ...

    def rollover(
        self,
        *,
        phase: str,
        reason: str,
        handoff: dict[str, Any],
        related_files: list[dict[str, Any]],
        call_id: str | None,
        **extra: Any,
    ) -> None:
        """A rollover intent (the model's ``new_context``) or commit (the window was replaced)."""
        ...


class _NoRecord:
    """No session to write to (a context in a test, a dry plan): every entry is dropped."""

    def note(self, text: str, level: str = "info") -> None:
        """Dropped: there is no log."""

    def usage(self, usage: Usage, *, messages: int, model: str | None) -> None:
        """Dropped: there is no log."""

    def spend(self, usage: Usage, *, purpose: str, model: str | None) -> None:
        """Dropped: there is no log."""

    def spill(self, *, call_id: str, tool: str, path: str, bytes: int, sha256: str) -> None:
        """Dropped: there is no log."""

    def compact(
        self, *, trigger: str, before_tokens: int, after_tokens: int, ok: bool, error: str | None
    ) -> None:
        """Dropped: there is no log."""

    def rollover(
        self,
        *,
        phase: str,
        reason: str,
        handoff: dict[str, Any],
        related_files: list[dict[str, Any]],
        call_id: str | None,
        **extra: Any,
    ) -> None:
        """Dropped: there is no log."""


NO_RECORD: SessionRecord = _NoRecord()

__all__ = ["NO_RECORD", "SessionRecord"]
