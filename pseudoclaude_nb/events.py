"""Events a run reports to its observers (renderers, widgets, tests).

Observers only watch: nothing here calls back into the loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .cost import Spend
from .errors import PseudoClaudeError
from .messages import Message, ToolCall, ToolResult, Usage


@dataclass(frozen=True)
class StepStarted:
    step: int


@dataclass(frozen=True)
class AssistantDelta:
    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """The model's thinking as it streams: shown collapsed ("thinking…"), never as the answer."""

    text: str


@dataclass(frozen=True)
class ToolStarted:
    call: ToolCall


@dataclass(frozen=True)
class PermissionAsked:
    """The call waits for the user's answer to the permission prompt (mode ``ask``)."""

    call: ToolCall


@dataclass(frozen=True)
class PermissionAnswered:
    """The user answered; an allowed call's own time starts now (the wait is not tool time)."""

    call: ToolCall
    allowed: bool


@dataclass(frozen=True)
class ToolFinished:
    call: ToolCall
    result: ToolResult
    seconds: float


@dataclass(frozen=True)
class StepFinished:
    step: int
    usage: Usage
    message: Message
    model: str | None = None  # the model that answered: what the step's usage is priced at


@dataclass(frozen=True)
class Notice:
    text: str
    level: str = "info"


@dataclass
class RunSummary:
    status: str = "running"  # done | truncated | refused | max-steps | interrupted | error
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    seconds: float = 0.0
    session_id: str | None = None
    error: PseudoClaudeError | None = None
    final_text: str = ""
    allowed_calls: int = 0  # side-effecting tool calls let through
    refused_calls: int = 0  # side-effecting tool calls refused (read-only mode, or the user said no)
    # issue 31: every paid request of the run with its model (a retried cut answer too), and
    # the session's logged requests up to the run's end (None: no session log to read).
    spend: Spend = field(default_factory=Spend)
    session_spend: Spend | None = None


@dataclass(frozen=True)
class RunFinished:
    summary: RunSummary


@dataclass(frozen=True)
class Spilled:
    """Layer 1 moved a tool result to a file."""

    call_id: str
    tool: str
    path: str  # relative to the workspace
    bytes: int
    reason: str  # "single" (over spill_bytes) | "batch" (over spill_batch_bytes) | "manual"


@dataclass(frozen=True)
class CompactStarted:
    trigger: str  # auto | manual | forced
    before_tokens: int


@dataclass(frozen=True)
class Compacted:
    """A Layer 2 attempt ended (``ok`` False: nothing was replaced)."""

    trigger: str
    before_tokens: int
    after_tokens: int
    ok: bool
    error: str | None = None


@dataclass(frozen=True)
class Dropped:
    """A strategy took messages out of the conversation (``Drop``); they stay in the log."""

    strategy: str
    messages: int  # taken out, whole pairs included
    before_tokens: int
    after_tokens: int
    widened: int = 0  # of them, the other halves of the tool call/result pairs it named


@dataclass(frozen=True)
class ContextState:
    """Where the context stands before a request: for gauges."""

    estimated_tokens: int
    anchor_tokens: int  # part of the estimate the provider measured
    context_window: int
    threshold: int
    breaker_open: bool
    spills: int
    compactions: int
    strategy: str = "compact"  # the strategy's name: compact | rollover | api | one of yours
    # (label, tokens) lines the strategy acts at: the Layer 2 line, or rollover's remind,
    # base (fallback) and hard limits. Gauges draw these.
    marks: tuple[tuple[str, int], ...] = ()
    rollovers: int = 0
    phase: str = "normal"  # rollover: normal | reminded | fallback | declared


@dataclass(frozen=True)
class RolloverReminded:
    """The one-time notice of a window: finish up and call new_context."""

    estimated_tokens: int
    base_limit: int


@dataclass(frozen=True)
class RolloverFallback:
    """At the base limit: this request offers only ``tools``; other calls are refused."""

    estimated_tokens: int
    tools: tuple[str, ...]


@dataclass(frozen=True)
class RolloverDeclared:
    """The model called new_context: the switch happens at the next pre-step boundary."""

    call_id: str | None
    message_uuid: str | None
    related_files: int
    missing_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class RolloverCommitted:
    """The conversation was replaced by the first message of a new window."""

    reason: str  # model | hard-limit
    before_tokens: int
    after_tokens: int
    session_id: str | None
    message_uuid: str | None  # the anchor in the old window
    related_files: int


@dataclass(frozen=True)
class MemoryUpdated:
    """The background memory update of an earlier run has finished (said at the next run)."""

    changes: tuple[str, ...]  # "created project/package manager", …
    ignored: tuple[str, ...] = ()  # invalid operations, with the reason
    error: str | None = None
    session_id: str | None = None


RunEvent = (
    StepStarted
    | AssistantDelta
    | ReasoningDelta
    | ToolStarted
    | PermissionAsked
    | PermissionAnswered
    | ToolFinished
    | StepFinished
    | Notice
    | RunFinished
    | Spilled
    | CompactStarted
    | Compacted
    | Dropped
    | ContextState
    | RolloverReminded
    | RolloverFallback
    | RolloverDeclared
    | RolloverCommitted
    | MemoryUpdated
)
Listener = Callable[[RunEvent], None]
