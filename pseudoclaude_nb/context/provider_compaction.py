"""The api strategy: the provider manages the context itself (issue 31, ``--strategy api``).

Before each agent request it asks the provider (``ManagesContext``) for server-side
compaction at the strategy's trigger — the Layer 2 line, so all three strategies act at the
same estimate — and, when ``api_clear_tool_results`` is set, for the clearing of old tool
results. The host summarizes nothing.

What comes back: a reply whose first block is a ``compaction`` block (kept on the answer as a
``Reasoning(kind="compaction")``, verbatim) says the provider summarized everything before
it, and drops that from every later request. The strategy makes the conversation say so:
right after the answer (``after_response``), or at the next request for a log that ended
between the two, it replaces the conversation by the messages from that answer on — a
``compact`` replace with a ``compact`` entry (trigger ``server``), exactly like Layer 2's —
so resume, ``%context``, ``--at``, the gauge, the timeline and ``%compact --undo`` see it.

An undo restores the messages before it; the undone compaction block is dropped from the
answer that carried it (``undone``), or the provider would drop them again at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, SessionWriteError, ToolError
from ..events import Compacted
from ..messages import Message
from ..providers.base import ManagesContext, Provider, ServerContext
from ..session.entries import CompactEntry
from ..session.loader import LoadResult
from . import layer2
from .confirm import Review
from .handoff import Intent
from .layer1 import Emit, ignore
from .strategy import Marks

if TYPE_CHECKING:
    from ..history import HistoryIndex
    from ..tools import ToolRegistry
    from ..tools.registry import Tool
    from .settings import CompactSettings
    from .state import SharedState

COMPACTION = "compaction"
TRIGGER = "server"  # the compact entry's and the event's trigger: the provider compacted
MARK = "server compaction"


def unsupported(provider_name: str) -> ConfigError:
    """``--strategy api`` with a provider that cannot manage the context: what to use instead."""
    why = {
        "openai": "the OpenAI-compatible provider speaks Chat Completions, which has no "
        "server-side compaction",
        "offline": "the offline explainer asks no model at all",
    }.get(provider_name, f"the {provider_name} provider has no context management of its own")
    return ConfigError(
        f"--strategy api asks the provider to manage the context itself, and {why}. Use "
        "--provider anthropic (a model with server-side compaction, e.g. claude-sonnet-4-6), or "
        "--provider demo or scripted offline (they emulate it); or keep this provider with "
        "--strategy compact (our summary) or --strategy rollover (a handoff), per run or with "
        "%config PseudoClaude.strategy"
    )


def server_context(settings: CompactSettings) -> ServerContext:
    """What the provider is asked for under ``settings``: compaction at the Layer 2 line."""
    return ServerContext(trigger=settings.threshold, clear_tool_results=settings.clear_tool_results)


def compaction_at(messages: list[Message]) -> int | None:
    """The index of the last message that carries a compaction block (None: none does)."""
    for i in range(len(messages) - 1, -1, -1):
        if any(r.kind == COMPACTION for r in messages[i].reasoning):
            return i
    return None


def undone(messages: list[Message]) -> list[Message]:
    """``messages`` restored by an undo: a compaction block anywhere but on the first message
    is one the undo took back, so it is dropped (the answer's text and calls stay)."""
    out = messages[:1]
    for m in messages[1:]:
        if any(r.kind == COMPACTION for r in m.reasoning):
            m = m.model_copy(update={"reasoning": tuple(r for r in m.reasoning if r.kind != COMPACTION)})
        out.append(m)
    return out


class ProviderCompactionStrategy:
    name = "api"
    # Told apart by this (``make_provider`` refuses a provider without ``ManagesContext``).
    needs_server_context = True

    def __init__(self, state: SharedState) -> None:
        self.state = state
        # Whether the whole conversation was looked at for a compaction block not yet replaced
        # (once per strategy object and per restore: each answer is looked at as it comes).
        self.caught_up = False

    @staticmethod
    def marks_for(settings: CompactSettings) -> Marks:
        return ((MARK, settings.threshold),)

    def marks(self) -> Marks:
        return self.marks_for(self.state.settings)

    def threshold(self) -> int:
        return self.state.settings.threshold

    def phase(self) -> str:
        return "normal"

    def sections(self) -> list[tuple[str, str]]:
        return []  # the provider compacts on its own: the model is told nothing

    def tools(self, history: HistoryIndex, emit: Emit) -> list[Tool]:
        return []

    def describe(self) -> dict[str, Any]:
        return {}

    def hands_off_due(self, estimate: int) -> bool:
        return False

    def before_request(
        self, estimate: int, provider: Provider, emit: Emit, review: Review | None = None
    ) -> bool:
        if not isinstance(provider, ManagesContext):
            raise unsupported(provider.name)
        provider.server_context = server_context(self.state.settings)
        if self.caught_up:
            return False
        # A log that ended between an answer with a compaction block and its replace (a crash),
        # or a session that was under another strategy: the conversation catches up first.
        self.caught_up = True
        messages = self.state.conversation.messages()
        at = compaction_at(messages)
        return bool(at) and self._replace_from(messages, at or 0, emit)

    def after_response(self, emit: Emit = ignore) -> bool:
        """The answer just in carries a compaction block: replace the conversation by the messages
        from it on (what the provider reads from now on). True when it replaced."""
        last = self.state.conversation.last()
        if last is None or not any(r.kind == COMPACTION for r in last.reasoning):
            return False
        messages = self.state.conversation.messages()
        return len(messages) > 1 and self._replace_from(messages, len(messages) - 1, emit)

    def _replace_from(self, messages: list[Message], at: int, emit: Emit) -> bool:
        s = self.state
        new = messages[at:]
        before = s.estimate_of(messages)
        # The usage of the answer that carried the block measured the compacted request: it
        # stays the anchor, now at the new length.
        measured = s.anchor[0] if s.anchor is not None and s.anchor[1] == len(messages) else None
        failed = s.replace_or_keep("compact", messages, new)
        if failed is not None:
            emit(Compacted(TRIGGER, before, before, False, failed))
            raise SessionWriteError(
                f"the provider's compaction could not be written to the log: {failed}. The "
                "conversation is as it was and is written again on the next write; free disk space"
            )
        if measured is None:
            s.reset_anchor(new)
        else:
            s.anchor, s.observed = (measured, len(new)), None
        s.compactions += 1
        s.preview = None
        after = s.anchor[0] if s.anchor is not None else s.estimate_of(new)
        result = Compacted(TRIGGER, before, after, True)
        s.breaker.record(True, TRIGGER)
        s.record.record(
            CompactEntry.new(trigger=TRIGGER, before_tokens=before, after_tokens=after, ok=True, error=None)
        )
        s.last_compact = result
        emit(result)
        return True

    def recover(self, provider: Provider, emit: Emit, review: Review | None = None) -> bool:
        # The provider refused the prompt as too long before its own compaction could run (a
        # trigger above what the window holds): our Layer 2 once, as under compact.
        return layer2.recover(self.state, provider, emit, review)

    def surface(self, tools: ToolRegistry) -> ToolRegistry:
        return tools

    def restore(self, loaded: LoadResult) -> None:
        self.caught_up = False  # the compaction blocks are in the messages: looked at before the next request

    def declare(self, intent: Intent, emit: Emit) -> str:
        raise ToolError("new_context works only with --strategy rollover; keep working in this window")
