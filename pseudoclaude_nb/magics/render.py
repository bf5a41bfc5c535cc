"""Showing a run: streaming Markdown in notebooks, incremental plain text in terminals.

Renderers are runner listeners: they observe events and never drive the loop.
"""

from __future__ import annotations

import html
import sys
import time
from typing import Any

from IPython.display import display

from ..cost import RUN_HIT
from ..events import (
    AssistantDelta,
    Compacted,
    CompactStarted,
    ContextState,
    Dropped,
    Notice,
    PermissionAnswered,
    PermissionAsked,
    ReasoningDelta,
    RolloverCommitted,
    RolloverDeclared,
    RunEvent,
    RunFinished,
    RunSummary,
    Spilled,
    StepFinished,
    StepStarted,
    ToolFinished,
    ToolStarted,
)
from ..textsafe import printable
from ..widgets.theme import BRAND, ERROR, FG1, FG2, NO_MATH, WARN
from .answer_stream import AnswerStream, markdown_bundle
from .frontend import in_notebook
from .output_batch import OutputBatch, show
from .tool_line import TOOL_CSS, WAITING, ToolLine, call_brief, result_brief, tool_result_bundle

__all__ = [
    "NotebookRenderer",
    "TerminalRenderer",
    "call_brief",
    "context_line",
    "end_line",
    "in_notebook",
    "memory_outcome",
    "renderer_for",
    "result_brief",
    "tool_result_bundle",
]

THINKING_EVERY = 1.0  # seconds between updates of the "thinking… (N characters)" line


def end_line(summary: RunSummary, context: ContextState | None = None) -> str:
    u = summary.usage
    head = {
        "done": "✓ done",
        "max-steps": "■ stopped at max steps",
        "interrupted": "■ interrupted",
        "error": "✗ error",
        "truncated": "■ answer cut at the output cap",
        "refused": "■ the model refused",
    }.get(summary.status, summary.status)
    if summary.status == "done" and summary.refused_calls and not summary.allowed_calls:
        # Not a success to celebrate: nothing the run wanted to change was allowed to.
        head = "■ done, but every change was refused"
    refused = f" · {summary.refused_calls} call{'s' if summary.refused_calls != 1 else ''} refused"
    window = refused if summary.refused_calls else ""
    if context is not None:
        window += f" · context ~{context.estimated_tokens:,}/{context.context_window:,}"
    hit = f" ({u.cache_read_input_tokens / u.prompt_total:.0%} {RUN_HIT})" if u.prompt_total else ""
    return (
        f"{head} · {summary.steps} step{'' if summary.steps == 1 else 's'} · {u.prompt_total:,} in / {u.output_tokens:,} out"
        f" · cache read {u.cache_read_input_tokens:,}{hit}{cost_phrase(summary)}{window} · {summary.seconds:.1f} s"
        f" · session {summary.session_id}"
    )


def cost_phrase(summary: RunSummary) -> str:
    """`` · cost $0.021 (cache saved $0.010) · session cost $0.340``; '' before any request."""
    if not summary.spend.requests:
        return ""
    run = summary.spend.cost()
    saved = run.saved_text() if run.known else ""
    text = f" · cost {run.text()}" + (f" ({saved})" if saved else "")
    session = summary.session_spend
    if session is not None and session.requests:
        whole = session.cost()
        if whole.known or whole.text() != run.text():  # not "price unknown (x)" twice
            text += f" · session cost {whole.text()}"
    return text


ContextChange = Spilled | CompactStarted | Compacted | RolloverDeclared | RolloverCommitted | Dropped
# The context changes that get a line of their own once they happened (CompactStarted's line
# is shown while the summary runs, then replaced by its Compacted line).
ANNOUNCED = (Spilled, Compacted, RolloverDeclared, RolloverCommitted, Dropped)


def context_line(event: ContextChange) -> str:
    """The one-line story of a context change (Layer 1, Layer 2 or rollover)."""
    match event:
        case RolloverDeclared(missing_files=missing_files, related_files=related):
            missing = f", {len(missing_files)} missing" if missing_files else ""
            return (
                f"↻ the model handed off (new_context, {related} related files{missing}); "
                "the new window opens before the next step"
            )
        case RolloverCommitted(reason=reason, before_tokens=before, after_tokens=after):
            who = "the model's handoff" if reason == "model" else "a host-written handoff (hard limit)"
            return f"↻ rolled over to a new window with {who}: ~{before:,} → ~{after:,} tokens"
        case Dropped(strategy=strategy, messages=count, before_tokens=before, after_tokens=after):
            return (
                f"✂ {strategy} dropped {count} message{'s' if count != 1 else ''} from the context: "
                f"~{before:,} → ~{after:,} tokens (still in the log; %compact --undo puts them back)"
            )
    if isinstance(event, Spilled):
        why = {
            "single": "over the spill limit",
            "batch": "batch over its limit",
            "manual": "%compact --layer1",
            "strategy": "the strategy's Spill",
        }
        return (
            f"⤓ spilled the {event.tool} result ({event.bytes:,} bytes, {why.get(event.reason, event.reason)})"
            f" → {event.path}; the model sees a preview"
        )
    if isinstance(event, CompactStarted):
        return f"⟳ compacting ({event.trigger}) ~{event.before_tokens:,} tokens…"
    if event.ok:
        return f"⟳ compacted ({event.trigger}): ~{event.before_tokens:,} → ~{event.after_tokens:,} tokens"
    return f"✗ compaction ({event.trigger}) failed: {event.error}"


class TerminalRenderer:
    """Plain text as it arrives; for IPython in a terminal and for the demo command."""

    def __init__(self, quiet: bool = False, out: Any = None) -> None:
        self.quiet = quiet
        self.out = out or sys.stdout
        self._mid_line = False
        self._context: ContextState | None = None
        self._thinking = False
        self._running: float | None = None  # when the tool on the current line started
        self._asking = False  # a permission prompt is out, unanswered

    def __call__(self, event: RunEvent) -> None:
        if isinstance(event, ContextState):
            self._context = event
            return
        if isinstance(event, RunFinished):
            if self._running is not None:  # a tool was cut off: its line says so
                self._write(f"■ {event.summary.status} after {time.monotonic() - self._running:.1f} s\n")
                self._running, self._mid_line = None, False
            elif self._asking:  # cut off at the permission prompt: the call never ran
                self._write(f"■ {event.summary.status} while waiting for permission\n")
            self._newline()
            if event.summary.error is not None:
                self._write(f"error: {event.summary.error}\n")
            self._write(end_line(event.summary, self._context) + "\n")
            return
        if isinstance(event, ANNOUNCED):
            self._newline()
            self._write(context_line(event) + "\n")
            return
        if isinstance(event, Notice):
            self._newline()
            self._write(f"[{event.level}] {event.text}\n")
            return
        if self.quiet:
            return
        if isinstance(event, ReasoningDelta):
            if not self._thinking:  # the model's thinking is never printed as the answer
                self._thinking = True
                self._newline()
                self._write("thinking…\n")
        elif isinstance(event, AssistantDelta):
            self._write(event.text)
            self._mid_line = not event.text.endswith("\n")
        elif isinstance(event, ToolStarted):
            self._newline()
            self._write(f"→ {call_brief(event.call)} … ")
            self._mid_line, self._running = True, time.monotonic()
        elif isinstance(event, PermissionAsked):
            # The prompt goes on lines of its own; the call has not started.
            self._write(WAITING + "\n")
            self._mid_line, self._running, self._asking = False, None, True
        elif isinstance(event, PermissionAnswered):
            # The call's line again, from where its own time starts (a refusal ends it at once).
            self._write(f"→ {call_brief(event.call)} … ")
            self._mid_line, self._running, self._asking = True, time.monotonic(), False
        elif isinstance(event, ToolFinished):
            if not self._mid_line:  # a line of its own came in between (new_context's hand-off)
                self._write(f"→ {call_brief(event.call)} … ")
            self._write(f"{result_brief(event.result)} ({event.seconds:.1f} s)\n")
            self._mid_line, self._running = False, None
        elif isinstance(event, StepFinished):
            self._newline()
            self._thinking = False

    def _newline(self) -> None:
        if self._mid_line:
            self._write("\n")
            self._mid_line = False

    def _write(self, text: str) -> None:
        # Answers, notices and tool lines can quote what a cloned repository holds: a terminal
        # must not act on its escapes (clipboard, title, clear screen).
        self.out.write(printable(text))
        self.out.flush()


class NotebookRenderer:
    """Markdown that grows in place while the answer streams; tool calls as <details>;
    the context gauge on top, updated after every step."""

    def __init__(self, quiet: bool = False, kernel: Any = None) -> None:
        from IPython import get_ipython

        from ..widgets import ContextGauge

        self.quiet = quiet
        self.gauge = ContextGauge(live=True, head=TOOL_CSS)  # the tool lines' styles, once a run
        self._gauge_handle: Any = None
        self._kernel = kernel if kernel is not None else getattr(get_ipython(), "kernel", None)
        self._batch = OutputBatch()  # finished tool lines and short answers, shown a few at a time
        self._answer = AnswerStream(self._kernel, self._batch)
        self._context: ContextState | None = None
        self._compacting: Any = None
        self._reasoning = ""  # this step's thinking, shown collapsed above its answer
        self._reasoning_handle: Any = None
        self._reasoning_update = 0.0
        self._tool: ToolLine | None = None

    def __call__(self, event: RunEvent) -> None:
        if self._answer.live and not isinstance(event, (AssistantDelta, ReasoningDelta)):
            # While an answer streams live, the front end hands the cell's messages to its
            # Output widget (a gauge update too): it ends before anything else is shown.
            self._flush()
        self.gauge(event)
        if self._gauge_handle is None and isinstance(event, StepStarted):
            self._gauge_handle = show(self._batch, self.gauge.live_bundle(), raw=True, display_id=True)
            self.gauge.handle = self._gauge_handle
        if isinstance(event, ContextState):
            self._context = event
            return
        if isinstance(event, RunFinished):
            self._flush()
            if self._tool is not None:  # cut off by an interrupt or an error: the line stays, marked
                self._tool.stopped(event.summary.status)
                self._tool = None
            # The live gauge gives way to its final state as HTML and text: the saved notebook
            # reopens readable anywhere, with no widget state to find.
            final = self.gauge.static_bundle()
            self._batch.flush()
            if self._gauge_handle is None:
                display(final, raw=True)
            else:
                self._gauge_handle.update(final, raw=True)
            s = event.summary
            if s.error is not None:
                _show_html(f"<b>error:</b> {html.escape(str(s.error))}", f"error: {s.error}", ERROR)
            line = end_line(s, self._context)
            _show_html(html.escape(line), line, FG2)
            return
        if isinstance(event, CompactStarted):
            # Shown while the summary request runs, then replaced by its outcome.
            self._flush()
            line = context_line(event)
            self._compacting = show(
                self._batch, _html_line(html.escape(line), line, BRAND), raw=True, display_id=True
            )
            return
        if isinstance(event, ANNOUNCED):
            self._flush()
            line = context_line(event)
            data = _html_line(
                html.escape(line), line, ERROR if isinstance(event, Compacted) and not event.ok else BRAND
            )
            if isinstance(event, Compacted) and self._compacting is not None:
                self._compacting.update(data, raw=True)
                self._compacting = None
            else:
                show(self._batch, data, raw=True)
            return
        if isinstance(event, Notice):
            self.flush()
            _show_html(html.escape(event.text), f"[{event.level}] {event.text}", FG1, WARN)
            return
        if self.quiet:
            return
        if isinstance(event, StepStarted):
            self._flush()
            self._reasoning, self._reasoning_handle = "", None
        elif isinstance(event, ReasoningDelta):
            # While it streams, only its size (a line of constant size); the text once, at its end.
            self._reasoning += event.text
            now = time.monotonic()
            if self._reasoning_handle is None:
                self._reasoning_handle = show(
                    self._batch, _thinking_live(self._reasoning), raw=True, display_id=True
                )
                self._reasoning_update = now
            elif now - self._reasoning_update >= THINKING_EVERY:
                self._reasoning_handle.update(_thinking_live(self._reasoning), raw=True)
                self._reasoning_update = now
        elif isinstance(event, AssistantDelta):
            self._end_reasoning()
            self._answer.add(event.text)
        elif isinstance(event, StepFinished):
            self._end_reasoning()
            self._flush()
        elif isinstance(event, ToolStarted):
            self._end_reasoning()
            self._flush()
            self._tool = ToolLine(event.call, batch=self._batch)
        elif isinstance(event, PermissionAsked) and self._tool is not None:
            self._tool.waiting()
        elif isinstance(event, PermissionAnswered) and self._tool is not None:
            self._tool.resumed()
        elif isinstance(event, ToolFinished):
            self._end_reasoning()
            tool_line, self._tool = self._tool or ToolLine(event.call, batch=self._batch), None
            tool_line.finished(event)

    def _end_reasoning(self) -> None:
        if self._reasoning_handle is not None:
            self._reasoning_handle.update(_thinking(self._reasoning), raw=True)
            self._reasoning_handle = None

    def _flush(self) -> None:
        if self._answer.live:
            self._answer.finish()
            self.gauge.update(self.gauge.state)  # an update sent while it streamed went to its widget
        else:
            self._answer.finish()

    def flush(self) -> None:
        """Show everything the run has shown so far (before a prompt or a line of another kind)."""
        self._answer.finish()
        self._batch.flush()


MEMORY_NOTICE_WAIT = 10.0  # seconds the cell waits for the memory update to say what it did


def memory_outcome(agent: Any, renderer: TerminalRenderer | NotebookRenderer) -> None:
    """The memory update a run started, reported in the run's own output (not the next cell's).

    The answer is already shown; the update runs in the background. Its line appears at
    once ("updating…") and says what it did when it is done, or that it is still running.
    """
    memory = agent.pending_memory()
    if memory is None:
        return
    line = "memory: updating in the background…"
    handle = (
        display(_html_line(html.escape(line), line, FG2), raw=True, display_id=True)
        if isinstance(renderer, NotebookRenderer)
        else None
    )
    if not memory.wait(MEMORY_NOTICE_WAIT):
        text = "memory: the update is still running; %memory show waits for it, the next %agent sees it"
        reports = []
    else:
        reports = memory.take_reports()
        text = "\n".join(r.summary() for r in reports) or "memory: nothing to save"  # "memory updated: …"
    if handle is not None:
        handle.update(_html_line(html.escape(text).replace("\n", "<br>"), text, FG2, BRAND), raw=True)
    elif isinstance(renderer, TerminalRenderer):  # no handle: not a notebook
        renderer.out.write(printable(text) + "\n")


def _thinking(text: str) -> dict[str, str]:
    """The model's thinking, collapsed: one "thinking…" line that opens to the text."""
    markup = (
        "<details style='margin:2px 0;color:#777'><summary>thinking…</summary>"
        f"<pre style='max-height:20em;overflow:auto;font-size:85%;white-space:pre-wrap'>{html.escape(text)}"
        "</pre></details>"
    )
    return {"text/html": markup, "text/plain": f"thinking… ({len(text):,} characters)"}


def _thinking_live(text: str) -> dict[str, str]:
    line = f"thinking… ({len(text):,} characters)"
    return {"text/html": f"<div style='margin:2px 0;color:#777'>{line}</div>", "text/plain": line}


_markdown = markdown_bundle


def _html_line(markup: str, plain: str, color: str, accent: str | None = None) -> dict[str, str]:
    bar = f";border-left:3px solid {accent};padding-left:6px" if accent else ""
    return {
        "text/html": f"<div class='{NO_MATH}' style='color:{color};font-size:90%{bar}'>{markup}</div>",
        "text/plain": printable(plain),  # a console frontend prints it to a terminal
    }


def _show_html(markup: str, plain: str, color: str, accent: str | None = None) -> None:
    display(_html_line(markup, plain, color, accent), raw=True)


def renderer_for(shell: Any, quiet: bool = False) -> TerminalRenderer | NotebookRenderer:
    return NotebookRenderer(quiet, shell.kernel) if in_notebook(shell) else TerminalRenderer(quiet)
