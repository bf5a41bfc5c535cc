"""Layer 1 at run time: spill huge tool results to files, one spiller for both strategies.

The decisions are the pure functions of ``spill`` (the preview, which results of a
batch to spill, the ledger); this module writes the files, logs the ``spill`` entries and
replaces the conversation (``snapshot``) when a batch must shrink. Events go to the
``emit`` of each call: the run (or the ``%compact``) that asked hears them, nobody else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import SessionWriteError, SpillWriteError
from ..events import Notice, RunEvent, Spilled
from ..messages import Message, ToolCall, ToolResult
from ..session.entries import SpillEntry
from ..workspace import SPILL_DIR
from . import spill as _spill
from .spill import (
    Ledger,
    Spill,
    batch_to_spill,
    head_at_boundary,
    preview,
    preview_bytes,
    unsaved_preview,
)

if TYPE_CHECKING:
    from .state import SharedState

Emit = Callable[[RunEvent], None]


def ignore(event: RunEvent) -> None:
    """The ``emit`` of a caller that listens to nothing."""


def is_spill_preview(msg: Message) -> bool:
    """Whether ``msg`` is a tool result Layer 1 replaced by a preview (by its ``spilled`` field)."""
    return msg.is_spill_preview


def _previewed(result: ToolResult, spill: Spill, shown: str, limit: int) -> ToolResult:
    """The preview standing for ``result``, marked with the spill file."""
    return ToolResult(
        call_id=result.call_id,
        content=preview(result.content, shown, limit=preview_bytes(limit)),
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
        try:
            spill = self._write(call.id, call.name, content)
        except SessionWriteError as exc:
            raise self._unsaved(call, result, exc) from exc.__cause__
        shown = self._record(spill, "single", emit)
        return _previewed(result, spill, shown, limit)

    def _unsaved(self, call: ToolCall, result: ToolResult, exc: SessionWriteError) -> SpillWriteError:
        """The spill file of ``result`` could not be written (a full disk).

        The conversation, and so the log, get a bounded stand-in (the head and a note): the
        log never holds a raw body over ``spill_bytes``, and memory equals the log. The full
        result waits in memory (``unsaved``) until ``flush_unsaved`` can write it.
        """
        s = self.state
        cause = exc.__cause__
        reason = (cause.strerror if isinstance(cause, OSError) else None) or str(cause or exc)
        kept = ToolResult(
            call_id=result.call_id,
            content=unsaved_preview(result.content, reason, redact=self._redact()),
            is_error=result.is_error,
        )
        s.unsaved[call.id] = (call.name, result)  # no decision frozen: it is still to be spilled
        head = len(head_at_boundary(result.content).encode("utf-8"))
        return SpillWriteError(
            f"could not spill the {len(result.content):,}-character result of {call.name} to "
            f"{s.session_dir / SPILL_DIR if s.session_dir else SPILL_DIR}: {reason}. "
            f"The conversation and the log keep only its first {head:,} bytes and a note; the full "
            "text is held in memory and saved when the disk has room. Free disk space, then run "
            "%agent again (or %compact --layer1); if the kernel stops first, only that head remains.",
            kept,
        )

    def flush_unsaved(self, emit: Emit = ignore) -> int:
        """Write the spill files that a full disk refused, and put their previews in place.

        Called before every request and by ``%compact --layer1``. A result that is gone
        from the conversation (compacted away) is dropped. While the disk is still full
        nothing changes: the run goes on with the stand-ins, and says so once.
        """
        s = self.state
        if not s.unsaved or s.session_dir is None:
            return 0
        present = {m.tool_result.call_id: m for m in s.conversation.messages() if m.tool_result is not None}
        for cid in [c for c in s.unsaved if c not in present or present[c].is_spill_preview]:
            del s.unsaved[cid]
        if not s.unsaved:
            return 0
        full = {present[cid].id: result for cid, (_, result) in s.unsaved.items()}
        try:
            written = self._write_all(set(full), full)
        except SessionWriteError as exc:
            if not s.unsaved_noted:
                s.unsaved_noted = True
                emit(
                    Notice(
                        f"{len(full)} huge tool result(s) still wait in memory for disk space: {exc}",
                        "warning",
                    )
                )
            return 0
        self._apply(written, "single", emit)
        s.unsaved.clear()
        return len(written)

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
        self.flush_unsaved(emit)
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
        flushed = self.flush_unsaved(emit)
        waiting = set(s.unsaved)  # stand-ins of results still unsaved are not the results
        singles: set[str] = set()
        batches: list[list[Message]] = []
        for msg in s.conversation.messages():
            if msg.tool_result is None:
                batches.append([])
                continue
            if msg.tool_result.call_id in waiting:
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
            sized = [_as_preview(m, s.settings.spill_bytes) if m.id in singles else m for m in batch]
            chosen.update(m.id for m in batch_to_spill(sized, scratch, s.settings.spill_batch_bytes))
        if chosen:
            self._replace_results(chosen, "manual", emit)
        return flushed + len(chosen)

    def spill_results(self, ids: set[str], strategy: str, emit: Emit = ignore) -> int:
        """A strategy's ``Spill``: the results ``ids`` (message ids) to files, in one snapshot
        replace whose marker names ``strategy``; a result already spilled stays as it is."""
        s = self.state
        if s.session_dir is None:
            return 0
        chosen = {
            m.id
            for m in s.conversation.messages()
            if m.id in ids and m.tool_result is not None and not m.is_spill_preview
        }
        if chosen:
            self._apply(self._write_all(chosen), "strategy", emit, strategy=strategy)
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

    def _redact(self) -> bool:
        """Spill files (and stand-ins) follow the log's redaction setting."""
        writer = self.state.writer
        return writer is None or writer.redactor is not None

    def _write(self, call_id: str, tool: str, content: str) -> Spill:
        s = self.state
        assert s.session_dir is not None
        try:
            return _spill.write_spill(s.session_dir, call_id, tool, content, redact=self._redact())
        except OSError as exc:
            raise SessionWriteError(
                f"could not spill the {len(content):,}-character result of {tool} to "
                f"{s.session_dir / 'tool-results'}: {exc.strerror or exc}. Nothing was changed; "
                "free disk space, then run %agent again (or %compact --layer1)."
            ) from exc

    def _record(self, spill: Spill, reason: str, emit: Emit, *, logged: bool = False) -> str:
        """Log a written spill and freeze its decision; returns the path shown to the model."""
        s = self.state
        if not logged:
            s.record.record(SpillEntry.new(**spill.entry_fields()))
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
        self._apply(self._write_all(ids), why, emit)

    def _write_all(
        self, ids: set[str], full: dict[str, ToolResult] | None = None
    ) -> dict[str, tuple[Spill, ToolResult]]:
        """The spill files of the messages ``ids`` (the result in ``full``, when given, else the
        message's own): message id -> (the spill, the full result). Raises ``SessionWriteError``."""
        messages = self.state.conversation.messages()
        names = {c.id: c.name for m in messages for c in m.tool_calls}
        written: dict[str, tuple[Spill, ToolResult]] = {}
        for msg in messages:
            if msg.tool_result is not None and msg.id in ids:
                result = (full or {}).get(msg.id, msg.tool_result)
                call_id = result.call_id
                written[msg.id] = (self._write(call_id, names.get(call_id, "tool"), result.content), result)
        return written

    def _apply(
        self,
        written: dict[str, tuple[Spill, ToolResult]],
        why: str,
        emit: Emit,
        *,
        strategy: str | None = None,
    ) -> None:
        """Log the written spills, then replace the conversation with their previews (``snapshot``;
        the marker names ``strategy`` when it was a strategy's action)."""
        s = self.state
        new = []
        for msg in s.conversation.messages():
            if msg.tool_result is not None and msg.id in written:
                spill, result = written[msg.id]
                shown = self._shown_path(spill.path)
                previewed = _previewed(result, spill, shown, s.settings.spill_bytes)
                msg = msg.model_copy(update={"tool_result": previewed})
            new.append(msg)
        # The log explains the snapshot before it comes: spill entries first.
        for spill, _ in written.values():
            s.record.record(SpillEntry.new(**spill.entry_fields()))
        if strategy is None or s.writer is None:
            s.conversation.replace("snapshot", new)
        else:
            with s.writer.marking(strategy=strategy):
                s.conversation.replace("snapshot", new)
        s.reset_anchor(new)
        for spill, _ in written.values():
            self._record(spill, why, emit, logged=True)


def _as_preview(msg: Message, spill_bytes: int) -> Message:
    """The message as it will be once spilled, for sizing a batch (the path is a stand-in)."""
    result = msg.tool_result
    assert result is not None
    stand_in = preview(result.content, "x" * 90, limit=preview_bytes(spill_bytes))
    return msg.model_copy(
        update={"tool_result": result.model_copy(update={"content": stand_in, "spilled": "x"})}
    )
