"""The runner's limits: answers the output cap or the window cut, and requests that do not fit.

A mixin of ``Runner`` (split out to keep each module to one job): which calls of a cut
answer run (issue 32: every whole one), what a cut answer's notice says (the output cap, or
the window where that is what stopped it), the output cap a request may ask for (never more
than the window leaves), a window a context-length error names (adopted), and the error a
run ends with when a request does not fit even after shrinking once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from .context.limits import measure, too_long_advice
from .errors import ContextTooLong, HookError, ProviderError
from .events import Notice, RunEvent, RunSummary
from .messages import Message, ToolCall
from .providers.base import Provider, Request, Response
from .tools.compact_set import CompactTool

if TYPE_CHECKING:
    from .context.run import RunContext
    from .conversation import Conversation
    from .tools import ToolRegistry

# How a run ends when its last answer stopped for a reason the user must know about.
STOP_STATUS = {"max_tokens": "truncated", "refusal": "refused"}
# Asked for even when the window leaves less: the server then stops at its context's end.
MIN_OUTPUT_TOKENS = 64


class Limits:
    """What ``Runner`` provides to these methods."""

    provider: Provider
    context: RunContext
    conversation: Conversation
    surface: ToolRegistry
    system_prompt: str
    max_tokens: int
    last_request: Request | None
    on_window: Callable[[int], None] | None
    _prompt_id: str | None
    _last_stop: str | None
    max_steps: int

    if TYPE_CHECKING:  # Runner's own methods, typed here without a runtime member

        def emit(self, event: RunEvent) -> None: ...
        def _ask(self, request: Request) -> Response: ...
        def _request(self) -> Request: ...
        def _admitted(self, message: Message, what: str) -> Message: ...

    # --- stops a reader must know about --------------------------------------------------

    def _paused_for_compaction(self, step: int) -> bool:
        """The provider stopped right after its own compaction (issue 43: Anthropic's
        ``pause_after_compaction``, asked when the person confirms compactions): the strategy
        has put it to them, and the run goes on with the next request."""
        return self._last_stop == "compaction" and step < self.max_steps

    def _named_stop(self, response: Response, summary: RunSummary) -> Response:
        """Whole calls before the cut run (``_keep_whole_calls``). A tool call cut by the
        output cap never enters the conversation: when no call is whole, the step is
        retried once with the model's full cap when that is larger, else the run stops with
        advice that can work (the same request would hit the same cap forever)."""
        if response.stop_reason != "max_tokens":
            return response
        if response.tool_calls:
            response = self._keep_whole_calls(response)
            if response.tool_calls or not response.cut_calls:
                return response
        if not response.cut_calls:
            return response
        request = self.last_request or self._request()
        cap = int(getattr(self.provider, "max_output_tokens", 0) or 0)
        room = self._window_room()
        cap = cap if room is None else min(cap, room)  # a retry never asks past the window either
        used = self._cap_used(request)
        names = ", ".join(response.cut_calls)
        if cap > request.max_tokens:
            self.emit(
                Notice(
                    f"the output cap ({used:,} tokens) cut the {names} call before its arguments were "
                    f"complete; it was dropped, and the step is retried once with {cap:,} tokens",
                    "warning",
                )
            )
            summary.usage = summary.usage + response.usage
            summary.spend.add(response.usage, self.provider.model)
            self.last_request = replace(request, max_tokens=cap)
            response = self._ask(self.last_request)
            if response.stop_reason == "max_tokens" and response.tool_calls:
                response = self._keep_whole_calls(response)
            if response.stop_reason != "max_tokens" or not response.cut_calls:
                return response
            used, names = cap, ", ".join(response.cut_calls)
        summary.usage = summary.usage + response.usage
        summary.spend.add(response.usage, self.provider.model)
        if response.text.strip():  # what it said is kept, marked as cut; the call is not
            self._add_answer(replace(response, tool_calls=[]), notice=False)
        raise ProviderError(
            f"the model's output cap ({used:,} tokens) cut the {names} call before its arguments were "
            "complete, so nothing of it was run. Ask for smaller steps — e.g. write the file in parts "
            "(create it with the first part, then add one part per call) — or, if the model allows "
            "more, raise %config PseudoClaude.agent_output_tokens"
        )

    def _keep_whole_calls(self, response: Response) -> Response:
        """An answer the output cap ended after some whole calls: those run (issue 32).

        A kept call's arguments are a whole JSON object that its tool's schema accepts; any
        other call is dropped, named in a notice, and the answer's text says so to the model
        (so it does not take the dropped call for done). With nothing kept, the answer goes
        back unchanged but for the dropped names, for the cut-call handling.
        """
        kept: list[ToolCall] = []
        invalid: list[str] = []
        for call in response.tool_calls:
            tool = self.surface.get(call.name)
            try:
                valid = tool is not None and tool.args.model_validate(call.arguments) is not None
            except ValueError:  # pydantic's ValidationError is a ValueError
                valid = False
            if valid:
                kept.append(call)
            else:
                invalid.append(call.name)
        dropped = list(response.cut_calls) + invalid
        if not kept:
            return replace(response, tool_calls=[], cut_calls=dropped)
        used = self._cap_used(self.last_request)
        names = ", ".join(call.name for call in kept)
        what = ""
        if response.cut_calls:
            what += f"; dropped {', '.join(response.cut_calls)}: cut before its arguments were complete"
        if invalid:
            what += f"; dropped {', '.join(invalid)}: its arguments do not fit the tool"
        text = response.text
        if dropped:
            text = f"{text}\n\n" if text else ""
            text += f"[the output cap cut this answer; the {', '.join(dropped)} call was dropped, not run]"
        self.emit(
            Notice(
                f"the output cap ({used:,} tokens) ended the answer; kept {len(kept)} whole "
                f"call{'s' if len(kept) != 1 else ''} ({names}), which run{what or '; nothing was cut'}",
                "warning" if dropped else "info",
            )
        )
        return replace(response, text=text, tool_calls=kept, cut_calls=dropped, stop_reason="tool_use")

    def _add_answer(self, response: Response, *, notice: bool = True) -> Message:
        stop = response.stop_reason if response.stop_reason in STOP_STATUS else None
        answer = Message(
            role="assistant",
            content=response.text,
            tool_calls=tuple(response.tool_calls),
            reasoning=tuple(response.reasoning),
            stop_reason=stop,  # type: ignore[arg-type]
        )
        message = self.conversation.append(self._admitted(answer, "the model's answer"))
        window = self.context.window or 0
        used = response.usage.prompt_total + response.usage.output_tokens
        cap = self._cap_used(self.last_request)
        if (
            notice
            and stop == "max_tokens"
            and window
            and response.usage.output_tokens < cap
            and used >= window * 0.97
        ):
            # Not the output cap: the server stopped where its context ran out.
            self.emit(
                Notice(
                    f"the answer was cut where the context window ran out ({used:,} of {window:,} tokens: "
                    f"{response.usage.prompt_total:,} prompt + {response.usage.output_tokens:,} answer), "
                    "before the output cap; it is marked as truncated. Ask for a shorter answer, or "
                    "compact (%compact) to make room",
                    "warning",
                )
            )
        elif notice and stop == "max_tokens":
            self.emit(
                Notice(
                    f"the answer was cut at the output cap (about {cap:,} tokens) and is marked as "
                    "truncated; ask the agent to continue, or raise %config PseudoClaude.agent_output_tokens",
                    "warning",
                )
            )
        elif notice and stop == "refusal":
            self.emit(
                Notice(
                    "the model refused this request (stop reason: refusal); its answer is shown and kept "
                    "as it is",
                    "warning",
                )
            )
        return message

    def _cap_used(self, request: Request | None) -> int:
        """The output cap a request went out with: what it asked, clamped to the model's."""
        asked = request.max_tokens if request is not None else self.max_tokens
        cap = int(getattr(self.provider, "max_output_tokens", 0) or 0)
        return min(asked, cap) if cap else asked

    def _adopt_window(self, exc: ContextTooLong) -> None:
        """A context-length error that names a smaller window than the one assumed: use it
        from now on (issue 32: after llama.cpp's 400 said n_ctx 2,048, 128,000 was kept)."""
        assumed = self.context.window
        if assumed is None or not exc.window or self.on_window is None:
            return
        if exc.window >= assumed:
            return
        self.on_window(exc.window)
        self.emit(
            Notice(
                f"the server's window is {exc.window:,} tokens (its error says so), not {assumed:,}: "
                "using it from now on (and for this server and model next time)",
                "warning",
            )
        )

    def _too_long(self, exc: ContextTooLong) -> ProviderError:
        """The run's end when a request does not fit even after shrinking once: the reason
        with the prompt's fixed parts in numbers, and only advice that can help (``limits``).

        A prompt that got no answer leaves the conversation, so that failed prompts do not
        pile up as consecutive unanswered user messages (issue 32); it is still in its cell.
        """
        messages = self.conversation.messages()
        parts = measure(self.system_prompt, self.surface.schemas(), messages).scaled_to(exc.prompt)
        window = self.context.window or self.provider.context_window
        prompts = sum(1 for m in messages if m.role == "user" and m.tool_result is None)
        smaller = any(not isinstance(tool, CompactTool) for tool in self.surface)
        text = too_long_advice(
            str(exc),
            window,
            parts,
            # rollover can help only where this run does not already offer its hand-off
            rollover_helps=not self.context.offers_handoff,
            compactable=prompts > 1,
            history=len(messages) > 1,
            smaller_tools=smaller,
        )
        self._drop_unanswered()
        return ProviderError(text, status=exc.status)

    def _drop_unanswered(self) -> None:
        messages = self.conversation.messages()
        if not messages or self._prompt_id is None or messages[-1].id != self._prompt_id:
            return
        try:
            self.conversation.replace("edit", messages[:-1])
        except HookError:
            return  # the log failed; it resyncs to the conversation on its next write
        self.emit(
            Notice(
                "your prompt got no answer and was taken out of the conversation (it is still in "
                "your cell): run it again once the request fits",
                "warning",
            )
        )

    def _output_room(self) -> int:
        """What an agent request asks for: the setting, at most what the window leaves after
        the prompt (issue 32: 8,192 asked of a 4,096 window ran until the context was full)."""
        room = self._window_room()
        return self.max_tokens if room is None else min(self.max_tokens, room)

    def _window_room(self) -> int | None:
        """Output tokens the window leaves after the next request's prompt (estimated)."""
        window = self.context.window
        return None if window is None else max(MIN_OUTPUT_TOKENS, window - self.context.estimate())
