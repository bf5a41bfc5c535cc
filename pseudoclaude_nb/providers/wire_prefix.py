"""A request's messages converted and encoded once each, not on every step (issue 34).

Between two replaces the history only grows: each step sends the messages of the last one
and a few more. At 10,000 messages the body is ~18 MB, and converting and encoding all of it
again took ~0.5 s a step. ``EncodedHistory`` (one per provider) keeps the wire messages of
the last request's *settled* prefix, and their JSON: the next request whose messages start
with the very same objects (messages are immutable once in the history) converts and
encodes only what follows. A prefix ends before the last turn (the next message may join
it) and before any turn whose form depends on the running tool loop (its reasoning goes
back only while that loop runs). Anything else — a replace, a compaction, a fork, more
images than are sent (older ones then turn into notes) — starts over from the first message.

The body is then written with ``dumps``: compact UTF-8 JSON as httpx writes it, the
messages' JSON joined in once. The list a provider builds its body from still holds
every message as a dict (what tests and callers read); it only carries the JSON beside.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Hashable
from itertools import islice
from operator import is_
from typing import Any, ClassVar

import orjson

from ..messages import Message
from .base import MAX_IMAGES
from .wire import sendable

Convert = Callable[[list[Message], set[str]], list[dict[str, Any]]]
Changing = Callable[[list[Message], set[str]], bool]


SHARED_KEYS = 4  # endpoints/models whose prefix a process keeps (each holds ~ its history's size)
Chunk = bytes | tuple[bytearray, int]  # a message's JSON, or the first n bytes of the prefix's


class WireMessages(list):
    """Wire messages (dicts, to read) with their JSON (to send), while the list is unchanged.

    The JSON is kept in pieces, the prefix's as the first bytes of its growing buffer: the
    body is then joined once (at 18 MB each copy costs ~10 ms, most of it fresh pages).
    """

    def __init__(self, entries: list[dict[str, Any]], chunks: list[Chunk]) -> None:
        super().__init__(entries)
        self.chunks = chunks
        self._length = len(entries)

    def current(self) -> bool:
        return len(self) == self._length


def dumps(body: dict[str, Any]) -> bytes:
    """The request body as compact UTF-8 JSON (``messages`` first), its ``WireMessages`` as they are."""
    messages = body.get("messages")
    if not isinstance(messages, WireMessages) or not messages.current():
        return encode(body)
    rest = encode({k: v for k, v in body.items() if k != "messages"})
    parts: list[Any] = [b'{"messages":[']
    views: list[memoryview] = []
    chunk: bytes | tuple[bytearray, int] | memoryview
    try:
        for chunk in messages.chunks:
            if isinstance(chunk, tuple):
                buffer, size = chunk
                if not size:
                    continue
                chunk = memoryview(buffer)[:size]  # released below: the buffer grows on the next step
                views.append(chunk)
            if len(parts) > 1:
                parts.append(b",")
            parts.append(chunk)
        parts.append(b"]}" if rest == b"{}" else b"]," + rest[1:])
        return b"".join(parts)
    finally:
        for view in views:
            view.release()


def encode(value: Any) -> bytes:
    """JSON as httpx writes it (compact, UTF-8, no NaN); orjson, or the standard library for
    what orjson refuses (an integer over 64 bits)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


class EncodedHistory:
    """The settled prefix of the last request: its messages, wire messages and JSON.

    A run makes its own provider, so the one of a kernel's next ``%agent`` run finds the
    prefix here (``shared``), by what shapes the wire form: endpoint, model, image setting.
    """

    _shared: ClassVar[dict[Hashable, EncodedHistory]] = {}
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls, key: Hashable) -> EncodedHistory:
        """The one for ``key`` in this process (the last few keys are kept)."""
        with cls._shared_lock:
            found = cls._shared.pop(key, None) or cls()
            cls._shared[key] = found  # the newest last
            while len(cls._shared) > SHARED_KEYS:
                cls._shared.pop(next(iter(cls._shared)))
            return found

    def __init__(self) -> None:
        self._form: object = None
        self._lock = threading.Lock()  # two runs in two threads share one: each request whole
        self._reset()

    def using(self, form: object) -> EncodedHistory:
        """Self, for requests whose messages take the form ``form`` gives them (the image
        source: a message's images are sent, or become notes, by it); another form starts over."""
        key = _form_key(form)
        with self._lock:
            if key != self._form:
                self._form = key
                self._reset()
        return self

    def _reset(self) -> None:
        self._messages: list[Message] = []  # the settled prefix, as sent
        self._entries: list[dict[str, Any]] = []
        # The entries' JSON, comma-separated. Never cleared in place: a body made earlier may
        # still hold its first bytes (a retry); a new prefix gets a new buffer.
        self._json = bytearray()
        self._images = 0  # image parts in the prefix

    def messages(
        self,
        head: list[dict[str, Any]],
        messages: list[Message],
        convert: Convert,
        current_turn: Callable[[list[Message]], set[str]],
        changing: Changing,
    ) -> WireMessages:
        """``head`` and the wire messages of ``messages``, reusing the prefix they share with the last."""
        with self._lock:
            return self._messages_locked(head, messages, convert, current_turn, changing)

    def _messages_locked(
        self,
        head: list[dict[str, Any]],
        messages: list[Message],
        convert: Convert,
        current_turn: Callable[[list[Message]], set[str]],
        changing: Changing,
    ) -> WireMessages:
        loop_start = current_turn(messages)
        start = len(self._messages)
        if start > len(messages) or not all(map(is_, islice(messages, start), self._messages)):
            self._reset()
            start = 0
        rest = messages[start:]
        if self._images + sum(len(m.parts) for m in rest) > MAX_IMAGES:
            # Only the newest images go (``cap_images``): older messages change form.
            self._reset()
            start, rest = 0, messages
            return self._uncached(head, rest, convert, loop_start)
        groups = _turns(rest, start)
        settled = True
        entries: list[dict[str, Any]] = []
        pieces: list[bytes] = []
        for i, (_, group) in enumerate(groups):
            converted = convert(group, loop_start)
            encoded = [encode(e) for e in converted]
            settled = settled and i < len(groups) - 1 and not changing(group, loop_start)
            if settled:  # up to the next turn's first message (the empty ones between too)
                self._settle(messages[len(self._messages) : groups[i + 1][0]], converted, encoded)
            else:
                entries += converted
                pieces += encoded
        chunks: list[Chunk] = [encode(h) for h in head]
        chunks += [(self._json, len(self._json)), *pieces]
        return WireMessages([*head, *self._entries, *entries], chunks)

    def _settle(self, added: list[Message], converted: list[dict[str, Any]], encoded: list[bytes]) -> None:
        self._messages += added
        self._entries += converted
        for piece in encoded:
            if self._json:
                self._json += b","
            self._json += piece
        self._images += sum(len(m.parts) for m in added)

    def _uncached(
        self, head: list[dict[str, Any]], messages: list[Message], convert: Convert, loop_start: set[str]
    ) -> WireMessages:
        from .wire import turns  # with ``cap_images``: the newest images only

        entries = [*head]
        for group in turns(messages):
            entries += convert(group, loop_start)
        return WireMessages(entries, [encode(e) for e in entries])


def _form_key(form: object) -> object:
    """What to compare of an image source: a run makes ``partial(read, session_dir)`` per request."""
    if isinstance(form, functools.partial):
        return (form.func, form.args, tuple(form.keywords.items()))
    return form


def _turns(messages: list[Message], offset: int) -> list[tuple[int, list[Message]]]:
    """``wire.turns`` of messages that need no image capping, each turn with its first index."""
    groups: list[tuple[int, list[Message]]] = []
    for i, msg in enumerate(messages, offset):
        if not sendable(msg):
            continue
        if groups and groups[-1][1][0].role == msg.role:
            groups[-1][1].append(msg)
        else:
            groups.append((i, [msg]))
    return groups
