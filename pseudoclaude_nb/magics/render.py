"""Showing a run: streaming Markdown in notebooks, incremental plain text in terminals.

Renderers are runner listeners: they observe events and never drive the loop.
"""

from __future__ import annotations

import html
import json
import sys
import time
from typing import Any

from IPython.display import display

from ..events import (
    AssistantDelta,
    Compacted,
    CompactStarted,
    ContextState,
    Notice,
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
from ..messages import ToolCall, ToolResult

UPDATE_EVERY = 0.15  # seconds between Markdown re-renders: smooth without flooding the frontend


def call_brief(call: ToolCall, width: int = 70) -> str:
    """``bash(command='python -m unittest')`` shortened to one line."""
    if len(call.arguments) == 1:
        inner = repr(next(iter(call.arguments.values())))
    else:
        inner = ", ".join(f"{k}={v!r}" for k, v in call.arguments.items())
    inner = " ".join(inner.split())
    if len(inner) > width:
        inner = inner[: width - 1] + "…"
    return f"{call.name}({inner})"


def result_brief(result: ToolResult) -> str:
    """One line: a short result itself, else its first error line or its size."""
    mark = "✗" if result.is_error else "✓"
    text = result.content.strip()
    lines = text.splitlines() or [""]
    if len(lines) == 1 and len(lines[0]) <= 80:
        return f"{mark} {lines[0]}"
    if result.is_error:
        return f"{mark} {lines[0][:80]}"
    tail = lines[-1] if lines[-1].startswith("exit code") else ""
    size = f"{len(lines):,} lines, {len(result.content.encode('utf-8')):,} bytes"
    # A command that exited non-zero is a normal result for the model, but it failed.
    return f"✗ {tail} · {size}" if tail else f"{mark} {size}"


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
    window = ""
    if context is not None:
        window = f" · context ~{context.estimated_tokens:,}/{context.context_window:,}"
    return (
        f"{head} · {summary.steps} steps · {u.prompt_total:,} in / {u.output_tokens:,} out"
        f" · cache read {u.cache_read_input_tokens:,}{window} · {summary.seconds:.1f} s"
        f" · session {summary.session_id}"
    )


ContextChange = Spilled | CompactStarted | Compacted | RolloverDeclared | RolloverCommitted


def context_line(event: ContextChange) -> str:
    """The one-line story of a context change (Layer 1, Layer 2 or rollover)."""
    if isinstance(event, RolloverDeclared):
        missing = f", {len(event.missing_files)} missing" if event.missing_files else ""
        return (
            f"↻ the model handed off (new_context, {event.related_files} related files{missing}); "
            "the new window opens before the next step"
        )
    if isinstance(event, RolloverCommitted):
        who = "the model's handoff" if event.reason == "model" else "a host-written handoff (hard limit)"
        return f"↻ rolled over to a new window with {who}: ~{event.before_tokens:,} → ~{event.after_tokens:,} tokens"
    if isinstance(event, Spilled):
        why = {
            "single": "over the spill limit",
            "batch": "batch over its limit",
            "manual": "%compact --layer1",
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

    def __call__(self, event: RunEvent) -> None:
        if isinstance(event, ContextState):
            self._context = event
            return
        if isinstance(event, RunFinished):
            self._newline()
            if event.summary.error is not None:
                self._write(f"error: {event.summary.error}\n")
            self._write(end_line(event.summary, self._context) + "\n")
            return
        if isinstance(event, (Spilled, Compacted, RolloverDeclared, RolloverCommitted)):
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
            self._write(f"→ {call_brief(event.call)} ")
            self._mid_line = True
        elif isinstance(event, ToolFinished):
            self._write(f"{result_brief(event.result)} ({event.seconds:.1f} s)\n")
            self._mid_line = False
        elif isinstance(event, StepFinished):
            self._newline()
            self._thinking = False

    def _newline(self) -> None:
        if self._mid_line:
            self._write("\n")
            self._mid_line = False

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()


class NotebookRenderer:
    """Markdown that grows in place while the answer streams; tool calls as <details>;
    the context gauge on top, updated after every step."""

    def __init__(self, quiet: bool = False) -> None:
        from ..widgets import ContextGauge

        self.quiet = quiet
        self.gauge = ContextGauge()
        self._gauge_shown = False
        self._text = ""
        self._handle: Any = None
        self._last_update = 0.0
        self._context: ContextState | None = None
        self._compacting: Any = None
        self._reasoning = ""  # this step's thinking, shown collapsed above its answer
        self._reasoning_handle: Any = None
        self._reasoning_update = 0.0

    def __call__(self, event: RunEvent) -> None:
        self.gauge(event)
        if not self._gauge_shown and isinstance(event, (StepStarted, RunFinished)):
            self._gauge_shown = True
            display(self.gauge.widget)
        if isinstance(event, ContextState):
            self._context = event
            return
        if isinstance(event, RunFinished):
            self._flush()
            s = event.summary
            if s.error is not None:
                _show_html(f"<b>error:</b> {html.escape(str(s.error))}", f"error: {s.error}", "#b00020")
            line = end_line(s, self._context)
            _show_html(html.escape(line), line, "#555")
            return
        if isinstance(event, CompactStarted):
            # Shown while the summary request runs, then replaced by its outcome.
            self._flush()
            line = context_line(event)
            self._compacting = display(
                _html_line(html.escape(line), line, "#1565c0"), raw=True, display_id=True
            )
            return
        if isinstance(event, (Spilled, Compacted, RolloverDeclared, RolloverCommitted)):
            self._flush()
            line = context_line(event)
            data = _html_line(
                html.escape(line),
                line,
                "#b00020" if isinstance(event, Compacted) and not event.ok else "#1565c0",
            )
            if isinstance(event, Compacted) and self._compacting is not None:
                self._compacting.update(data, raw=True)
                self._compacting = None
            else:
                display(data, raw=True)
            return
        if isinstance(event, Notice):
            self._flush()
            _show_html(html.escape(event.text), f"[{event.level}] {event.text}", "#8a6d00")
            return
        if self.quiet:
            return
        if isinstance(event, StepStarted):
            self._text, self._handle = "", None
            self._reasoning, self._reasoning_handle = "", None
        elif isinstance(event, ReasoningDelta):
            self._reasoning += event.text
            now = time.monotonic()
            if self._reasoning_handle is None:
                self._reasoning_handle = display(_thinking(self._reasoning), raw=True, display_id=True)
                self._reasoning_update = now
            elif now - self._reasoning_update >= UPDATE_EVERY:
                self._reasoning_handle.update(_thinking(self._reasoning), raw=True)
                self._reasoning_update = now
        elif isinstance(event, AssistantDelta):
            self._end_reasoning()
            self._text += event.text
            now = time.monotonic()
            if self._handle is None:
                self._handle = display(_markdown(self._text), raw=True, display_id=True)
                self._last_update = now
            elif now - self._last_update >= UPDATE_EVERY:
                self._handle.update(_markdown(self._text), raw=True)
                self._last_update = now
        elif isinstance(event, StepFinished):
            self._end_reasoning()
            self._flush()
        elif isinstance(event, ToolFinished):
            self._end_reasoning()
            self._tool(event)

    def _end_reasoning(self) -> None:
        if self._reasoning_handle is not None:
            self._reasoning_handle.update(_thinking(self._reasoning), raw=True)
            self._reasoning_handle = None

    def _flush(self) -> None:
        if self._handle is not None:
            self._handle.update(_markdown(self._text), raw=True)
            self._handle = None

    def _tool(self, event: ToolFinished) -> None:
        brief = call_brief(event.call)
        outcome = result_brief(event.result)
        body = event.result.content
        shown = body if len(body) <= 4000 else body[:4000] + f"\n… ({len(body) - 4000:,} more characters)"
        args = json.dumps(event.call.arguments, indent=1, ensure_ascii=False)
        if len(args) > 2000:
            args = args[:2000] + "\n…"
        color = "#b00020" if event.result.is_error else "#2e7d32"
        summary = (
            f"<code>{html.escape(brief)}</code> <span style='color:{color}'>{html.escape(outcome)}</span>"
            f" <span style='color:#888'>{event.seconds:.1f} s</span>"
        )
        markup = (
            f"<details style='margin:2px 0'><summary>{summary}</summary>"
            f"<pre style='max-height:20em;overflow:auto;font-size:85%'>{html.escape(args)}</pre>"
            f"<pre style='max-height:20em;overflow:auto;font-size:85%'>{html.escape(shown)}</pre></details>"
        )
        display({"text/html": markup, "text/plain": f"→ {brief} {outcome}"}, raw=True)


def _thinking(text: str) -> dict[str, str]:
    """The model's thinking, collapsed: one "thinking…" line that opens to the text."""
    markup = (
        "<details style='margin:2px 0;color:#777'><summary>thinking…</summary>"
        f"<pre style='max-height:20em;overflow:auto;font-size:85%;white-space:pre-wrap'>{html.escape(text)}"
        "</pre></details>"
    )
    return {"text/html": markup, "text/plain": f"thinking… ({len(text):,} characters)"}


def _markdown(text: str) -> dict[str, str]:
    # text/plain carries the same text, for terminals, nbval and text-only frontends.
    return {"text/markdown": text, "text/plain": text}


def _html_line(markup: str, plain: str, color: str) -> dict[str, str]:
    return {"text/html": f"<div style='color:{color};font-size:90%'>{markup}</div>", "text/plain": plain}


def _show_html(markup: str, plain: str, color: str) -> None:
    display(_html_line(markup, plain, color), raw=True)


def in_notebook(shell: Any) -> bool:
    # A kernel (ipykernel's ZMQInteractiveShell) has a frontend that renders HTML and widgets.
    return getattr(shell, "kernel", None) is not None


def renderer_for(shell: Any, quiet: bool = False) -> TerminalRenderer | NotebookRenderer:
    return NotebookRenderer(quiet) if in_notebook(shell) else TerminalRenderer(quiet)
