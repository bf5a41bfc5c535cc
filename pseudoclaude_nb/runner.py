"""The turn loop: user message → (request → stream → append → tools)* → end.

The runner owns the order of things within one ``%agent`` run and nothing else: the
conversation announces changes to the session writer through hooks, providers translate
wire formats, tools do the work. It reports progress as events to listeners (renderers,
widgets), which only observe. Interrupts (Ctrl-C, kernel interrupt) are absorbed in a
way that keeps the conversation protocol-valid: every tool call gets a result.

Text from outside enters the conversation here (the prompt and its notebook block, the
model's answers and tool-call arguments) or in ``ToolRegistry.run`` (tool results), and
both escape lone surrogates on the way in (``_admitted``): no UTF-8 log can hold them, and
what the conversation holds must be what the log holds, because the log is replayed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING

from .context.confirm import Review
from .context.run import NO_CONTEXT, RunContext
from .conversation import Conversation
from .errors import ContextTooLong, HookError, PseudoClaudeError, SpillWriteError, StreamError
from .events import (
    AssistantDelta,
    Listener,
    Notice,
    ReasoningDelta,
    RunEvent,
    RunFinished,
    RunSummary,
    StepFinished,
    StepStarted,
)
from .hooks import RunEvents, RunHooks
from .messages import ImagePart, Message, PairingCheck, ToolCall, Usage, open_calls
from .providers.base import Provider, ProviderNote, Request, Response, StreamAssembler, TextDelta
from .providers.base import ReasoningDelta as StreamReasoning

# STOP_STATUS lived here before the split; callers import it from here.
from .runner_limits import STOP_STATUS, Limits
from .session import images
from .session.encode import escape_value
from .session.entries import NoteEntry, SpendEntry, UsageEntry
from .session.record import NO_RECORD, SessionRecord
from .session.spend import session_spend
from .session.writer import SessionWriter
from .tools import Permissions, ToolRegistry

if TYPE_CHECKING:
    from .cache_guard import CacheGuard

INTERRUPTED = "interrupted by user before this tool finished; its effects are unknown"


class _Interrupted(Exception):
    pass


class Runner(Limits):
    def __init__(
        self,
        *,
        conversation: Conversation,
        provider: Provider,
        tools: ToolRegistry,
        permissions: Permissions,
        system_prompt: str,
        writer: SessionWriter | None = None,
        max_steps: int = 50,
        strict: bool = False,
        listeners: Iterable[Listener] = (),
        context: RunContext = NO_CONTEXT,
        max_tokens: int = Request.max_tokens,
        review: Review | None = None,
        on_window: Callable[[int], None] | None = None,
        hooks: RunHooks | None = None,
        cache_guard: CacheGuard | None = None,
    ) -> None:
        self.conversation = conversation
        self.on_window = on_window  # told the window a context-length error named
        self.provider = provider
        self.tools = tools
        self.permissions = permissions
        self.system_prompt = system_prompt
        self.writer = writer
        self.record: SessionRecord = writer if writer is not None else NO_RECORD  # entries besides messages
        self.max_steps = max_steps
        self.strict = strict
        # The run's hooks: given (made before the tools that report through them), or the
        # listeners' own. Everything the run reports goes through them.
        self.hooks = hooks if hooks is not None else RunEvents(listeners)
        self.context = context  # told this run's emit on every call, never kept
        self.review = review  # the person's say over replaces (confirm_compaction), passed likewise
        self.cache_guard = cache_guard  # issue 43: asked before each agent request
        self.max_tokens = max_tokens  # what an agent request asks for; the provider clamps it
        self.last_request: Request | None = None
        self.last_summary: RunSummary | None = None  # the last run's, for %context (issue 31)
        self._pairing = PairingCheck()  # each request walks only the messages since the last
        self._prompt_id: str | None = None  # the run's prompt, while it may still go unanswered
        self._last_stop: str | None = None  # the last answer's stop reason (a compaction pause)
        # The tools of the current step: what its request offered is what its calls may use.
        self.surface = tools

    def emit(self, event: RunEvent) -> None:
        self.hooks.on_event(event)

    def run(self, prompt: str | Message) -> RunSummary:
        """Run one turn from ``prompt`` (text, or a prepared user message with its fields)."""
        summary = RunSummary(session_id=self.writer.id if self.writer else None)
        self.last_summary = summary
        started = time.monotonic()
        allowed, refused = self.permissions.allowed, self.permissions.refused
        try:
            first = prompt if isinstance(prompt, Message) else Message(role="user", content=prompt)
            self._prompt_id = self.conversation.append(self._admitted(first, "the prompt")).id
            summary.status = "max-steps"
            for step in range(1, self.max_steps + 1):
                summary.steps = step
                message = self._step(step, summary)
                if not message.tool_calls and self._hands_off(message, step):
                    continue
                if not message.tool_calls and self._paused_for_compaction(step):
                    continue
                if not message.tool_calls:
                    status = STOP_STATUS.get(message.stop_reason or "", "done")
                    summary.status, summary.final_text = status, message.content
                    break
                self._run_tools(list(message.tool_calls))
        except (_Interrupted, KeyboardInterrupt):
            summary.status = "interrupted"
            self._close_open_calls(INTERRUPTED)
        except PseudoClaudeError as exc:
            summary.status, summary.error = "error", exc
            self._close_open_calls(f"not run: the run stopped before this tool ({exc})")
        summary.seconds = time.monotonic() - started
        summary.allowed_calls = self.permissions.allowed - allowed
        summary.refused_calls = self.permissions.refused - refused
        if summary.status == "max-steps":
            self.emit(
                Notice(f"stopped after --max-steps {self.max_steps}; run %agent to continue", "warning")
            )
        summary.spend.requests.extend(self.context.run_spend().requests)  # its summaries cost too (issue 31)
        if self.writer is not None:
            summary.session_spend = session_spend(self.writer.path)
        self.emit(RunFinished(summary))
        return summary

    def _hands_off(self, message: Message, step: int) -> bool:
        """A cut answer that leaves rollover's window at its limit goes on to the hand-off
        (issue 32: in a 4,096-token window the answer ran to the end of the window, or to
        the cap past the base mark, and the run ended "truncated" with no rollover). The
        next steps are the fallback step (the model may write its handoff) and the rollover."""
        if message.stop_reason != "max_tokens" or step >= self.max_steps:
            return False
        if not self.context.hands_off_due():
            return False
        self.emit(
            Notice(
                "the answer was cut with the window at its limit; the task goes on in a fresh "
                "window with a handoff (rollover)",
                "warning",
            )
        )
        return True

    def _close_open_calls(self, reason: str) -> None:
        """Give every call of the last tool-call message a result, whatever stopped the run.

        A run can stop between a call and its result at many points (a display update, a
        usage write, a failing hook); the conversation must stay protocol-valid for the
        next run. Results are errors that say the tool's effects are unknown.
        """
        _, calls = open_calls(self.conversation.messages())
        reason, _ = escape_value(reason)  # an error's text may name a file that is not UTF-8
        for call in calls:
            try:
                self.conversation.add_tool_result(call.id, reason, is_error=True)
            except HookError:
                pass  # the log is failed; its next write resyncs the whole conversation

    # --- one model request -------------------------------------------------------------

    def _step(self, step: int, summary: RunSummary) -> Message:
        self.emit(StepStarted(step))
        # The pre-step boundary: every result of the last step is in, the next request is not
        # built yet. The strategy acts here (a summary, rollover's remind/fallback/commit).
        self.context.before_step(self.provider, self.emit, self.review)
        self.surface = self.context.surface(self.tools)
        try:
            response = self._ask(self._guarded(self._request()))
        except ContextTooLong as exc:
            # The estimate was wrong (or there is no anchor yet, or the window was): shrink
            # once (compact, or a forced rollover), retry once.
            self._adopt_window(exc)
            if not self.context.on_too_long(self.provider, self.emit, self.review):
                raise self._too_long(exc) from exc
            self.surface = self.context.surface(self.tools)
            try:
                response = self._ask(self._guarded(self._request()))
            except ContextTooLong as again:
                raise self._too_long(again) from again
        response = self._named_stop(response, summary)
        message = self._add_answer(response)
        summary.usage = summary.usage + response.usage
        summary.spend.add(response.usage, self.provider.model)
        sent = self.last_request.tools if self.last_request is not None else None
        self.context.on_usage(response.usage, len(self.conversation), sent, self.emit)
        self.record.record(
            UsageEntry.new(response.usage, messages=len(self.conversation), model=self.provider.model)
        )
        self._last_stop = response.stop_reason
        # issue 31: the strategy may act on the answer (the provider compacted, --strategy api;
        # a paused compaction is put to the person first); a replace comes after the usage
        # entry, so the log still says what this request was.
        self.context.after_answer(self.provider, self.emit, self.review)
        self.emit(StepFinished(step, response.usage, message, self.provider.model))
        return message

    def _ask(self, request: Request) -> Response:
        assembler = StreamAssembler()
        self.hooks.on_llm_start(request)
        try:
            for event in self.provider.stream(request):
                assembler.feed(event)
                if isinstance(event, TextDelta) and event.text:
                    self.emit(AssistantDelta(event.text))
                elif isinstance(event, StreamReasoning) and event.text:
                    self.emit(ReasoningDelta(event.text))
                elif isinstance(event, ProviderNote):
                    self.emit(Notice(event.text, event.level))
                    self.record.record(NoteEntry.new(event.text, event.level))
            response = assembler.finish()
        except KeyboardInterrupt:
            # Keep what was said, never a half-received tool call.
            if assembler.text:
                text, _ = escape_value(assembler.text + "\n\n[interrupted by user]")
                self.conversation.add_assistant(text)
            raise _Interrupted from None
        except StreamError:
            self._paid_for(assembler.usage)
            raise
        self.hooks.on_llm_end(request, response)
        return response

    def _guarded(self, request: Request) -> Request:
        """``request``, once the cache guard (when on) let it go: it may ask, or stop the run."""
        if self.cache_guard is not None:
            self.cache_guard.check(request, self.emit)
        return request

    def _paid_for(self, usage: Usage) -> None:
        """An answer refused after the provider reported its usage (a broken stream, arguments
        that are not JSON): what was paid for is logged as spend, never as an anchor (issue 43)."""
        if not (usage.prompt_total or usage.output_tokens):
            return
        if self.last_summary is not None:
            self.last_summary.spend.add(usage, self.provider.model)
        self.record.record(SpendEntry.new(usage, purpose="refused", model=self.provider.model))

    def _admitted(self, message: Message, what: str) -> Message:
        """``message`` with lone surrogates escaped in its text, tool calls (ids, names,
        arguments at any depth) and reasoning, as the log will hold it; a notice when any were.

        A notebook block keeps its mark: ``chars`` is recounted for the escaped block.
        """
        update: dict[str, object] = {}
        found = 0
        mark = message.notebook
        if mark is not None and 0 <= mark.chars <= len(message.content):
            block, block_found = escape_value(message.content[: mark.chars])
            prompt, prompt_found = escape_value(message.content[mark.chars :])
            if block_found or prompt_found:
                update["content"] = block + prompt
                update["notebook"] = mark.model_copy(update={"chars": len(block)})
                found += block_found + prompt_found
        else:
            content, n = escape_value(message.content)
            if n:
                update["content"], found = content, found + n
        calls, n = escape_value([call.to_dict() for call in message.tool_calls])
        if n:
            update["tool_calls"] = tuple(ToolCall.model_validate(call) for call in calls)
            found += n
        reasoning = [r.to_dict() for r in message.reasoning]
        fixed, n = escape_value(reasoning)
        if n:
            update["reasoning"] = tuple(
                r.model_copy(update=f) for r, f in zip(message.reasoning, fixed, strict=True)
            )
            found += n
        if not found:
            return message
        self.emit(
            Notice(
                f"{what} held text that is not valid UTF-8 (lone surrogates); it is kept with "
                "\\xNN or \\uNNNN escapes",
                "warning",
            )
        )
        return message.model_copy(update=update)

    def _request(self) -> Request:
        messages, problems = self._pairing(self.conversation.messages(), strict=self.strict)
        if problems:
            # A bug upstream; repair the conversation itself (and so the log), once.
            self.conversation.replace("resync", messages)
            text = "repaired a conversation that broke tool pairing: " + "; ".join(problems)
            self.emit(Notice(text, "warning"))
            self.record.record(NoteEntry.new(text, "warning"))
        request = Request(
            system=self.system_prompt,
            messages=messages,
            tools=self.surface.schemas(),
            max_tokens=self._output_room(),
            images=partial(images.read, self.writer.dir) if self.writer is not None else None,
            thread=self._thread(),
        )
        self.last_request = request
        return request

    def _thread(self) -> str | None:
        """The conversation a request belongs to — its session, its strategy, and this very
        conversation object (a resume or a fork makes another) — which a provider's stored
        state (issue 43) follows: any change starts a new chain."""
        if self.writer is None:
            return None
        return f"{self.writer.id}/{self.context.key}/{id(self.conversation):x}"

    # --- tools ---------------------------------------------------------------------------

    def _store_images(self, raw: tuple[tuple[bytes, str], ...]) -> tuple[list[ImagePart], list[str]]:
        """A result's displayed images stored in the session (issue-14): (parts, notes for the rest)."""
        parts: list[ImagePart] = []
        notes: list[str] = []
        for data, media_type in raw:
            if self.writer is None:
                notes.append(
                    f"[image ({media_type}, {len(data):,} bytes) not kept: no session to keep it in]"
                )
                continue
            try:
                parts.append(images.store(self.writer.dir, data, media_type))
            except (images.ImageError, OSError) as exc:
                notes.append(f"[image ({media_type}, {len(data):,} bytes) not kept: {exc}]")
        return parts, notes

    def _run_tools(self, calls: list[ToolCall]) -> None:
        for call in calls:
            self.hooks.on_tool_start(call)
            started, waited = time.monotonic(), self.permissions.waited
            result = self.surface.run(call, self.permissions, self.hooks)
            # The tool's time, without the time the user took to answer a permission prompt.
            asked = self.permissions.waited - waited
            self.hooks.on_tool_end(call, result, time.monotonic() - started - asked)
            try:
                admitted = self.context.admit(call, result, self.emit)
            except SpillWriteError as exc:
                # The spill file could not be written (a full disk): the conversation and the
                # log get the bounded stand-in, never the raw body, and the run stops; Layer 1
                # writes the file before a later request.
                try:
                    self.conversation.add_result(exc.kept)  # type: ignore[arg-type]
                except HookError:
                    pass  # the log failed too: its next write resyncs, stand-in included
                raise
            parts, notes = self._store_images(result.images)
            if notes:
                admitted = admitted.model_copy(update={"content": f"{admitted.content}\n" + "\n".join(notes)})
            self.conversation.add_result(admitted, parts)
        self.context.after_tools(len(calls))
