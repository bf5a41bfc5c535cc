"""A request's messages converted and encoded once each, not on every step (issue 34).

Between two replaces the history only grows: each step sends the messages of the last one
and a few more. At 10,000 messages the body is ~18 MB, and converting and encoding all of it
again took ~0.5 s a step. ``EncodedHistory`` (one per provider) keeps the wire messages of
the last request's *settled* prefix, and their JSON: the next request whose messages start
with the same messages (the very same objects, as messages are immutable once in the
history, or equal ones: a resume in the same kernel) converts and encodes only what follows. A prefix ends before the last turn (the next message may join
it) and before any turn whose form depends on the running tool loop (its reasoning goes
back only while that loop runs). Anything else — a replace, a compaction, a fork, more
images than are sent (older ones then turn into notes) — starts over from the first message.

The body is then written by ``Body``: compact UTF-8 JSON as httpx writes it, sent from the
messages' JSON in pieces of a few megabytes (``dumps`` joins them, for tests and figures). The
list a provider builds its body from still holds every message as a dict (what tests and
callers read); it only carries the JSON beside.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Hashable, Iterator
from typing import Any, ClassVar, NamedTuple

import orjson

from ..messages import Message
from .base import MAX_IMAGES
from .wire import sendable

Convert = Callable[[list[Message], set[str]], list[dict[str, Any]]]
Changing = Callable[[list[Message], set[str]], bool]
# Marks the wire messages of the open tail, the last ``OPEN_TURNS`` turns (a list per turn),
# before they are encoded: Anthropic's cache breakpoints sit there and move every step.
Last = Callable[[list[list[dict[str, Any]]]], None]
OPEN_TURNS = 3  # with ``last``: the last turn and the user turn that ended the previous request


SHARED_KEYS = 4  # endpoints/models whose prefix a process keeps (each holds ~ its history's size)
# The prefix's JSON is kept in blocks of about this size, each sent as it is (one write to the
# socket). Each write costs the HTTP stack and the socket a fixed part: 18 MB in 1 MB pieces
# took ~1.5 ms more CPU a step than in 4 MB ones (issue 43). Larger blocks make the growing
# block, copied on every send, larger too: 4 MB keeps that copy under ~0.6 ms.
BLOCK = 4 << 20


class Prefix(NamedTuple):
    """The prefix's JSON as a request saw it: its full blocks, and the first ``size`` bytes of
    the block still growing (later steps only append to it: a retry sends the same bytes)."""

    blocks: tuple[bytes, ...]
    tail: bytearray
    size: int

    @property
    def length(self) -> int:
        return sum(map(len, self.blocks)) + self.size


Chunk = bytes | Prefix  # a message's JSON, or the prefix's


class WireMessages(list):
    """Wire messages (dicts, to read) with their JSON (to send), while the list is unchanged.

    The JSON is kept in pieces, the prefix's in blocks (``Prefix``): the body (``Body``) is
    sent from them a piece at a time, never joined into one 18 MB copy.
    """

    def __init__(self, entries: list[dict[str, Any]], chunks: list[Chunk], lock: threading.Lock) -> None:
        super().__init__(entries)
        self.chunks = chunks
        self.lock = lock  # the one the prefix's buffer grows under
        self._length = len(entries)

    def current(self) -> bool:
        return len(self) == self._length


def dumps(body: dict[str, Any]) -> bytes:
    """The request body as compact UTF-8 JSON (the history's list first), its ``WireMessages`` as they are."""
    return b"".join(Body(body))


class Body:
    """The request body's JSON (as ``dumps`` writes it), to send in pieces: ``content=`` for httpx.

    At 10,000 messages the body is ~18 MB. Joined into one ``bytes`` it cost a fresh 18 MB
    copy a step, and httpcore copies what is left of a ``bytes`` after each partial socket
    send (another ~18 MB or more). Sent as the prefix's full blocks (no copy at all), its
    growing block and the new messages in pieces of at most ``PIECE`` bytes, each copy is
    small; the bytes on the wire are the same. Iterable again (a retry).
    """

    PIECE = BLOCK  # the growing block goes in one copy

    def __init__(self, body: dict[str, Any]) -> None:
        # The history's list: ``messages`` (chat completions, Messages API) or ``input`` (the
        # Responses API, issue 43).
        key = "input" if isinstance(body.get("input"), WireMessages) else "messages"
        messages = body.get(key)
        self._lock: threading.Lock | None = None
        if not isinstance(messages, WireMessages) or not messages.current():
            self._parts: list[Chunk] = [encode(body)]
        else:
            self._lock = messages.lock
            rest = encode({k: v for k, v in body.items() if k != key})
            parts: list[Chunk] = [b'{"' + key.encode() + b'":[']
            first = True
            for chunk in messages.chunks:
                if isinstance(chunk, Prefix) and not chunk.length:
                    continue  # an empty prefix
                if not first:
                    parts.append(b",")
                parts.append(chunk)
                first = False
            parts.append(b"]}" if rest == b"{}" else b"]," + rest[1:])
            self._parts = parts
        self.length = sum(p.length if isinstance(p, Prefix) else len(p) for p in self._parts)

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[bytes]:
        pending: list[bytes] = []  # small pieces (new messages, punctuation), sent together
        held = 0
        for part in self._parts:
            if isinstance(part, bytes):
                pending.append(part)
                held += len(part)
                if held >= self.PIECE:
                    yield b"".join(pending)
                    pending, held = [], 0
                continue
            if pending:
                yield b"".join(pending)
                pending, held = [], 0
            yield from part.blocks
            yield from self._slices(part.tail, part.size)
        if pending:
            yield b"".join(pending)

    def _slices(self, buffer: bytearray, size: int) -> Iterator[bytes]:
        """The first ``size`` bytes of a prefix's buffer, copied a piece at a time. The lock:
        another thread's request may be growing that buffer, which a view would forbid."""
        assert self._lock is not None
        for start in range(0, size, self.PIECE):
            with self._lock, memoryview(buffer) as view:
                piece = view[start : min(size, start + self.PIECE)].tobytes()
            yield piece


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
        # The entries' JSON, comma-separated: full blocks, then the one growing. Never cleared
        # in place: a body made earlier may still hold its first bytes (a retry); a full
        # block, or a new prefix, gets a new buffer.
        self._blocks: list[bytes] = []
        self._json = bytearray()
        self._images = 0  # image parts in the prefix

    def messages(
        self,
        head: list[dict[str, Any]],
        messages: list[Message],
        convert: Convert,
        current_turn: Callable[[list[Message]], set[str]],
        changing: Changing,
        last: Last | None = None,
    ) -> WireMessages:
        """``head`` and the wire messages of ``messages``, reusing the prefix they share with the last.

        ``last`` changes the wire messages of the last ``OPEN_TURNS`` turns in place
        (Anthropic's cache breakpoints): those turns are never part of the kept prefix.
        """
        with self._lock:
            return self._messages_locked(head, messages, convert, current_turn, changing, last)

    def _messages_locked(
        self,
        head: list[dict[str, Any]],
        messages: list[Message],
        convert: Convert,
        current_turn: Callable[[list[Message]], set[str]],
        changing: Changing,
        last: Last | None,
    ) -> WireMessages:
        loop_start = current_turn(messages)
        start = len(self._messages)
        kept = messages[:start]
        # The same messages as the prefix: a list comparison checks identity first, in C (an
        # ``is`` per message through ``map`` was ~0.2 ms a step at 10,000), and compares the
        # fields only of a message that is another object: a frozen message equal to the
        # prefix's has its wire form (a resume in the same kernel loads equal copies, which
        # then replace the kept ones, so the next step finds the very same objects).
        if start > len(messages) or kept != self._messages:
            self._reset()
            start = 0
        else:
            self._messages = kept
        rest = messages[start:]
        if self._images + sum(len(m.parts) for m in rest) > MAX_IMAGES:
            # Only the newest images go (``cap_images``): older messages change form.
            self._reset()
            start, rest = 0, messages
            return self._uncached(head, rest, convert, loop_start, last)
        groups = _turns(rest, start)
        open_turns = OPEN_TURNS if last is not None else 1
        if len(groups) < open_turns and start and last is not None:
            # Fewer turns after the kept prefix than ``last`` marks (a replace kept only the
            # first messages): a marked turn would sit inside the prefix. Start over.
            self._reset()
            groups = _turns(messages, 0)
        converted_groups = [convert(group, loop_start) for _, group in groups]
        if last is not None:
            last(converted_groups[-open_turns:])
        settled = True
        entries: list[dict[str, Any]] = []
        pieces: list[bytes] = []
        for i, ((_, group), converted) in enumerate(zip(groups, converted_groups, strict=True)):
            encoded = [encode(e) for e in converted]
            settled = settled and i < len(groups) - open_turns and not changing(group, loop_start)
            if settled:  # up to the next turn's first message (the empty ones between too)
                self._settle(messages[len(self._messages) : groups[i + 1][0]], converted, encoded)
            else:
                entries += converted
                pieces += encoded
        chunks: list[Chunk] = [encode(h) for h in head]
        chunks += [Prefix(tuple(self._blocks), self._json, len(self._json)), *pieces]
        return WireMessages([*head, *self._entries, *entries], chunks, self._lock)

    def _settle(self, added: list[Message], converted: list[dict[str, Any]], encoded: list[bytes]) -> None:
        self._messages += added
        self._entries += converted
        for piece in encoded:
            if self._json or self._blocks:
                self._json += b","
            self._json += piece
            if len(self._json) >= BLOCK:
                self._blocks.append(bytes(self._json))  # copied once, then sent as it is
                self._json = bytearray()
        self._images += sum(len(m.parts) for m in added)

    def _uncached(
        self,
        head: list[dict[str, Any]],
        messages: list[Message],
        convert: Convert,
        loop_start: set[str],
        last: Last | None,
    ) -> WireMessages:
        from .wire import turns  # with ``cap_images``: the newest images only

        entries = [*head]
        converted = [convert(group, loop_start) for group in turns(messages)]
        if last is not None:
            last(converted[-OPEN_TURNS:])  # the dicts in ``entries`` too
        for turn in converted:
            entries += turn
        return WireMessages(entries, [encode(e) for e in entries], self._lock)


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
