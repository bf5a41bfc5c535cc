"""The provider-neutral message model, and the one validator every request passes.

A user message carries text *or* one tool result; an assistant message carries text
and/or tool calls. Providers translate these to their wire formats; nothing else here
knows about a wire format.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from .errors import ProtocolError

# The kinds of host note (``Message.host``): rollover's one-time reminder and its fallback
# notice. A str, not a Literal: a later version's kind must not make a log line unreadable.
HOST_REMIND = "rollover-remind"
HOST_FALLBACK = "rollover-fallback"


def new_id() -> str:
    return uuid.uuid4().hex


class ToolCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        f = self.__dict__  # the fields, where pydantic keeps them: dict reads, on every append
        return {"id": f["id"], "name": f["name"], "arguments": f["arguments"]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        return cls.model_validate(data)


class ToolResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    call_id: str
    content: str
    is_error: bool = False
    # --- durable marks (issue 12): serialized only when set, so old logs stay byte-identical.
    spilled: str | None = None  # Layer 1 preview: the spill file it stands for (relative to the session)
    # issue-14: what the tool displayed besides its text, as (bytes, media type) pairs. Never
    # serialized: the runner stores the bytes in the session and the message gets image parts.
    _images: tuple[tuple[bytes, str], ...] = PrivateAttr(default=())

    @property
    def images(self) -> tuple[tuple[bytes, str], ...]:
        return self._images

    def with_images(self, images: tuple[tuple[bytes, str], ...]) -> ToolResult:
        self._images = tuple(images)
        return self

    def to_dict(self) -> dict[str, Any]:
        f = self.__dict__
        data: dict[str, Any] = {"call_id": f["call_id"], "content": f["content"], "is_error": f["is_error"]}
        if f["spilled"] is not None:
            data["spilled"] = f["spilled"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolResult:
        return cls.model_validate(data)


# Usage fields a log line carries only when set, so usage lines keep their layout.
OPTIONAL_USAGE = (
    "cache_creation_1h_input_tokens",
    "compaction_input_tokens",
    "compaction_output_tokens",
    "compaction_cache_creation_input_tokens",
    "compaction_cache_read_input_tokens",
    "cleared_tool_uses",
    "cleared_input_tokens",
    "cache_miss_reason",
    "cache_missed_input_tokens",
    "reasoning_output_tokens",
)


class Usage(BaseModel):
    model_config = ConfigDict(frozen=True)

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    # issue 31: the part of the cache writes made with the 1-hour TTL (Anthropic's
    # ``usage.cache_creation.ephemeral_1h_input_tokens``), priced at the 1-hour write rate; the
    # rest of ``cache_creation_input_tokens`` is the 5-minute default. Written to the log only
    # when not 0, so usage lines keep their layout (and older logs, without it, read as 0).
    cache_creation_1h_input_tokens: int = 0
    # issue 31, ``--strategy api``: what the provider's own compaction iterations of this
    # request used (Anthropic's ``usage.iterations`` entries of type ``compaction``). Billed,
    # but not part of the context the answer read: never in ``prompt_total`` (nor an anchor).
    # Written to the log only when not 0, like the 1-hour writes.
    compaction_input_tokens: int = 0
    compaction_output_tokens: int = 0
    # issue 43: the compaction iterations' cache writes and reads, priced at their own rates
    # (``compaction_input_tokens`` is then the iteration's plain input only; an older log, which
    # summed all three there, reads as before).
    compaction_cache_creation_input_tokens: int = 0
    compaction_cache_read_input_tokens: int = 0
    # issue 43, what the provider said about this request's prompt (Anthropic): context editing
    # cleared this many tool uses and input tokens (``context_management.applied_edits``), and
    # the cache diagnosis (``diagnostics.cache_miss_reason``: its type, and the tokens it says
    # would have been read had the prefix matched). Written only when set, like the above.
    cleared_tool_uses: int = 0
    cleared_input_tokens: int = 0
    cache_miss_reason: str | None = None
    cache_missed_input_tokens: int = 0
    # issue 43: the part of ``output_tokens`` the model spent reasoning (OpenAI Responses
    # ``output_tokens_details.reasoning_tokens``): already in output_tokens, kept for the record.
    reasoning_output_tokens: int = 0

    @property
    def prompt_total(self) -> int:
        # With prompt caching, input_tokens excludes cached tokens; the window holds all three.
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            cache_creation_1h_input_tokens=self.cache_creation_1h_input_tokens
            + other.cache_creation_1h_input_tokens,
            compaction_input_tokens=self.compaction_input_tokens + other.compaction_input_tokens,
            compaction_output_tokens=self.compaction_output_tokens + other.compaction_output_tokens,
            compaction_cache_creation_input_tokens=self.compaction_cache_creation_input_tokens
            + other.compaction_cache_creation_input_tokens,
            compaction_cache_read_input_tokens=self.compaction_cache_read_input_tokens
            + other.compaction_cache_read_input_tokens,
            cleared_tool_uses=self.cleared_tool_uses + other.cleared_tool_uses,
            cleared_input_tokens=self.cleared_input_tokens + other.cleared_input_tokens,
            # A diagnosis describes one request: the sum keeps the later one's.
            cache_miss_reason=other.cache_miss_reason or self.cache_miss_reason,
            cache_missed_input_tokens=self.cache_missed_input_tokens + other.cache_missed_input_tokens,
            reasoning_output_tokens=self.reasoning_output_tokens + other.reasoning_output_tokens,
        )

    def to_dict(self) -> dict[str, Any]:
        data = self.model_dump()
        for optional in OPTIONAL_USAGE:
            if not data[optional]:
                del data[optional]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        return cls.model_validate(data)


# --- reasoning and stops (issue 15) ------------------------------------------------------
# Reasoning is the model's own working, kept with the assistant message it preceded so it
# can go back where a protocol requires it (Anthropic thinking blocks before tool_use,
# DeepSeek-style ``reasoning_content`` in a tool loop) — also after a resume. It is never
# the answer. ``stop_reason`` is set only for stops a reader must know about.
# ``reasoning_item`` (issue 43): an OpenAI Responses reasoning output item, kept whole as JSON in
# ``data`` (its encrypted content goes back in a stateless tool loop); ``text`` is its summary.
ReasoningKind = Literal[
    "thinking", "redacted_thinking", "reasoning_content", "reasoning", "compaction", "reasoning_item"
]
NotableStop = Literal["max_tokens", "refusal"]


ORIGIN_OPENAI = "openai"
ORIGIN_ON_DEMAND = "on-demand"


class Reasoning(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: ReasoningKind  # Anthropic block type, or the OpenAI-compatible field it came in
    text: str = ""
    signature: str | None = None  # Anthropic thinking: must go back unchanged
    # Anthropic redacted_thinking: opaque, goes back unchanged. ``compaction`` (issue 31,
    # ``--strategy api``): the provider's compaction block as the JSON text it came in, every
    # field (summary, encrypted content, signature) kept verbatim to go back as it is.
    data: str | None = None
    # issue 43: which protocol made an opaque part, where that decides whether it may go back
    # as it is: None for Anthropic's (every part before this field), ``openai`` for a Responses
    # compaction item, ``on-demand`` for an Anthropic block from on-demand compaction (the API
    # takes it with no compaction edit beside it). Serialized only when set.
    origin: str | None = None  # ORIGIN_OPENAI, ORIGIN_ON_DEMAND, or None

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


# --- issue-13: the notebook activity block at the start of a user message ----------------
class NotebookMark(BaseModel):
    """Marks a user message whose content begins with the notebook activity block.

    ``chars`` is the block's length in the content (the prompt follows it); ``cells`` how
    many cells it shows. Readers find the block by this field, never by its delimiter text.
    """

    model_config = ConfigDict(frozen=True)

    chars: int
    cells: int = 0


# --- issue-14: image parts (SPEC §18) -----------------------------------------------------
class ImagePart(BaseModel):
    """A reference to an image file in the session directory: never the bytes themselves."""

    model_config = ConfigDict(frozen=True)

    type: Literal["image"] = "image"
    path: str  # relative to the session directory: images/<sha256>.<ext>
    media_type: str
    bytes: int
    sha256: str
    width: int = 0
    height: int = 0

    def note(self, why: str = "") -> str:
        """The text that stands in for the image where it cannot be sent."""
        size = f", {self.width}x{self.height}" if self.width and self.height else ""
        tail = f": {why}" if why else ""
        return f"[image {self.path} ({self.media_type}{size}, {self.bytes:,} bytes){tail}]"


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=new_id)
    role: Literal["user", "assistant"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_result: ToolResult | None = None
    ts: float = Field(default_factory=time.time)
    reasoning: tuple[Reasoning, ...] = ()  # issue 15: serialized only when set
    stop_reason: NotableStop | None = None  # issue 15: "max_tokens" (text cut) or "refusal"
    notebook: NotebookMark | None = None  # issue-13: see NotebookMark
    parts: tuple[ImagePart, ...] = ()  # issue-14: image parts, serialized only when set
    # --- durable marks (issue 12): serialized only when set, so old logs stay byte-identical.
    host: str | None = None  # a note the host added (not the user's words): its kind

    @field_validator("reasoning", mode="before")
    @classmethod
    def _readable_reasoning(cls, value: Any) -> Any:
        # A log is read leniently: a reasoning value of another shape (an older or newer
        # writer) is left out, never a reason to lose the message.
        if not isinstance(value, (list, tuple)):
            return ()
        parts = []
        for item in value:
            try:
                parts.append(item if isinstance(item, Reasoning) else Reasoning.model_validate(item))
            except ValidationError:
                continue
        return tuple(parts)

    @field_validator("stop_reason", mode="before")
    @classmethod
    def _readable_stop(cls, value: Any) -> Any:
        return value if value in ("max_tokens", "refusal") else None

    def to_dict(self, head: dict[str, Any] | None = None) -> dict[str, Any]:
        """The message as JSON-ready data: ``id`` and ``ts`` first, then the rest.

        ``head``: a dict to add the fields to, after its own keys (the log entry's ``v`` and
        ``type``): every append builds its entry this way, as one dict.
        """
        # The fields read from the instance dict (pydantic keeps them there): a model's
        # attribute read costs twice a dict read, and every append encodes a message.
        f = self.__dict__
        calls, result = f["tool_calls"], f["tool_result"]
        data: dict[str, Any] = {} if head is None else head
        data["id"] = f["id"]
        data["ts"] = f["ts"]
        data["role"] = f["role"]
        data["content"] = f["content"]
        data["tool_calls"] = [c.to_dict() for c in calls] if calls else []
        data["tool_result"] = result.to_dict() if result is not None else None
        if f["reasoning"]:
            data["reasoning"] = [r.to_dict() for r in f["reasoning"]]
        if f["stop_reason"]:
            data["stop_reason"] = f["stop_reason"]
        if f["notebook"] is not None:
            data["notebook"] = f["notebook"].model_dump()
        if f["parts"]:
            data["parts"] = [p.model_dump() for p in f["parts"]]
        if f["host"] is not None:
            data["host"] = f["host"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Message:
        return cls.model_validate(data)

    @property
    def is_tool_result(self) -> bool:
        return self.tool_result is not None

    @property
    def prompt_text(self) -> str:
        """The content without a leading notebook activity block (what the user typed)."""
        return self.content[self.notebook.chars :].lstrip() if self.notebook else self.content

    def text_for_title(self) -> str:
        return " ".join(self.prompt_text.split())

    @property
    def is_spill_preview(self) -> bool:
        """A tool result Layer 1 replaced by a preview (its ``spilled`` field, never its text)."""
        return self.tool_result is not None and self.tool_result.spilled is not None


# --- the request validator -------------------------------------------------------------


def open_calls(messages: list[Message]) -> tuple[Message | None, list[ToolCall]]:
    """The last answer with tool calls when only tool results follow it, and those of its calls
    that have no result yet (the call running now, or calls a stopped run left open).

    The runner runs a step's calls in order and appends each result before the next, so
    the first open call is the one running. ``(None, [])`` when the conversation does not
    end in a tool exchange.
    """
    i = len(messages)
    while i > 0 and messages[i - 1].tool_result is not None:
        i -= 1
    if i == 0 or not messages[i - 1].tool_calls:
        return None, []
    answered = {m.tool_result.call_id for m in messages[i:] if m.tool_result is not None}
    return messages[i - 1], [call for call in messages[i - 1].tool_calls if call.id not in answered]


def pairing_problems(messages: list[Message]) -> list[str]:
    """Describe every break of the tool protocol; an empty list means the request is valid.

    The rule: the results of an assistant message's tool calls follow it directly, one per
    call, before any other message; no result appears without its call.
    """
    problems: list[str] = []
    open_calls: dict[str, str] = {}
    for i, msg in enumerate(messages):
        if msg.tool_result is not None:
            cid = msg.tool_result.call_id
            if cid in open_calls:
                del open_calls[cid]
            else:
                problems.append(f"message {i}: result for unknown or already answered call {cid}")
            continue
        if open_calls:
            problems.append(f"message {i}: calls {sorted(open_calls)} have no result")
            open_calls.clear()
        if msg.role == "assistant":
            for call in msg.tool_calls:
                if call.id in open_calls:
                    problems.append(f"message {i}: duplicate call id {call.id}")
                open_calls[call.id] = call.name
        if msg.role == "user" and msg.tool_calls:
            problems.append(f"message {i}: a user message cannot carry tool calls")
    if open_calls:
        problems.append(f"end: calls {sorted(open_calls)} have no result")
    return problems


def repair_pairing(messages: list[Message]) -> list[Message]:
    """Return a protocol-valid copy: unanswered calls dropped, orphan results dropped.

    Results are never invented: the host cannot know whether a tool ran.
    """
    out: list[Message] = []
    i = 0
    while i < len(messages):
        msg = messages[i]
        if msg.tool_result is not None:
            i += 1  # an orphan: its call was not directly before it
            continue
        if msg.role == "assistant" and msg.tool_calls:
            j = i + 1
            results: list[Message] = []
            while j < len(messages) and messages[j].tool_result is not None:
                results.append(messages[j])
                j += 1
            ids = {c.id for c in msg.tool_calls}
            seen: set[str] = set()
            kept_results = []
            for r in results:
                cid = r.tool_result.call_id  # type: ignore[union-attr]
                if cid in ids and cid not in seen:
                    seen.add(cid)
                    kept_results.append(r)
            calls, kept_ids = [], set()
            for c in msg.tool_calls:  # answered calls only, each id once
                if c.id in seen and c.id not in kept_ids:
                    kept_ids.add(c.id)
                    calls.append(c)
            if calls or msg.content:
                out.append(msg.model_copy(update={"tool_calls": tuple(calls)}))
                out.extend(kept_results)
            i = j
            continue
        # A user message never carries calls; drop any rather than send them.
        out.append(msg.model_copy(update={"tool_calls": ()}) if msg.tool_calls else msg)
        i += 1
    return out


class PairingCheck:
    """``validate_request`` over a conversation that grows: only the messages since the last
    valid request are walked.

    A valid request ends with every call answered, so a valid prefix leaves nothing open
    and ``pairing_problems`` of the whole equals that of the new messages alone (a result
    for a call of the prefix is "already answered" either way). The prefix is recognised
    by identity (messages are frozen) of its first and last message; anything else (a
    replace) is walked in full. A new check (each run has its own runner) starts from the
    prefixes the latest checks found valid, so a run's first request does not walk the
    whole history either.
    """

    _recent: ClassVar[list[tuple[int, Message, Message]]] = []  # (count, first, last), newest first
    _KEEP: ClassVar[int] = 4

    def __init__(self) -> None:
        self._count = 0
        self._first: Message | None = None
        self._last: Message | None = None

    def __call__(self, messages: list[Message], *, strict: bool) -> tuple[list[Message], list[str]]:
        n = 0
        mine = (self._count, self._first, self._last)
        for count, first, last in (mine, *PairingCheck._recent):
            if n < count <= len(messages) and messages[0] is first and messages[count - 1] is last:
                n = count
        if pairing_problems(messages[n:]):
            self._count = 0
            return validate_request(messages, strict=strict)
        self._count = len(messages)
        self._first, self._last = (messages[0], messages[-1]) if messages else (None, None)
        if messages:
            recent = PairingCheck._recent
            recent.insert(0, (len(messages), messages[0], messages[-1]))
            del recent[PairingCheck._KEEP :]
        return messages, []


def validate_request(messages: list[Message], *, strict: bool) -> tuple[list[Message], list[str]]:
    """The single gate before any provider: returns (messages to send, problems repaired).

    ``strict`` (tests) raises instead of repairing, because a violation is a bug.
    """
    problems = pairing_problems(messages)
    if not problems:
        return messages, []
    if strict:
        raise ProtocolError("request breaks tool pairing: " + "; ".join(problems))
    return repair_pairing(messages), problems
