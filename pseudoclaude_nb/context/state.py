"""The host's state of one session's context: one per session, kept when the strategy is switched.

``SharedState`` holds what the context layer knows about one session's conversation —
the usage anchor and the learned calibration, the spill ledger, the breaker, the counters,
the pending tool batch, the system prompt and tool schemas of the next request, and what
outlives one answer of a strategy (a declared hand-off, the host notes of this window, the
tools the next request is restricted to) — and rebuilds it from the log on resume. Only the
host's mechanisms (``host``, ``apply``, ``layer1``, ``layer2``, ``rollover``,
``provider_compaction``, ``undo``) write it; a strategy sees a read-only ``View``. It never
emits events and never talks to a provider: the mechanisms get those on each call.

Per step it costs the same at 100 messages as at 10,000: the estimate looks only at the
messages after the anchor. Each response's usage also calibrates the estimate
(``estimate.Calibration``): the messages between two consecutive anchors are what the
provider counted in between. A replace, or a new system prompt or tool list
(``configure``), breaks the pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..conversation import Conversation
from ..cost import Spend
from ..errors import HookError, SessionWriteError
from ..events import Compacted
from ..messages import Message, ToolResult, Usage
from ..session.record import NO_RECORD, SessionRecord
from ..session.writer import SessionWriter
from . import estimate as _estimate
from .breaker import Breaker
from .estimate import Calibration, estimate_request, message_bytes
from .settings import CompactSettings
from .spill import Ledger

if TYPE_CHECKING:
    from ..session.loader import LoadResult  # a stored session's (restore): a new one loads nothing
    from .handoff import Intent
    from .plan import Preview


class SharedState:
    def __init__(
        self,
        conversation: Conversation,
        settings: CompactSettings | None = None,
        *,
        session_dir: Path | None = None,
        workspace: Path | None = None,
        writer: SessionWriter | None = None,
    ) -> None:
        self.conversation = conversation
        self.settings = settings or CompactSettings()
        self.session_dir = session_dir
        self.workspace = workspace
        self.writer = writer  # for what undo reads of the log (its path, its markers)
        # Notes, spill, compact and rollover entries: the one route to the log besides messages.
        self.record: SessionRecord = writer if writer is not None else NO_RECORD
        self.ledger = Ledger()
        self.breaker = Breaker(self.settings.breaker_limit)
        self.anchor: tuple[int, int] | None = None  # (tokens, conversation length)
        self.calibration = Calibration()
        # The last anchor a provider reported (tokens, length, the message it ends at), while
        # nothing broke the pair.
        self.observed: tuple[int, int, Message | None] | None = None
        self.compactions = 0
        # Digits a token holds on this session's server (issue 32): 1 on an OpenAI-compatible
        # local server (dense kinds count by their pieces), 0 for a hosted model (bytes / 3.5).
        self._digits = _estimate.DIGITS_HOSTED
        self.rollovers = 0
        self.last_compact: Compacted | None = None
        self.pending_batch: list[str] = []  # call ids of the last tool batch, not yet checked together
        self.system = ""
        self.tools: list[dict[str, Any]] = []
        # The estimate of the system prompt and tool schemas the anchor's request carried
        # (issue 41): a pin added since is a system section the next request carries and the
        # provider's figure lacks. None: not known yet (an anchor restored from a log), taken
        # as the first system configured.
        self.anchor_head: int | None = None
        self._head: tuple[str, list[dict[str, Any]], int] = ("", self.tools, 0)  # (system, tools, tokens)
        self.breaker_noted = False  # said once per run that the breaker skips Layer 2
        # Huge results a full disk kept from their spill files: call id -> (tool, the full
        # result). The conversation holds a bounded stand-in until Layer 1 writes them.
        self.unsaved: dict[str, tuple[str, ToolResult]] = {}
        self.unsaved_noted = False  # said once per run that they still wait
        # The last ``%compact --preview``, in memory only: ``--apply`` commits it while the
        # conversation is still the one it summarized.
        self.preview: Preview | None = None
        # What outlives one answer of a strategy (a strategy is pure: the host keeps it).
        self.handoff: Intent | None = None  # declared with new_context, committed at the next boundary
        self.notes: set[str] = set()  # the kinds of host note said in this window (``Note.kind``)
        self.restricted: tuple[str, ...] | None = None  # the tools this step offers (``Restrict``)
        self.pinned: str | None = None  # the session's first request, for every new window
        # Whether the conversation was looked at for a provider compaction it does not follow
        # yet (once per host, restore and switch: each answer is looked at as it comes).
        self.caught_up = False
        # The first message of the window the last compaction or hand-off began (a strategy's
        # view shows it as a ``summary``); None: none the host knows of.
        self.summary_id: str | None = None
        # this run's requests that are not steps (Layer 2 summaries): the run's cost counts them
        self.side_spend = Spend()

    def configure(self, settings: CompactSettings, *, system: str, tools: list[dict[str, Any]]) -> None:
        self.settings = settings
        self.breaker.limit = settings.breaker_limit
        if (system, tools) != (self.system, self.tools):
            self.observed = None  # the next request differs by more than its messages
        self.system, self.tools = system, tools

    def start_run(self) -> None:
        """A run begins: what is said once per run may be said again. Not part of ``configure``:
        ``%context`` and a window learned mid-run configure too, and must not reset it."""
        self.breaker_noted = self.unsaved_noted = False
        self.side_spend = Spend()

    def restore(self, loaded: LoadResult) -> None:
        """Rebuild anchor, ledger, breaker and counters from a log."""
        self.anchor = loaded.usage_anchor
        self.anchor_head = None
        in_full = {
            m.tool_result.call_id
            for m in loaded.messages
            if m.tool_result is not None and not m.is_spill_preview
        }
        for spill in loaded.spills:
            # A spill entry whose snapshot never landed (a crash between) left the result in full.
            if spill.call_id is not None and spill.call_id not in in_full:
                self.ledger.record(spill.call_id, "spilled")
        for msg in loaded.messages:
            if msg.tool_result is not None:
                # A preview is a spilled result even when its spill entry was not read (a
                # fast load skips the log before its look-back).
                self.ledger.record(msg.tool_result.call_id, "spilled" if msg.is_spill_preview else "kept")
        for entry in loaded.compacts:
            self.breaker.record(entry.ok, entry.trigger)
            self.compactions += entry.ok
        self.rollovers = sum(1 for e in loaded.rollovers if e.phase == "commit")

    # --- the estimate ------------------------------------------------------------------

    @property
    def digits(self) -> int:
        return self._digits

    @digits.setter
    def digits(self, value: int) -> None:
        if value != self._digits:  # another server: the learned ratio was in other units
            self._digits = value
            self.calibration.reset()
            self.observed = None
            self._head, self.anchor_head = ("", [], 0), None  # the head's figure was in other units too

    def estimate(self) -> int:
        """Tokens of the next request: the provider's last figure plus what came after."""
        length = len(self.conversation)
        if self.anchor is not None and self.anchor[1] <= length:
            tokens, at = self.anchor
            return (
                tokens
                + self.head_drift()
                + self.calibrated(_estimate.estimate_tokens(self.conversation.since(at), digits=self.digits))
            )
        self.reset_anchor(self.conversation.messages())
        assert self.anchor is not None
        return self.anchor[0]

    def head_tokens(self) -> int:
        """The estimate of the system prompt and tool schemas in force; made again only when
        they change (per step it is a cached figure)."""
        system, tools, tokens = self._head
        if system is not self.system or tools is not self.tools:
            tokens = estimate_request(self.system, [], self.tools, digits=self.digits)
            self._head = (self.system, self.tools, tokens)
        return tokens

    def head_drift(self) -> int:
        """How much the system prompt and tools grew (pins added) or shrank since the anchor's request."""
        if not self.system:
            return 0  # not configured yet (a session restored, no run or %context since)
        head = self.head_tokens()
        if self.anchor_head is None:
            self.anchor_head = head  # a restored anchor: measured with the prompt first configured
        return head - self.anchor_head

    def estimate_of(self, messages: list[Message]) -> int:
        """A fresh (seed-ratio) estimate of a request holding ``messages``."""
        return estimate_request(self.system, messages, self.tools, digits=self.digits)

    def on_usage(self, usage: Usage, length: int, tools: list[dict[str, Any]] | None = None) -> None:
        """A response's usage: the new anchor. ``tools``: what that request offered, when it
        was not the full set (rollover's fallback step offers two tools): the anchor is
        then raised by the schemas it left out, so the next full request is not
        under-estimated (issue 32: the estimate fell 44 % short and rollover never came)."""
        if usage.prompt_total or usage.output_tokens:
            tokens = usage.prompt_total + usage.output_tokens
            missing = 0
            if tools is not None:
                missing = max(0, self.tools_tokens(self.tools) - self.tools_tokens(tools))
            if missing:
                self.observed = None  # not the same request shape: no calibration sample
            else:
                self._calibrate(tokens, length)
            self.anchor = (tokens + missing, length)
            self.anchor_head = self.head_tokens()

    def tools_tokens(self, tools: list[dict[str, Any]]) -> int:
        return estimate_request("", [], tools)

    def _calibrate(self, tokens: int, length: int) -> None:
        """One sample, from the last reported anchor to this one, when both count one conversation."""
        previous, self.observed = self.observed, None
        if 0 < length <= len(self.conversation):
            self.observed = (tokens, length, self.conversation.since(length - 1)[0])
        if previous is None:
            return
        p_tokens, p_length, p_last = previous
        if not 0 < p_length < length <= len(self.conversation):
            return
        # A replace by anyone (an edit, a resync) puts another message where the last
        # anchor ended: then the two counts are not of one conversation.
        window = self.conversation.since(p_length - 1)[: length - p_length + 1]
        if window[0] is p_last:
            self.calibration.observe(
                sum(message_bytes(m, self.digits) for m in window[1:]), tokens - p_tokens
            )

    def calibrated(self, seed_tokens: int) -> int:
        """A seed-ratio estimate at this session's ratio (the same number until it learned one)."""
        ratio, seed = self.calibration.ratio, self.calibration.seed
        return seed_tokens if ratio == seed else math.ceil(seed_tokens * seed / ratio)

    def reset_anchor(self, messages: list[Message]) -> None:
        """After a replace: the anchor is the estimate of the new messages."""
        self.observed = None  # estimated, not reported: no sample against it
        self.anchor = (self.calibrated(self.estimate_of(messages)), len(messages))
        self.anchor_head = self.head_tokens()

    def replace_or_keep(
        self, reason: str, old: list[Message], new: list[Message], **marker: Any
    ) -> str | None:
        """``conversation.replace(reason, new)``, all or nothing: when the log cannot take it (a
        full disk), memory goes back to ``old`` (the failed writer resyncs the log to it on its
        next write) and the reason is returned; the anchor and calibration still describe ``old``.
        ``marker``: extra fields of the replace marker (the ``strategy`` whose action it is, an
        undo's ``undoes``; readers ignore fields they do not know, SPEC §6.1)."""
        try:
            if marker and self.writer is not None:
                with self.writer.marking(**marker):
                    self.conversation.replace(reason, new)
            else:
                self.conversation.replace(reason, new)
        except HookError as exc:
            cause = exc.__cause__
            if not isinstance(cause, SessionWriteError):
                raise
            self.conversation.revert(old)
            os_error = cause.__cause__
            why = (os_error.strerror if isinstance(os_error, OSError) else None) or str(cause)
            where = f" {self.writer.path}" if self.writer is not None else ""
            return f"the session log{where} could not take it: {why}"
        return None

    def replaced(
        self,
        reason: str,
        old: list[Message],
        new: list[Message],
        *,
        failed: Callable[[str], Exception],
        measured: int | None = None,
        strategy: str | None = None,
        undoes: str | None = None,
    ) -> int:
        """The replace step, written once for every change of the context (a compaction, a
        hand-off, the provider's compaction, a drop, an undo): the conversation becomes ``new``
        in one write and one fsync (the writer's replace hook), or, when the log cannot take
        it, stays ``old`` and ``failed(why)`` is raised; then the anchor is the estimate of
        ``new`` (or ``measured``, what the provider already counted for it) and a kept
        preview, made from a conversation that is gone, is dropped. The marker names the
        ``strategy`` whose action it was (an undo: the replace it ``undoes``). The new estimate."""
        marker = {k: v for k, v in (("strategy", strategy), ("undoes", undoes)) if v is not None}
        why = self.replace_or_keep(reason, old, new, **marker)
        if why is not None:
            raise failed(why)
        if measured is None:
            self.reset_anchor(new)
        else:
            self.anchor, self.observed = (measured, len(new)), None
        self.preview = None
        assert self.anchor is not None
        return self.anchor[0]

    def sync_notes(self) -> None:
        """The host notes of the current window, read from its messages (resume, undo, a switch)."""
        self.notes = {m.host for m in self.conversation.messages() if m.host is not None}

    def estimate_for(self, system: str, tools: list[dict[str, Any]]) -> int:
        """``estimate`` as a request with ``system`` and ``tools`` would have it, changing nothing
        (what ``%context`` shows: its plan may differ from the last run's)."""
        length = len(self.conversation)
        if self.anchor is not None and self.anchor[1] <= length:
            tokens, at = self.anchor
            return (
                tokens
                + self._drift_for(system, tools)
                + self.calibrated(_estimate.estimate_tokens(self.conversation.since(at), digits=self.digits))
            )
        messages = self.conversation.messages()
        return self.calibrated(estimate_request(system, messages, tools, digits=self.digits))

    def _drift_for(self, system: str, tools: list[dict[str, Any]]) -> int:
        """``head_drift`` for a request with ``system`` and ``tools`` (pins added since the anchor's
        request are in it, issue 41), changing nothing: an anchor whose head is not known yet is
        taken as measured with this one, as the next run would take it."""
        if not system:
            return 0
        if system is self.system and tools is self.tools:
            head = self.head_tokens()
        else:
            head = estimate_request(system, [], tools, digits=self.digits)
        return head - (self.anchor_head if self.anchor_head is not None else head)

    def forget_anchor(self) -> None:
        """The last usage measured messages that are gone (an edit, a repair): estimate afresh."""
        self.anchor = None
