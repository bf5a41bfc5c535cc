"""The hand-off at run time: a declared hand-off (``new_context``) and the switch to a new window.

The host's mechanism behind ``Handoff`` (the rollover strategy's, or any strategy's): a
rollover is declared by the model through ``new_context`` (phase 1, ``declare``: the intent
is logged, the conversation is left alone) and committed at a pre-step boundary (phase 2,
``commit``: the conversation is replaced by one user message). Without a declared hand-off
the host writes it itself (``hard-limit``). When and why is the strategy's decision
(``context.policies.Rollover`` reads SPEC §9's budget).

With the run's ``review`` (``confirm_compaction``) the person sees the new window's handoff
before the commit: approve, edit (their text stands in the handoff's place; the anchors and
the pinned request stay) or reject (the window stays; this run does not ask again).

A pending intent is rebuilt from the log on resume (``pending_intent``: the last
``rollover`` entry); the claimed reminder and fallback are the host notes of the window
(``SharedState.notes``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from ..errors import BoundaryError, SessionWriteError
from ..events import RolloverCommitted, RolloverDeclared
from ..messages import Message, ToolCall, ToolResult, open_calls
from ..session.entries import NoteEntry, RolloverEntry
from ..session.loader import LoadResult, first_request
from ..tools.registry import Permissions, ToolRegistry
from ..tools.rollover import NEW_CONTEXT
from ..tools.workspace import resolve_in_workspace
from .confirm import Proposal, Review
from .estimate import BYTES_PER_TOKEN, text_units
from .handoff import (
    CheckedFile,
    Handoff,
    Intent,
    first_message,
    first_user_text,
    forced_handoff,
    render_handoff,
)
from .layer1 import Emit

if TYPE_CHECKING:
    from ..hooks import RunHooks
    from .state import SharedState

# A new window's first message gets at least this much room, however full the fixed prompt.
MIN_HANDOFF_TOKENS = 200


class FallbackTools(ToolRegistry):
    """A restricted surface (``Restrict``): only ``allowed`` is offered; other calls are refused."""

    def __init__(self, tools: ToolRegistry, allowed: tuple[str, ...]) -> None:
        super().__init__(t for t in tools if t.name in allowed)
        self.full = tools

    def run(self, call: ToolCall, permissions: Permissions, hooks: RunHooks | None = None) -> ToolResult:
        if call.name in self:
            return super().run(call, permissions, hooks)
        offered = " and ".join(self.names()) or "no tools"
        return ToolResult(
            call_id=call.id,
            is_error=True,
            content=(
                f"refused: {call.name} is not available now. The context is at its fallback limit and "
                f"only {offered} remain; call new_context with your handoff now."
            ),
        )


def has_work(state: SharedState) -> bool:
    """Whether this window holds work to hand over: a declared hand-off or any answer."""
    return state.handoff is not None or any(m.role == "assistant" for m in state.conversation.messages())


# --- phase 1: the intent ---------------------------------------------------------------------


def declare(state: SharedState, intent: Intent, emit: Emit) -> str:
    """``new_context``'s handler: log the intent and answer; the conversation stays as it is."""
    s = state
    caller, calls = open_calls(s.conversation.messages())
    call = next((c for c in calls if c.name == NEW_CONTEXT), None)
    intent = replace(intent, call_id=call.id if call else None, message_uuid=caller.id if caller else None)
    s.record.record(
        RolloverEntry.new(
            phase="intent",
            reason="model",
            handoff=intent.handoff.model_dump(),
            related_files=[f.to_dict() for f in intent.related_files],
            call_id=intent.call_id,
            message_uuid=intent.message_uuid,
        )
    )
    s.handoff = intent
    missing = tuple(f.path for f in intent.related_files if not f.exists)
    emit(RolloverDeclared(intent.call_id, intent.message_uuid, len(intent.related_files), missing))
    answer = (
        "Handoff recorded. The host switches to a fresh context window before your next step, "
        "after the results of this step are in; the new window starts with the original request, "
        "your handoff and the related files. This window stays searchable with search_history"
        + (
            f" (session_id {s.session_dir.name}, message_uuid {intent.message_uuid})."
            if s.session_dir
            else "."
        )
    )
    if missing:
        answer += f" Note: these related files do not exist (yet): {', '.join(missing)}."
    return answer


# --- phase 2: the commit ----------------------------------------------------------------------


def commit(
    state: SharedState,
    emit: Emit,
    review: Review | None = None,
    *,
    note: str | None = None,
    strategy: str | None = None,
) -> RolloverCommitted | None:
    """Replace the conversation by the first message of a new window: the declared hand-off
    (reason ``model``) or, without one, the host's (``hard-limit``). ``note``: a line the
    strategy adds to that message; ``strategy``: whose action it is (the replace marker names it).

    None: the person rejected it (``review``); the window and a declared intent stay."""
    s = state
    messages = s.conversation.messages()
    before = s.estimate()
    intent = s.handoff
    reason = "model"
    if intent is None:
        reason = "hard-limit"
        handoff, touched = forced_handoff(messages)
        last = next((m for m in reversed(messages) if m.role == "assistant"), None)
        intent = Intent(handoff, _check_touched(s, touched), message_uuid=last.id if last else None)
    session_id = s.session_dir.name if s.session_dir is not None else None
    text = first_message(
        session_id=session_id or "(no session log)",
        message_uuid=intent.message_uuid,
        pinned_request=pinned_request(s),
        handoff=intent.handoff,
        related_files=intent.related_files,
        reason=reason,
        later_user_text=_later_user_text(messages),
        images=_window_images(messages, s.session_dir),
    )
    if note:
        text = f"{text}\n\n[host note] {note.strip()}"
    text = _fitted(s, text)
    if review is not None:
        reviewed = _reviewed(s, review, reason, intent.handoff, text, before, len(messages), emit)
        if reviewed is None:
            return None
        text = reviewed
    new = [Message(role="user", content=text)]

    def failed(why: str) -> Exception:  # a full disk: the window and the declared intent stay as they were
        return SessionWriteError(
            f"the rollover was not applied: {why}. The window is as it was and the handoff is "
            "kept; free disk space, then run %agent again: the rollover happens then."
        )

    after = s.replaced("rollover", messages, new, failed=failed, strategy=strategy)
    s.record.record(
        RolloverEntry.new(
            phase="commit",
            reason=reason,
            handoff=intent.handoff.model_dump(),
            related_files=[f.to_dict() for f in intent.related_files],
            call_id=intent.call_id,
            message_uuid=intent.message_uuid,
            before_tokens=before,
            after_tokens=after,
        )
    )
    s.handoff, s.restricted, s.summary_id = None, None, new[0].id
    s.notes = set()  # a new window: nothing said in it yet
    s.rollovers += 1
    event = RolloverCommitted(
        reason, before, after, session_id, intent.message_uuid, len(intent.related_files)
    )
    emit(event)
    return event


def _fitted(s: SharedState, text: str) -> str:
    """The new window's first message, at most half of what the base limit leaves after
    the fixed prompt (issue 32: a ~4 KB host handoff filled a new 4,096-token window).

    Measured in the estimator's units, dense kinds included (a handoff of log lines or
    numbers is more tokens than its bytes / 3.5), at the session's calibrated ratio."""
    fixed = s.calibrated(s.estimate_of([]))
    budget = max(MIN_HANDOFF_TOKENS, (s.settings.rollover_limits["base"] - fixed) // 2)
    units = text_units(text, s.digits)
    limit = int(budget * BYTES_PER_TOKEN * s.calibration.ratio / s.calibration.seed)
    if units <= limit:
        return text
    note = (
        f"\n[… cut here to fit the {s.settings.context_window:,}-token window; the previous "
        "window is whole in durable storage: search_history finds it …]\n"
    )
    # The handoff's body is cut first: the anchors, the pinned request, the related
    # files and the closing instruction keep their place when they fit alone.
    start, end = text.find(HANDOFF_OPEN), text.find(HANDOFF_CLOSE)
    if 0 <= start < end:
        start += len(HANDOFF_OPEN)
        rest = units - text_units(text[start:end], s.digits)
        room = limit - rest - text_units(note, s.digits)
        if room > 0:
            return text[:start] + _cut(text[start:end], room, note, s.digits) + text[end:]
    return _cut(text, limit, note, s.digits)


def _reviewed(
    s: SharedState,
    review: Review,
    reason: str,
    handoff: Handoff,
    text: str,
    before: int,
    count: int,
    emit: Emit,
) -> str | None:
    """The new window's message after the person's answer; None when they rejected it."""
    rendered = render_handoff(handoff)
    after = s.calibrated(s.estimate_of([Message(role="user", content=text)]))
    decision = review.decide(Proposal("rollover", reason, rendered, before, after, count, 0), emit)
    if decision.action == "reject":
        who = (
            "PseudoClaude.confirm_default, nobody being there to answer"
            if decision.by_default
            else "the person"
        )
        s.record.record(NoteEntry.new(f"{reason} rollover rejected by {who}; the window stays", "info"))
        return None
    if decision.action == "edit" and decision.text is not None:
        # The person's text takes the handoff's place; the anchors and the pinned request stay.
        old = f"<handoff>\n{rendered}\n</handoff>"
        return text.replace(old, f"<handoff>\n{decision.text.strip()}\n</handoff>", 1)
    return text


def pinned_request(s: SharedState) -> str | None:
    """The session's first user message, verbatim, for every window (so intent cannot drift).

    Read from the head of the log, which keeps it however often the window was replaced;
    the in-memory text is preferred while that message is still in the conversation
    (the log's copy may be redacted).
    """
    if s.pinned is None and s.session_dir is not None:
        found = first_request(s.session_dir)
        if found is not None:
            uuid, text = found
            live = next((m for m in s.conversation.messages() if m.id == uuid), None)
            s.pinned = live.content if live is not None else text
    if s.pinned is None:
        s.pinned = first_user_text(s.conversation.messages())
    return s.pinned


def _check_touched(s: SharedState, touched: list[tuple[str, str]]) -> list[CheckedFile]:
    files = []
    workspace = s.workspace
    for path, how in touched:
        exists = True
        if workspace is not None:
            try:
                exists = resolve_in_workspace(workspace, path).exists()
            except BoundaryError:
                continue
        files.append(CheckedFile(path, "other", how, exists))
    return files


HANDOFF_OPEN, HANDOFF_CLOSE = "<handoff>\n", "\n</handoff>"


def _cut(text: str, limit: int, note: str, digits: int) -> str:
    """``text``'s head (60 %) and tail (40 %) around ``note``, about ``limit`` units in all."""
    units = text_units(text, digits)
    if units <= limit:
        return text
    data = text.encode("utf-8")
    keep = max(0, int(len(data) * limit / units) - len(note.encode("utf-8")))
    head = data[: int(keep * 0.6)].decode("utf-8", errors="ignore")
    tail = data[len(data) - int(keep * 0.4) :].decode("utf-8", errors="ignore") if keep else ""
    return head + note + tail


def _later_user_text(messages: list[Message]) -> list[str]:
    """User text sent after the old window's last answer (a new %agent prompt): carried over."""
    out = []
    for m in reversed(messages):
        if m.role == "assistant":
            break
        if m.tool_result is None and m.content and m.host is None:
            out.append(m.content)
    return out[::-1]


def pending_intent(loaded: LoadResult) -> Intent | None:
    """The last ``rollover`` entry, if it is an intent whose call is answered in the effective state."""
    if not loaded.rollovers or loaded.rollovers[-1].phase != "intent":
        return None
    entry = loaded.rollovers[-1]
    answered = {
        m.tool_result.call_id
        for m in loaded.messages
        if m.tool_result is not None and not m.tool_result.is_error
    }
    if entry.call_id not in answered:
        return None  # the crash came before the result: the model never heard it was accepted
    try:
        handoff = Handoff.model_validate(entry.raw.get("handoff") or {})
    except ValidationError:
        return None
    files = [CheckedFile.from_dict(f) for f in entry.related_files]
    return Intent(handoff, files, call_id=entry.call_id, message_uuid=entry.message_uuid)


def _window_images(messages: list[Message], session_dir: Path | None) -> list[str]:
    """The image files the window showed (issue-14), each once, as paths a reader can open."""
    seen: dict[str, str] = {}
    for m in messages:
        for p in m.parts:
            where = str(session_dir / p.path) if session_dir is not None else p.path
            seen.setdefault(p.path, f"{where} ({p.media_type}, {p.width}x{p.height})")
    return list(seen.values())
