"""The rollover strategy: budget checks and the two-phase switch to a new window.

Before each request — the pre-step boundary, when every result of the last step is in —
it asks the pure budget (``context.rollover_budget``) what to do: remind once, enter fallback once
(the request offers only new_context and search_history; other calls are refused), or
commit a rollover. A rollover is declared by the model through ``new_context`` (phase 1:
the intent is logged, the conversation is left alone) and committed here (phase 2: the
conversation is replaced by one user message). At the hard limit the host writes the
handoff itself.

With the run's ``review`` (``confirm_compaction``) the person sees the new window's handoff
before the commit: approve, edit (their text stands in the handoff's place; the anchors and
the pinned request stay) or reject (the window stays; this run does not ask again).

Its own state is rebuilt from the log on resume: the claimed reminder and fallback are
the host notes in the current window, a pending intent is the last ``rollover`` entry.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ..errors import BoundaryError, SessionWriteError
from ..events import Notice, RolloverCommitted, RolloverDeclared, RolloverFallback, RolloverReminded
from ..messages import HOST_FALLBACK, HOST_REMIND, Message, ToolCall, ToolResult
from ..providers.base import Provider
from ..session.entries import MessageEntry, NoteEntry, RolloverEntry, parse_line
from ..session.loader import LoadResult
from ..tools.registry import Permissions, ToolRegistry
from ..tools.rollover import NEW_CONTEXT, ROLLOVER_TOOLS, new_context_tool, search_history_tool
from ..tools.workspace import resolve_in_workspace
from ..workspace import LOG_NAME
from .confirm import Proposal, Review
from .estimate import BYTES_PER_TOKEN, text_units
from .handoff import (
    GUIDANCE,
    CheckedFile,
    Handoff,
    Intent,
    first_message,
    first_user_text,
    forced_handoff,
    render_handoff,
)
from .layer1 import Emit
from .rollover_budget import CONTINUE, BudgetAction, BudgetState, evaluate_budget
from .strategy import Marks

if TYPE_CHECKING:
    from ..history import HistoryIndex
    from ..hooks import RunHooks
    from ..tools.registry import Tool
    from .state import SharedState

# A new window's first message gets at least this much room, however full the fixed prompt.
MIN_HANDOFF_TOKENS = 200

# How the host notes begin (for the model and a reader); they are recognised by ``Message.host``.
REMIND_MARK = "[host note] context rollover reminder"
FALLBACK_MARK = "[host note] context rollover fallback"


class FallbackTools(ToolRegistry):
    """The pruned surface of the fallback step: only ``allowed`` is offered; other calls are refused."""

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


class RolloverStrategy:
    name = "rollover"

    def __init__(self, state: SharedState) -> None:
        self.state = state
        self.declared: Intent | None = None
        self.reminded = False
        self.fallback_claimed = False
        self.pruned = False  # this step offers only the rollover tools
        self.last_action: BudgetAction = CONTINUE
        self.pinned: str | None = None
        self.sync_window()

    def marks(self) -> Marks:
        return tuple(self.state.settings.rollover_limits.items())

    def threshold(self) -> int:  # the base limit: where the host starts to act
        return self.state.settings.rollover_limits["base"]

    def phase(self) -> str:
        if self.declared is not None:
            return "declared"
        if self.fallback_claimed:
            return "fallback"
        return "reminded" if self.reminded else "normal"

    def sections(self) -> list[tuple[str, str]]:
        return [("rollover", GUIDANCE)]

    def tools(self, history: HistoryIndex, emit: Emit) -> list[Tool]:
        """``new_context`` (declared to this strategy, its events to ``emit``) and ``search_history``."""
        s = self.state
        workspace = s.workspace or Path.cwd()
        session = s.session_dir.name if s.session_dir is not None else None
        return [
            new_context_tool(workspace, lambda intent: self.declare(intent, emit)),
            search_history_tool(history, lambda: session),
        ]

    def describe(self) -> dict[str, Any]:
        s = self.state
        # The gauge and %context show these instead of the Layer 2 line.
        return {
            "rollover_limits": dict(s.settings.rollover_limits),
            "rollovers": s.rollovers,
            "rollover_phase": self.phase(),
        }

    def restore(self, loaded: LoadResult) -> None:
        self.declared = _pending_intent(loaded)
        self.sync_window()

    def sync_window(self) -> None:
        """The claimed reminder and fallback of the current window, from its host notes."""
        notes = {m.host for m in self.state.conversation.messages() if m.host is not None}
        self.reminded = HOST_REMIND in notes
        self.fallback_claimed = HOST_FALLBACK in notes

    # --- the budget -----------------------------------------------------------------------------

    def budget_state(self, estimate: int | None = None) -> BudgetState:
        return self.state.settings.budget(
            self.state.estimate() if estimate is None else estimate,
            explicit_rollover_declared=self.declared is not None,
            reminder_claimed=self.reminded,
            fallback_claimed=self.fallback_claimed,
        )

    def surface(self, tools: ToolRegistry) -> ToolRegistry:
        return FallbackTools(tools, ROLLOVER_TOOLS) if self.pruned else tools

    def before_request(
        self, estimate: int, provider: Provider, emit: Emit, review: Review | None = None
    ) -> bool:
        s = self.state
        if self.pinned is None and s.session_dir is None:
            self.pinned = first_user_text(s.conversation.messages())
        state = self.budget_state(estimate)
        action = evaluate_budget(state)
        self.pruned = False
        acted = action.type != "continue"
        if action.type == "rollover" and not self._has_work():
            # Over the limit before any answer in this window (a huge prompt): there is
            # nothing to hand over, and a new window would hold the same prompt.
            emit(
                Notice("the context is over its limit but this window holds no work to hand over", "warning")
            )
            acted = False
        elif action.type == "rollover" and review is not None and review.skips("rollover"):
            acted = False  # the person rejected it in this run; the next run asks again
        elif action.type == "rollover":
            acted = self.commit(action.reason or "hard-limit", emit, review) is not None
        elif action.type == "fallback":
            self.fallback_claimed = self.pruned = True
            self._host_note(
                f"{FALLBACK_MARK}: the context is at its limit (about {state.current_tokens:,} tokens; "
                f"fallback limit {state.base_limit:,}). Only new_context and search_history are available "
                "now, and any other tool call is refused. Call new_context with your handoff now; "
                "otherwise the host switches windows with a handoff it writes itself, all of it unverified.",
                HOST_FALLBACK,
                emit,
            )
            emit(RolloverFallback(state.current_tokens, ROLLOVER_TOOLS))
        elif action.type == "remind" and not self._has_work():
            # Issue 32: in a small window the fixed prompt alone is past the reminder mark;
            # "finish and hand off" before any answer is a reminder no model can act on.
            acted = False
        elif action.type == "remind":
            self.reminded = True
            self._host_note(
                f"{REMIND_MARK}: about {state.current_tokens:,} of {state.context_window:,} tokens are "
                f"in use; {max(state.remaining, 0):,} remain before the fallback limit at "
                f"{state.base_limit:,}. Finish the step you are on, then call new_context with your "
                "handoff and related files; the task continues in a fresh window. At the limit only "
                "new_context and search_history remain.",
                HOST_REMIND,
                emit,
            )
            emit(RolloverReminded(state.current_tokens, state.base_limit))
        self.last_action = action
        return acted

    def after_response(self, emit: Emit) -> bool:
        return False

    def hands_off_due(self, estimate: int) -> bool:
        """The next pre-step boundary starts the hand-off — fallback past the base mark, a
        rollover past the hard mark or after fallback — and this window holds work to hand over."""
        action = evaluate_budget(self.budget_state(estimate))
        return action.type in ("fallback", "rollover") and self._has_work()

    def recover(self, provider: Provider, emit: Emit, review: Review | None = None) -> bool:
        """A forced rollover, unless this is a fresh window (or the person rejected it)."""
        if not self._has_work() or (review is not None and review.skips("rollover")):
            return False
        return self.commit("model" if self.declared is not None else "hard-limit", emit, review) is not None

    def _has_work(self) -> bool:
        return self.declared is not None or any(
            m.role == "assistant" for m in self.state.conversation.messages()
        )

    def _host_note(self, text: str, kind: str, emit: Emit) -> None:
        # A user-side message, appended (never edited in): it is logged like any message,
        # keeps the cached prefix intact, and its ``host`` field is how a resume knows it was said.
        self.state.conversation.append(Message(role="user", content=text, host=kind))
        emit(Notice(text.removeprefix("[host note] "), "warning"))

    # --- phase 1: the intent ---------------------------------------------------------------------

    def declare(self, intent: Intent, emit: Emit) -> str:
        """``new_context``'s handler: log the intent and answer; the conversation stays as it is."""
        s = self.state
        caller, call = self._calling(NEW_CONTEXT)
        intent = replace(
            intent, call_id=call.id if call else None, message_uuid=caller.id if caller else None
        )
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
        self.declared = intent
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

    def _calling(self, name: str) -> tuple[Message | None, ToolCall | None]:
        """The assistant message and call now running: the runner runs a step's calls in order
        and appends each result before the next, so it is the first one still unanswered."""
        messages = self.state.conversation.messages()
        i = len(messages)
        while i > 0 and messages[i - 1].tool_result is not None:
            i -= 1
        if i == 0 or not messages[i - 1].tool_calls:
            return None, None
        answered = {m.tool_result.call_id for m in messages[i:] if m.tool_result is not None}
        for call in messages[i - 1].tool_calls:
            if call.name == name and call.id not in answered:
                return messages[i - 1], call
        return messages[i - 1], None

    # --- phase 2: the commit ----------------------------------------------------------------------

    def commit(self, reason: str, emit: Emit, review: Review | None = None) -> RolloverCommitted | None:
        """Replace the conversation by the first message of a new window (reason model | hard-limit).

        None: the person rejected it (``review``); the window and a declared intent stay."""
        s = self.state
        messages = s.conversation.messages()
        before = s.estimate()
        intent = self.declared if reason == "model" else None
        if intent is None:
            reason = "hard-limit"
            handoff, touched = forced_handoff(messages)
            last = next((m for m in reversed(messages) if m.role == "assistant"), None)
            intent = Intent(handoff, self._check_touched(touched), message_uuid=last.id if last else None)
        session_id = s.session_dir.name if s.session_dir is not None else None
        text = first_message(
            session_id=session_id or "(no session log)",
            message_uuid=intent.message_uuid,
            pinned_request=self.pinned_request(),
            handoff=intent.handoff,
            related_files=intent.related_files,
            reason=reason,
            later_user_text=_later_user_text(messages),
            images=_window_images(messages, s.session_dir),
        )
        text = self._fitted(text)
        if review is not None:
            reviewed = self._reviewed(review, reason, intent.handoff, text, before, len(messages), emit)
            if reviewed is None:
                return None
            text = reviewed
        new = [Message(role="user", content=text)]
        failed = s.replace_or_keep("rollover", messages, new)
        if failed is not None:  # a full disk: the window and the declared intent stay as they were
            raise SessionWriteError(
                f"the rollover was not applied: {failed}. The window is as it was and the handoff is "
                "kept; free disk space, then run %agent again: the rollover happens then."
            )
        s.reset_anchor(new)
        after = s.anchor[0] if s.anchor else 0
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
        self.declared, self.reminded, self.fallback_claimed, self.pruned = None, False, False, False
        s.rollovers += 1
        event = RolloverCommitted(
            reason, before, after, session_id, intent.message_uuid, len(intent.related_files)
        )
        emit(event)
        return event

    def _fitted(self, text: str) -> str:
        """The new window's first message, at most half of what the base limit leaves after
        the fixed prompt (issue 32: a ~4 KB host handoff filled a new 4,096-token window).

        Measured in the estimator's units, dense kinds included (a handoff of log lines or
        numbers is more tokens than its bytes / 3.5), at the session's calibrated ratio."""
        s = self.state
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
        self, review: Review, reason: str, handoff: Handoff, text: str, before: int, count: int, emit: Emit
    ) -> str | None:
        """The new window's message after the person's answer; None when they rejected it."""
        s = self.state
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

    def pinned_request(self) -> str | None:
        """The session's first user message, verbatim, for every window (so intent cannot drift).

        Read from the head of the log, which keeps it however often the window was replaced;
        the in-memory text is preferred while that message is still in the conversation
        (the log's copy may be redacted).
        """
        s = self.state
        if self.pinned is None and s.session_dir is not None:
            found = first_request_in_log(s.session_dir / LOG_NAME)
            if found is not None:
                uuid, text = found
                live = next((m for m in s.conversation.messages() if m.id == uuid), None)
                self.pinned = live.content if live is not None else text
        if self.pinned is None:
            self.pinned = first_user_text(s.conversation.messages())
        return self.pinned

    def _check_touched(self, touched: list[tuple[str, str]]) -> list[CheckedFile]:
        files = []
        workspace = self.state.workspace
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


def _pending_intent(loaded: LoadResult) -> Intent | None:
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


def first_request_in_log(log: Path) -> tuple[str, str] | None:
    """(message id, content) of the log's first user text message; reads only up to it."""
    try:
        with open(log, "rb") as f:
            for line in f:
                entry = parse_line(line)
                if isinstance(entry, MessageEntry):
                    m = entry.message
                    if m.role == "user" and m.tool_result is None:
                        return m.id, m.content
    except OSError:
        return None
    return None


def _window_images(messages: list[Message], session_dir: Path | None) -> list[str]:
    """The image files the window showed (issue-14), each once, as paths a reader can open."""
    seen: dict[str, str] = {}
    for m in messages:
        for p in m.parts:
            where = str(session_dir / p.path) if session_dir is not None else p.path
            seen.setdefault(p.path, f"{where} ({p.media_type}, {p.width}x{p.height})")
    return list(seen.values())
