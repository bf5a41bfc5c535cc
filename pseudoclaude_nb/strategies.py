"""Write your own context strategy: a policy the host asks, and actions it applies.

A strategy is a class with a ``name`` and one pure method, ``decide(view) -> action``. The
host asks it before each model request, when the provider says the prompt is too long, after
each answer and when you run ``%compact``; it hands over a read-only ``View`` of the context
and applies the action that comes back. Everything with a side effect is the host's: keeping
tool calls and their results together, the atomic replace in the session log (one write,
one fsync), the usage anchor, the breaker, the log entry naming the strategy, pins,
``confirm_compaction``, ``%compact --preview``/``--undo``, resume and fork.

What a strategy adds to each request is declared on the class, never probed: system
``sections``, host ``tools`` (``new_context``, ``search_history``) and ``server_context``
(ask the provider to manage the window itself). Load one with ``%agent --strategy
MODULE:CLASS``, ``%config PseudoClaude.strategy = "MODULE:CLASS"`` or the entry-point group
``pseudoclaude_nb.strategies``. ``docs/strategies.md`` has the guide and an example.

This module imports nothing heavy: a strategy file that imports it loads in a blink.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, NamedTuple, overload

# Why the host asks: ``before`` a model request; the provider said the prompt is ``too_long``
# (shrink once, or the run stops); an ``answer`` just came in; the person ran ``%compact``
# (``manual``). ``status``: not a decision, what ``phase``/``describe`` are shown with.
Trigger = Literal["before", "too_long", "answer", "manual", "status"]
# What a message is: plain ``text``; an answer with ``tool_call``s; a ``tool_result``; a
# ``summary`` standing for older messages (a compaction's or a hand-off's, the host's or the
# provider's); a host ``note`` (rollover's reminder).
Kind = Literal["text", "tool_call", "tool_result", "summary", "note"]
# The host tools a strategy may declare (``Strategy.tools``).
HOST_TOOLS = ("new_context", "search_history")


# --- what the host shows a strategy ------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """The lines of this window under the settings (tokens)."""

    window: int  # the model's context window
    threshold: int  # where the built-in compaction starts: window − summary reserve − safety margin
    remind: int  # rollover's reminder
    base: int  # rollover's fallback (the base limit)
    hard: int  # rollover's hard limit: window − output reserve


@dataclass(frozen=True)
class MessageView:
    """One message of the conversation, as a strategy sees it."""

    id: str  # what ``Drop`` and ``Spill`` name
    role: str  # user | assistant
    kind: Kind
    tokens: int  # this message's estimate (the session's calibrated ratio)
    # The request it came from (an answer) or first went into (the rest), counted in this
    # window: one more than the answers before it.
    step: int
    spilled: bool  # a tool result Layer 1 moved to a file (the conversation holds its preview)
    tools: tuple[str, ...] = ()  # the tools an answer calls, or the tool a result is from
    call_ids: tuple[str, ...] = ()  # the calls an answer makes, or the call a result answers


class Messages(Sequence[MessageView]):
    """The conversation, read-only; each message is built when first read, so a strategy that
    never looks at the messages (or stops at the first it needs) costs the host nothing more."""

    __slots__ = ("_build", "_built", "_length")

    def __init__(self, length: int, build: Callable[[int], MessageView]) -> None:
        self._length, self._build = length, build
        self._built: dict[int, MessageView] | None = None

    @overload
    def __getitem__(self, index: int) -> MessageView: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[MessageView]: ...
    def __getitem__(self, index: int | slice) -> MessageView | Sequence[MessageView]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(self._length)))
        i = index + self._length if index < 0 else index
        if not 0 <= i < self._length:
            raise IndexError("message index out of range")
        if self._built is None:
            self._built = {}
        view = self._built.get(i)
        if view is None:
            view = self._built[i] = self._build(i)
        return view

    def __len__(self) -> int:
        return self._length

    def __iter__(self) -> Iterator[MessageView]:
        return (self[i] for i in range(self._length))

    def __repr__(self) -> str:
        return f"Messages({self._length} messages)"


class View(NamedTuple):
    """Where the context stands when the host asks (read-only: a tuple, built for one question)."""

    trigger: Trigger
    window: int
    estimate: int  # tokens of the next request: the provider's last count plus what came after
    threshold: int  # the built-in compaction line (``limits.threshold``)
    limits: Limits
    pins: tuple[str, ...]  # the person's pins (system text: no action drops them)
    handoff: str | None  # the hand-off the model declared with new_context, rendered; None: none
    notes: frozenset[str]  # the kinds of host note this window holds (``Note.kind``)
    # For a strategy with ``server_context``: the id of a message whose provider compaction
    # the conversation does not follow yet (``ServerCompacted`` adopts it); else None.
    server_compaction: str | None
    # For a strategy with ``server_context``: whether the provider compacts at the threshold on
    # its own. False once the window begins with its on-demand compaction (Anthropic takes no
    # threshold compaction beside one): compact yourself, ``Summarize(native=True)``. Else False.
    server_compacts: bool
    compactions: int  # replaces by compaction in this session
    rollovers: int  # hand-offs committed in this session
    breaker_open: bool  # automatic compaction failed too often: ``Summarize`` before a request waits
    messages: Messages

    @property
    def step(self) -> int:
        """The next request's number in this window: one more than the answers it holds."""
        if not self.messages:
            return 1
        last = self.messages[-1]
        return last.step + 1 if last.role == "assistant" else last.step


# --- what a strategy answers: actions ------------------------------------------------------------


def _ids(ids: str | Iterable[str]) -> tuple[str, ...]:
    return (ids,) if isinstance(ids, str) else tuple(ids)


@dataclass(frozen=True)
class Keep:
    """Change nothing."""


@dataclass(frozen=True, init=False)
class Spill:
    """Move these tool results to files (Layer 1): the conversation keeps a preview of each.
    Naming a tool call spills its results; a result already spilled stays as it is."""

    ids: tuple[str, ...]

    def __init__(self, ids: str | Iterable[str]) -> None:
        object.__setattr__(self, "ids", _ids(ids))


@dataclass(frozen=True, init=False)
class Drop:
    """Take these messages out of the conversation (they stay in the log and history search).
    A tool call and its results go together: naming one half drops the whole pair, and the
    host says so."""

    ids: tuple[str, ...]

    def __init__(self, ids: str | Iterable[str]) -> None:
        object.__setattr__(self, "ids", _ids(ids))


@dataclass(frozen=True)
class Summarize:
    """Replace the older messages by a summary the model writes; the newer ones stay verbatim.

    ``upto``: summarize the messages before this one (None: keep the recent tail the
    settings give, ``recent_tokens``). ``instructions``: added to the summarizing prompt.
    ``native``: the provider writes it with its own on-demand compaction where it has one
    (Anthropic's ``compaction``, OpenAI's ``/responses/compact``: its block stands for the older
    messages, verbatim; ``instructions`` are ours only), else our summary as without it."""

    upto: str | None = None
    instructions: str | None = None
    native: bool = False


@dataclass(frozen=True)
class Handoff:
    """Start a fresh window: the conversation becomes one message with the original request,
    the hand-off (the model's, declared with ``new_context``, else one the host writes from the
    window) and the related files. ``note``: a line added to that message."""

    note: str | None = None


@dataclass(frozen=True)
class Note:
    """Tell the model something: a host note appended to the conversation (logged like any
    message). ``kind`` marks it (``View.notes`` holds the kinds this window has)."""

    text: str
    kind: str | None = None


@dataclass(frozen=True)
class Restrict:
    """Offer only ``tools`` in the next request (any other call is refused) and tell the
    model why with ``note`` (a host note, like ``Note``)."""

    tools: tuple[str, ...]
    note: str
    kind: str | None = None


@dataclass(frozen=True)
class ServerCompacted:
    """The provider compacted (``View.server_compaction``): the conversation starts at message
    ``at`` from now on, as the provider reads it."""

    at: str


Action = Keep | Spill | Drop | Summarize | Handoff | Note | Restrict | ServerCompacted
ACTIONS: tuple[type, ...] = (Keep, Spill, Drop, Summarize, Handoff, Note, Restrict, ServerCompacted)


# --- a strategy ------------------------------------------------------------------------------------


class Strategy(ABC):
    """A context strategy: subclass it, give it a ``name`` and write ``decide``.

    ``decide`` must be pure: read the view, return an action, change nothing (the host may
    ask twice, or ask only to show what you would do). What the strategy adds to a request
    is declared here, on the class.
    """

    name: ClassVar[str] = ""  # shown by %context, the gauge and the log; default: the class name
    sections: ClassVar[tuple[tuple[str, str], ...]] = ()  # (title, text) system prompt sections
    tools: ClassVar[tuple[str, ...]] = ()  # host tools to offer: names from ``HOST_TOOLS``
    server_context: ClassVar[bool] = False  # ask the provider to manage the window (``--strategy api``)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            cls.name = cls.__name__

    @abstractmethod
    def decide(self, view: View) -> Action:
        """What the host should do now (``Keep()`` to do nothing)."""

    def acts_at(self, limits: Limits) -> int:
        """The estimate where this strategy starts to act (the gauge's and %context's threshold)."""
        return limits.threshold

    def marks(self, limits: Limits) -> tuple[tuple[str, int], ...]:
        """(label, tokens) lines the gauge and %context draw."""
        return ((self.name, self.acts_at(limits)),)

    def phase(self, view: View) -> str:
        """Where this strategy stands in the window, for the gauge (``normal`` when it has no phases)."""
        return "normal"

    def describe(self, view: View) -> dict[str, Any]:
        """What %context --json shows of this strategy besides its name and marks."""
        return {}

    def events(self, action: Action, view: View) -> tuple[Any, ...]:
        """Run events the host emits after applying ``action`` besides its own (default: none)."""
        return ()


__all__ = [
    "ACTIONS",
    "HOST_TOOLS",
    "Action",
    "Drop",
    "Handoff",
    "Keep",
    "Kind",
    "Limits",
    "MessageView",
    "Messages",
    "Note",
    "Restrict",
    "ServerCompacted",
    "Spill",
    "Strategy",
    "Summarize",
    "Trigger",
    "View",
]
