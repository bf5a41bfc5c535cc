"""A change worked out but not committed (``%compact --preview``): pure data.

``Plan``: a Layer 2 compaction (a strategy's ``Summarize``); ``DropPlan``: a strategy's
``Drop``. ``%compact --apply`` commits the kept one while the conversation is still the one
it was made from.

Its own module so that the shared state can hold one without importing Layer 2 (which
imports the state): the import graph stays a tree.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..messages import Message, Usage


@dataclass(frozen=True)
class Plan:
    """What one Layer 2 compaction of ``messages`` would do; ``new`` None: it would fail (``error``)."""

    messages: list[Message]  # the conversation it was made from (the very objects)
    head: int  # how many of them the summary replaces
    head_tokens: int
    tail_tokens: int
    before: int
    after: int
    summary: str | None
    new: list[Message] | None
    error: str | None
    # the summary requests it took, (model, usage) each: logged as ``spend`` when committed
    spent: tuple[tuple[str | None, Usage], ...] = ()

    @property
    def tail(self) -> int:
        return len(self.messages) - self.head

    def made_from(self, messages: list[Message]) -> bool:
        """True while the conversation is exactly the one this plan summarized."""
        return len(messages) == len(self.messages) and all(
            a is b for a, b in zip(messages, self.messages, strict=True)
        )


@dataclass(frozen=True)
class DropPlan:
    """What a strategy's ``Drop`` of ``messages`` would do: ``new`` is the conversation after it."""

    messages: list[Message]  # the conversation it was made from (the very objects)
    strategy: str
    dropped: tuple[str, ...]  # the ids taken out, pairs made whole
    widened: tuple[str, ...]  # of them, those added to keep a tool call with its results
    before: int
    after: int
    new: list[Message]

    def made_from(self, messages: list[Message]) -> bool:
        return len(messages) == len(self.messages) and all(
            a is b for a, b in zip(messages, self.messages, strict=True)
        )


Preview = Plan | DropPlan
