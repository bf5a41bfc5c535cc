"""The conversation: the messages the model will see next.

It owns the in-memory list and announces every change to hooks; it knows nothing of
disks or providers. Hooks run *after* the state lock is released (a slow fsync must not
block readers), in registration order, and changes reach the hooks in the order they
were made. A hook that raises stops the run with ``HookError``:
the conversation must not silently diverge from its log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from .errors import HookError
from .messages import ImagePart, Message, ToolCall, ToolResult

ReplaceReason = Literal["snapshot", "compact", "rollover", "resync", "edit", "undo", "drop"]
REPLACE_REASONS: tuple[str, ...] = ("snapshot", "compact", "rollover", "resync", "edit", "undo", "drop")


@dataclass
class Hooks:
    """Callbacks for changes. ``on_append(message)``; ``on_replace(reason, messages)``."""

    on_append: Callable[[Message], None] | None = None
    on_replace: Callable[[str, list[Message]], None] | None = None


class Conversation:
    def __init__(
        self,
        messages: Iterable[Message] | None = None,
        hooks: Hooks | Sequence[Hooks] | None = None,
    ) -> None:
        self._lock = threading.Lock()  # guards swapping the list (replace); readers take only this one
        # Orders whole changes (state + hooks), so the log sees them in memory's order.
        # Re-entrant: a hook may itself change the conversation.
        self._dispatch = threading.RLock()
        self._messages: list[Message] = list(messages or [])
        if hooks is None:
            self._hooks: list[Hooks] = []
        elif isinstance(hooks, Hooks):
            self._hooks = [hooks]
        else:
            self._hooks = list(hooks)
        self._appenders = self._on_appends()

    def add_hooks(self, hooks: Hooks) -> None:
        self._hooks.append(hooks)
        self._appenders = self._on_appends()

    def remove_hooks(self, hooks: Hooks) -> None:
        self._hooks = [h for h in self._hooks if h is not hooks]
        self._appenders = self._on_appends()

    def _on_appends(self) -> tuple[Callable[[Message], None], ...]:
        # Gathered when the hooks change, not on every append: a new tuple, so a dispatch
        # under way goes on over the hooks it started with.
        return tuple(h.on_append for h in self._hooks if h.on_append is not None)

    # --- reading -----------------------------------------------------------------------

    def messages(self) -> list[Message]:
        """A copy: callers cannot change the conversation behind the hooks' back."""
        with self._lock:
            return list(self._messages)

    def since(self, index: int) -> list[Message]:
        """A copy of the messages from ``index`` on: O(new messages), not O(history)."""
        with self._lock:
            return self._messages[max(index, 0) :]

    def __len__(self) -> int:
        with self._lock:
            return len(self._messages)

    def last(self) -> Message | None:
        with self._lock:
            return self._messages[-1] if self._messages else None

    def first(self) -> Message | None:
        with self._lock:
            return self._messages[0] if self._messages else None

    # --- changing ----------------------------------------------------------------------

    def add_user(self, text: str) -> Message:
        return self._append(Message(role="user", content=text))

    def add_assistant(self, text: str) -> Message:
        return self._append(Message(role="assistant", content=text))

    def add_assistant_tool_calls(self, text: str, tool_calls: Sequence[ToolCall]) -> Message:
        return self._append(Message(role="assistant", content=text, tool_calls=tuple(tool_calls)))

    def add_tool_result(
        self, call_id: str, content: str, is_error: bool = False, parts: Sequence[ImagePart] = ()
    ) -> Message:
        return self.add_result(ToolResult(call_id=call_id, content=content, is_error=is_error), parts)

    def add_result(self, result: ToolResult, parts: Sequence[ImagePart] = ()) -> Message:
        return self._append(Message(role="user", tool_result=result, parts=tuple(parts)))

    def append(self, message: Message) -> Message:
        return self._append(message)

    def replace(self, reason: str, messages: Iterable[Message]) -> list[Message]:
        if reason not in REPLACE_REASONS:
            raise ValueError(f"unknown replace reason {reason!r}; one of {REPLACE_REASONS}")
        new = list(messages)
        with self._dispatch:
            with self._lock:
                self._messages = list(new)
            for hooks in list(self._hooks):
                if hooks.on_replace is not None:
                    self._call(hooks.on_replace, f"replace ({reason})", reason, list(new))
        return new

    def revert(self, messages: Iterable[Message]) -> None:
        """Put back the messages a replace whose hook failed replaced, without telling the hooks.

        Only for that case: the failed hook is the session writer, whose next write resyncs
        the log to the conversation as it then is, so memory and log meet again at the old
        state (and the hooks after it never saw the replace).
        """
        with self._dispatch, self._lock:
            self._messages = list(messages)

    def _append(self, message: Message) -> Message:
        with self._dispatch:
            # No state lock: list.append is atomic, an append only grows the list, and a
            # replace (which swaps the list under the lock) cannot run meanwhile: _dispatch.
            # A lock taken on every append costs ~2 µs right after a fsync (SPEC §15).
            self._messages.append(message)
            for on_append in self._appenders:
                try:
                    on_append(message)
                except Exception as exc:  # the text is built only then: appends are the hot path
                    raise _failed(f"append of message {message.id}", exc) from exc
        return message

    @staticmethod
    def _call(fn: Callable[..., None], what: str, *args: object) -> None:
        try:
            fn(*args)
        except Exception as exc:
            raise _failed(what, exc) from exc


def _failed(what: str, exc: Exception) -> HookError:
    return HookError(f"a conversation hook failed during {what}: {exc}")
