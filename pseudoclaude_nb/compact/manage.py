"""Context management before each request: Layer 1 spill, then Layer 2 summary.

``ContextManager`` owns the runtime state of one session's context — the usage anchor,
the spill ledger and the breaker — and restores it from the log on resume. It changes
the conversation only through ``Conversation.replace`` (so every change is logged as a
replace marker plus snapshot) and never touches the log otherwise, except to add
``spill`` and ``compact`` entries. Per step it costs the same at 100 messages as at
10,000: it looks only at the messages after the anchor.

Each response's usage also calibrates the estimate (``estimate.Calibration``): the
messages between two consecutive anchors are what the provider counted in between. A
replace, or a new system prompt or tool list (``configure``), breaks the pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..conversation import Conversation
from ..errors import ContextTooLong, ProviderError, SessionWriteError
from ..events import Compacted, CompactStarted, ContextState, Notice, RunEvent, Spilled
from ..messages import Message, ToolCall, ToolResult, Usage
from ..providers.base import Provider, Request
from ..session import entries
from ..session.loader import LoadResult
from ..session.writer import SessionWriter
from .breaker import MIN_FREED, Breaker
from .estimate import Calibration, estimate_request, estimate_tokens, message_bytes
from .spill import Ledger, Spill, batch_to_spill, preview, write_spill
from .summarize import (
    SUMMARY_SYSTEM,
    compacted,
    drop_oldest_exchange,
    freed_fraction,
    layer2_threshold,
    summary_messages,
    tail_start,
)

if TYPE_CHECKING:
    from ..tools import ToolRegistry

SUMMARY_RETRIES = 3


@dataclass(frozen=True)
class CompactSettings:
    context_window: int = 200_000
    spill_bytes: int = 50_000
    spill_batch_bytes: int = 200_000
    summary_reserve: int = 20_000
    safety_margin: int = 13_000
    recent_tokens: int = 20_000
    breaker_limit: int = 3

    @property
    def threshold(self) -> int:
        return layer2_threshold(self.context_window, self.summary_reserve, self.safety_margin)

    @property
    def tail_tokens(self) -> int:
        # The tail may use at most half of what the window allows before compacting: with
        # a small window, 20,000 recent tokens would leave nothing old to summarize.
        return max(1, min(self.recent_tokens, self.threshold // 2))


class ContextManager:
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
        self.writer = writer
        self.emit: Callable[[RunEvent], None] = lambda event: None
        self.ledger = Ledger()
        self.breaker = Breaker(self.settings.breaker_limit)
        self.anchor: tuple[int, int] | None = None  # (tokens, conversation length)
        self.calibration = Calibration()
        # The last anchor a provider reported (tokens, length, the message it ends at), while
        # nothing broke the pair.
        self._observed: tuple[int, int, Message | None] | None = None
        self.compactions = 0
        self.last_compact: Compacted | None = None
        self._pending_batch: list[str] = []  # call ids of the last tool batch, not yet checked together
        self._system = ""
        self._tools: list[dict[str, Any]] = []
        self._breaker_noted = False

    def configure(self, settings: CompactSettings, *, system: str, tools: list[dict[str, Any]]) -> None:
        self.settings = settings
        self.breaker.limit = settings.breaker_limit
        if (system, tools) != (self._system, self._tools):
            self._observed = None  # the next request differs by more than its messages
        self._system, self._tools = system, tools
        self._breaker_noted = False

    def restore(self, loaded: LoadResult) -> None:
        """Rebuild the runtime state from a log: anchor, ledger, breaker."""
        self.anchor = loaded.usage_anchor
        in_full = {
            m.tool_result.call_id for m in loaded.messages if m.tool_result is not None and not _is_preview(m)
        }
        for spill in loaded.spills:
            # A spill entry whose snapshot never landed (a crash between) left the result in full.
            if isinstance(spill.get("call_id"), str) and spill["call_id"] not in in_full:
                self.ledger.record(spill["call_id"], "spilled")
        for msg in loaded.messages:
            if msg.tool_result is not None:
                # A preview is a spilled result even when its spill entry was not read (a
                # fast load skips the log before its look-back).
                self.ledger.record(msg.tool_result.call_id, "spilled" if _is_preview(msg) else "kept")
        for entry in loaded.compacts:
            ok = bool(entry.get("ok"))
            self.breaker.record(ok, str(entry.get("trigger") or "auto"))
            self.compactions += ok

    # --- the estimate ------------------------------------------------------------------

    def estimate(self) -> int:
        """Tokens of the next request: the provider's last figure plus what came after."""
        length = len(self.conversation)
        if self.anchor is not None and self.anchor[1] <= length:
            tokens, at = self.anchor
            return tokens + self._calibrated(estimate_tokens(self.conversation.since(at)))
        self._reset_anchor(self.conversation.messages())
        assert self.anchor is not None
        return self.anchor[0]

    def on_usage(self, usage: Usage, length: int) -> None:
        if usage.prompt_total or usage.output_tokens:
            tokens = usage.prompt_total + usage.output_tokens
            self._calibrate(tokens, length)
            self.anchor = (tokens, length)

    def _calibrate(self, tokens: int, length: int) -> None:
        """One sample, from the last reported anchor to this one, when both count one conversation."""
        previous, self._observed = self._observed, None
        if 0 < length <= len(self.conversation):
            self._observed = (tokens, length, self.conversation.since(length - 1)[0])
        if previous is None:
            return
        p_tokens, p_length, p_last = previous
        if not 0 < p_length < length <= len(self.conversation):
            return
        # A replace by anyone (an edit, a resync) puts another message where the last
        # anchor ended: then the two counts are not of one conversation.
        window = self.conversation.since(p_length - 1)[: length - p_length + 1]
        if window[0] is p_last:
            self.calibration.observe(sum(message_bytes(m) for m in window[1:]), tokens - p_tokens)

    def _calibrated(self, seed_tokens: int) -> int:
        """A seed-ratio estimate at this session's ratio (the same number until it learned one)."""
        ratio, seed = self.calibration.ratio, self.calibration.seed
        return seed_tokens if ratio == seed else math.ceil(seed_tokens * seed / ratio)

    def _reset_anchor(self, messages: list[Message]) -> None:
        self._observed = None  # estimated, not reported: no sample against it
        self.anchor = (self._calibrated(estimate_request(self._system, messages, self._tools)), len(messages))

    def state(self) -> ContextState:
        total = self.estimate()
        return ContextState(
            estimated_tokens=total,
            anchor_tokens=self.anchor[0] if self.anchor else 0,
            context_window=self.settings.context_window,
            threshold=self.settings.threshold,
            breaker_open=self.breaker.open,
            spills=self.ledger.spilled,
            compactions=self.compactions,
        )

    # --- Layer 1 -------------------------------------------------------------------------

    def admit_result(self, call: ToolCall, content: str) -> str:
        """What the conversation gets for a tool result: the text, or a spill preview."""
        if len(content) * 4 <= self.settings.spill_bytes or self.session_dir is None:
            return content  # fast path: even 4-byte characters would fit
        if len(content.encode("utf-8")) <= self.settings.spill_bytes:
            return content
        spill = self._write(call.id, call.name, content)
        shown = self._record(spill, "single")
        return preview(content, shown)

    def after_tools(self, count: int) -> None:
        """The runner appended a batch of ``count`` results: check them together before the next request."""
        batch = self.conversation.since(len(self.conversation) - count)
        # By call id, not by position: a run may stop (max steps, interrupt) before the next
        # request, and the next run's user message comes after the batch.
        self._pending_batch = [m.tool_result.call_id for m in batch if m.tool_result is not None]

    def _write(self, call_id: str, tool: str, content: str) -> Spill:
        assert self.session_dir is not None
        try:
            # Spill files follow the log's redaction setting.
            redact = self.writer is None or self.writer.redactor is not None
            return write_spill(self.session_dir, call_id, tool, content, redact=redact)
        except OSError as exc:
            raise SessionWriteError(
                f"could not spill the {len(content):,}-character result of {tool} to "
                f"{self.session_dir / 'tool-results'}: {exc.strerror or exc}. The result was kept "
                "in full; free disk space, then run %agent again (or %compact --layer1)."
            ) from exc

    def _record(self, spill: Spill, reason: str, *, logged: bool = False) -> str:
        """Log a written spill and freeze its decision; returns the path shown to the model."""
        if self.writer is not None and not logged:
            self.writer.log(entries.spill_entry(**spill.entry_fields()))
        self.ledger.force(spill.call_id, "spilled")
        shown = self._shown_path(spill.path)
        self.emit(Spilled(spill.call_id, spill.tool, shown, spill.bytes, reason))
        return shown

    def _shown_path(self, rel: str) -> str:
        assert self.session_dir is not None
        full = self.session_dir / rel
        if self.workspace is not None:
            try:
                return str(full.relative_to(self.workspace))
            except ValueError:
                pass
        return str(full)

    def _spill_batch(self) -> None:
        pending, self._pending_batch = self._pending_batch, []
        if not pending or self.session_dir is None:
            return
        wanted = set(pending)
        batch = [m for m in self._tail_with(wanted) if m.tool_result and m.tool_result.call_id in wanted]
        chosen = batch_to_spill(batch, self.ledger, self.settings.spill_batch_bytes)
        if chosen:
            try:
                self._replace_results({m.id for m in chosen}, "batch")
            except SessionWriteError:
                self._pending_batch = pending  # nothing was decided: check again next time
                raise
        for msg in batch:
            self.ledger.record(msg.tool_result.call_id, "kept")  # type: ignore[union-attr]

    def _tail_with(self, call_ids: set[str]) -> list[Message]:
        """The shortest tail of the conversation holding every result in ``call_ids``."""
        length = len(self.conversation)
        size = len(call_ids) + 2
        while True:
            tail = self.conversation.since(length - size)
            found = {m.tool_result.call_id for m in tail if m.tool_result is not None}
            if call_ids <= found or size >= length:
                return tail
            size *= 2

    def spill_all(self) -> int:
        """``%compact --layer1``: spill every result over ``spill_bytes`` and fit every batch."""
        if self.session_dir is None:
            return 0
        singles: set[str] = set()
        batches: list[list[Message]] = []
        for msg in self.conversation.messages():
            if msg.tool_result is None:
                batches.append([])
                continue
            if batches:
                batches[-1].append(msg)
            if (
                not _is_preview(msg)
                and len(msg.tool_result.content.encode("utf-8")) > self.settings.spill_bytes
            ):
                singles.add(msg.id)
        chosen = set(singles)
        for batch in batches:
            # What the batch will hold: previews instead of the singles, the rest as it is.
            scratch = Ledger()
            for m in batch:
                if _is_preview(m) or m.id in singles:
                    scratch.record(m.tool_result.call_id, "spilled")  # type: ignore[union-attr]
            sized = [_as_preview(m) if m.id in singles else m for m in batch]
            chosen.update(m.id for m in batch_to_spill(sized, scratch, self.settings.spill_batch_bytes))
        if chosen:
            self._replace_results(chosen, "manual")
        return len(chosen)

    def _replace_results(self, ids: set[str], why: str) -> None:
        """Spill the results ``ids`` and replace the conversation (``snapshot``).

        Every file is written before anything is decided: if one fails, no decision is
        frozen, nothing is logged, and the conversation is unchanged.
        """
        messages = self.conversation.messages()
        names = {c.id: c.name for m in messages for c in m.tool_calls}
        written: dict[str, Spill] = {}
        for msg in messages:
            if msg.tool_result is not None and msg.id in ids:
                call_id = msg.tool_result.call_id
                written[msg.id] = self._write(call_id, names.get(call_id, "tool"), msg.tool_result.content)
        new = []
        shown = {mid: self._shown_path(spill.path) for mid, spill in written.items()}
        for msg in messages:
            result = msg.tool_result
            if result is not None and msg.id in written:
                result = ToolResult(
                    call_id=result.call_id,
                    content=preview(result.content, shown[msg.id]),
                    is_error=result.is_error,
                )
                msg = msg.model_copy(update={"tool_result": result})
            new.append(msg)
        # The log explains the snapshot before it comes: spill entries first.
        if self.writer is not None:
            for spill in written.values():
                self.writer.log(entries.spill_entry(**spill.entry_fields()))
        self.conversation.replace("snapshot", new)
        self._reset_anchor(new)
        for spill in written.values():
            self._record(spill, why, logged=True)

    # --- before each request ------------------------------------------------------------------

    def surface(self, tools: ToolRegistry) -> ToolRegistry:
        """The tools the next request offers: all of them here (rollover's fallback prunes)."""
        return tools

    def recover(self, provider: Provider) -> bool:
        """The provider said the prompt is too long: compact once; True when that worked."""
        return self.compact(provider, trigger="forced").ok

    def before_request(self, provider: Provider) -> None:
        self._spill_batch()
        total = self.estimate()
        if total >= self.settings.threshold:
            if self.breaker.open:
                if not self._breaker_noted:
                    self._breaker_noted = True
                    self.emit(
                        Notice(
                            f"automatic compaction skipped: the breaker opened after "
                            f"{self.breaker.failures} failed attempts; %compact still works",
                            "warning",
                        )
                    )
            else:
                self.compact(provider, trigger="auto")
        self.emit(self.state())

    # --- Layer 2 -------------------------------------------------------------------------------

    def compact(self, provider: Provider, trigger: str = "manual") -> Compacted:
        messages = self.conversation.messages()
        before = estimate_request(self._system, messages, self._tools)
        self.emit(CompactStarted(trigger, before))
        start = tail_start(messages, self.settings.tail_tokens)
        head, tail = messages[:start], messages[start:]
        new, error = self._summarize(provider, head, tail)
        after = before
        if new is not None:
            after = estimate_request(self._system, new, self._tools)
            freed = freed_fraction(before, after)
            if freed < MIN_FREED:
                error, new = f"it would free only {freed:.0%} of the context (needs {MIN_FREED:.0%})", None
                after = before
        if new is not None:
            self.conversation.replace("compact", new)
            self._reset_anchor(new)
            self.compactions += 1
        result = Compacted(trigger, before, after, new is not None, error)
        self.breaker.record(result.ok, trigger)
        if self.writer is not None:
            self.writer.log(
                entries.compact_entry(
                    trigger=trigger, before_tokens=before, after_tokens=after, ok=result.ok, error=error
                )
            )
        self.last_compact = result
        self.emit(result)
        return result

    def _summarize(
        self, provider: Provider, head: list[Message], tail: list[Message]
    ) -> tuple[list[Message] | None, str | None]:
        if not head:
            return None, "nothing old enough to summarize: the recent tail is the whole conversation"
        for _ in range(1 + SUMMARY_RETRIES):
            request = Request(
                system=SUMMARY_SYSTEM,
                messages=summary_messages(head),
                max_tokens=self.settings.summary_reserve,
                purpose="summary",
            )
            try:
                response = provider.complete(request)
            except ContextTooLong:
                head = drop_oldest_exchange(head)
                if not head:
                    return None, "the summary request is too long even without the older history"
                continue
            except ProviderError as exc:
                return None, f"the summary request failed: {exc}"
            if not response.text.strip():
                return None, "the model returned an empty summary"
            return compacted(response.text, tail), None
        return None, f"the summary request was still too long after {SUMMARY_RETRIES} retries"


def _as_preview(msg: Message) -> Message:
    """The message as it will be once spilled, for sizing a batch (the path is a stand-in)."""
    result = msg.tool_result
    assert result is not None
    stand_in = preview(result.content, "x" * 90)
    return msg.model_copy(update={"tool_result": result.model_copy(update={"content": stand_in})})


def _is_preview(msg: Message) -> bool:
    return msg.tool_result is not None and msg.tool_result.content.startswith("[Tool result too large")
