"""Layer 1 at run time: spill huge tool results to files, one spiller for both strategies.

The decisions are the pure functions of ``compact.spill`` (the preview, which results of a
batch to spill, the ledger); this module writes the files, logs the ``spill`` entries and
replaces the conversation (``snapshot``) when a batch must shrink. Events go to the
``emit`` of each call: the run (or the ``%compact``) that asked hears them, nobody else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..compact import spill as _spill
from ..compact.spill import Ledger, Spill, batch_to_spill, preview
from ..errors import SessionWriteError
from ..events import RunEvent, Spilled
from ..messages import Message, ToolCall, ToolResult

if TYPE_CHECKING:
    from .state import SharedState

Emit = Callable[[RunEvent], None]


def ignore(event: RunEvent) -> None:
    """The ``emit`` of a caller that listens to nothing."""


def is_spill_preview(msg: Message) -> bool:
    """Whether ``msg`` is a tool result Layer 1 replaced by a preview (by its ``spilled`` field)."""
    return msg.is_spill_preview


def _previewed(result: ToolResult, spill: Spill, shown: str) -> ToolResult:
    """The preview standing for ``result``, marked with the spill file."""
    return ToolResult(
        call_id=result.call_id,
        content=preview(result.content, shown),
        is_error=result.is_error,
        spilled=spill.path,
    )


class Spiller:
    def __init__(self, state: SharedState) -> None:
        self.state = state

    def admit(self, call: ToolCall, result: ToolResult, emit: Emit = ignore) -> ToolResult:
        """What the conversation gets for a tool result: the result, or its spill preview."""
        s = self.state
        content, limit = result.content, s.settings.spill_bytes
        if len(content) * 4 <= limit or s.session_dir is None:
            return result  # fast path: even 4-byte characters would fit
        if len(content.encode("utf-8")) <= limit:
            return result
        spill = self._write(call.id, call.name, content)
        shown = self._record(spill, "single", emit)
        return _previewed(result, spill, shown)

    def after_tools(self, count: int) -> None:
        """The runner appended a batch of ``count`` results: check them together before the next request."""
        conversation = self.state.conversation
        batch = conversation.since(len(conversation) - count)
        # By call id, not by position: a run may stop (max steps, interrupt) before the next
        # request, and the next run's user message comes after the batch.
        self.state.pending_batch = [m.tool_result.call_id for m in batch if m.tool_result is not None]

    def check_batch(self, emit: Emit = ignore) -> None:
        """Before a request: the pending batch must fit ``spill_batch_bytes``."""
        s = self.state
        pending, s.pending_batch = s.pending_batch, []
        if not pending or s.session_dir is None:
            return
        wanted = set(pending)
        batch = [m for m in self._tail_with(wanted) if m.tool_result and m.tool_result.call_id in wanted]
        chosen = batch_to_spill(batch, s.ledger, s.settings.spill_batch_bytes)
        if chosen:
            try:
                self._replace_results({m.id for m in chosen}, "batch", emit)
            except SessionWriteError:
                s.pending_batch = pending  # nothing was decided: check again next time
                raise
        for msg in batch:
            s.ledger.record(msg.tool_result.call_id, "kept")  # type: ignore[union-attr]

    def spill_all(self, emit: Emit = ignore) -> int:
        """``%compact --layer1``: spill every result over ``spill_bytes`` and fit every batch."""
        s = self.state
        if s.session_dir is None:
            return 0
        singles: set[str] = set()
        batches: list[list[Message]] = []
        for msg in s.conversation.messages():
            if msg.tool_result is None:
                batches.append([])
                continue
            if batches:
                batches[-1].append(msg)
            if (
                not is_spill_preview(msg)
                and len(msg.tool_result.content.encode("utf-8")) > s.settings.spill_bytes
            ):
                singles.add(msg.id)
        chosen = set(singles)
        for batch in batches:
            # What the batch will hold: previews instead of the singles, the rest as it is.
            scratch = Ledger()
            for m in batch:
                if is_spill_preview(m) or m.id in singles:
                    scratch.record(m.tool_result.call_id, "spilled")  # type: ignore[union-attr]
            sized = [_as_preview(m) if m.id in singles else m for m in batch]
            chosen.update(m.id for m in batch_to_spill(sized, scratch, s.settings.spill_batch_bytes))
        if chosen:
            self._replace_results(chosen, "manual", emit)
        return len(chosen)

    # --- the parts --------------------------------------------------------------------------

    def _tail_with(self, call_ids: set[str]) -> list[Message]:
        """The shortest tail of the conversation holding every result in ``call_ids``."""
        conversation = self.state.conversation
        length = len(conversation)
        size = len(call_ids) + 2
        while True:
            tail = conversation.since(length - size)
            found = {m.tool_result.call_id for m in tail if m.tool_result is not None}
            if call_ids <= found or size >= length:
                return tail
            size *= 2

    def _write(self, call_id: str, tool: str, content: str) -> Spill:
        s = self.state
        assert s.session_dir is not None
        try:
            # Spill files follow the log's redaction setting.
            redact = s.writer is None or s.writer.redactor is not None
            return _spill.write_spill(s.session_dir, call_id, tool, content, redact=redact)
        except OSError as exc:
            raise SessionWriteError(
                f"could not spill the {len(content):,}-character result of {tool} to "
                f"{s.session_dir / 'tool-results'}: {exc.strerror or exc}. The result was kept "
                "in full; free disk space, then run %agent again (or %compact --layer1)."
            ) from exc

    def _record(self, spill: Spill, reason: str, emit: Emit, *, logged: bool = False) -> str:
        """Log a written spill and freeze its decision; returns the path shown to the model."""
        s = self.state
        if s.writer is not None and not logged:
            s.writer.spill(**spill.entry_fields())
        s.ledger.force(spill.call_id, "spilled")
        shown = self._shown_path(spill.path)
        emit(Spilled(spill.call_id, spill.tool, shown, spill.bytes, reason))
        return shown

    def _shown_path(self, rel: str) -> str:
        s = self.state
        assert s.session_dir is not None
        full = s.session_dir / rel
        if s.workspace is not None:
            try:
                return str(full.relative_to(s.workspace))
            except ValueError:
                pass
        return str(full)

    def _replace_results(self, ids: set[str], why: str, emit: Emit) -> None:
        """Spill the results ``ids`` and replace the conversation (``snapshot``).

        Every file is written before anything is decided: if one fails, no decision is
        frozen, nothing is logged, and the conversation is unchanged.
        """
        s = self.state
        messages = s.conversation.messages()
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
                msg = msg.model_copy(
                    update={"tool_result": _previewed(result, written[msg.id], shown[msg.id])}
                )
            new.append(msg)
        # The log explains the snapshot before it comes: spill entries first.
        if s.writer is not None:
            for spill in written.values():
                s.writer.spill(**spill.entry_fields())
        s.conversation.replace("snapshot", new)
        s.reset_anchor(new)
        for spill in written.values():
            self._record(spill, why, emit, logged=True)


def _as_preview(msg: Message) -> Message:
    """The message as it will be once spilled, for sizing a batch (the path is a stand-in)."""
    result = msg.tool_result
    assert result is not None
    stand_in = preview(result.content, "x" * 90)
    return msg.model_copy(
        update={"tool_result": result.model_copy(update={"content": stand_in, "spilled": "x"})}
    )
