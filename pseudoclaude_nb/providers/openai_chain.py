"""Server state for the OpenAI Responses API: which stored response the next request continues.

With ``%config PseudoClaude.openai_server_state = True`` each request is stored on OpenAI's side
(``store: true``) and the next one names it in ``previous_response_id`` and sends only the items
that came after it. That is right only while the conversation is the one the server holds plus new
messages: the messages the last request sent (the very same, or equal ones), then one assistant
message with exactly the function calls of that response (the runner drops cut or invalid calls:
the server would then miss their outputs), then the new ones — in the same thread (the session,
the strategy and the conversation object: a resume, a fork, another session or a switch of
strategy starts over). Anything else — a compaction, an undo, an answer that was not kept — sends
the whole conversation once, stored, which starts a new chain. Comparing the prefix is one list comparison in C (identity first), so a step
costs the same at 10,000 messages as at 100.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from dataclasses import dataclass
from typing import ClassVar

from ..messages import Message


@dataclass(frozen=True)
class Link:
    thread: str | None  # the conversation the request belonged to (``Request.thread``)
    sent: list[Message]  # the request's messages (the runner's list, kept as it is)
    response_id: str
    call_ids: tuple[str, ...]  # the response's function calls, in order


class Chains:
    """The last stored response per endpoint and model, for this process (a run makes its own
    provider; the next run in the kernel continues the chain)."""

    _links: ClassVar[dict[Hashable, Link]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def continues(cls, key: Hashable, thread: str | None, messages: list[Message]) -> tuple[str, int] | None:
        """(the response to continue, the index of the first new message), or None: send all."""
        with cls._lock:
            link = cls._links.get(key)
        if link is None or link.thread != thread:
            return None
        n = len(link.sent)
        if len(messages) <= n or messages[:n] != link.sent:
            return None
        answer = messages[n]
        if answer.role != "assistant" or tuple(c.id for c in answer.tool_calls) != link.call_ids:
            return None
        return link.response_id, n + 1

    @classmethod
    def stored(cls, key: Hashable, link: Link) -> None:
        with cls._lock:
            cls._links[key] = link

    @classmethod
    def forget(cls, key: Hashable) -> None:
        with cls._lock:
            cls._links.pop(key, None)

    @classmethod
    def current(cls, key: Hashable) -> Link | None:
        with cls._lock:
            return cls._links.get(key)
