"""A tool call's line in a notebook: shown when the call starts, its elapsed time ticking,
replaced in place by the outcome (one line that opens to the arguments and output).

The one-line briefs of a call and of its result are shared with the terminal renderer.
"""

from __future__ import annotations

import html
import json
import re
import threading
import time
from typing import Any

from IPython.display import display

from ..events import ToolFinished
from ..messages import ToolCall, ToolResult
from ..textsafe import printable
from ..widgets.theme import ERROR, FG2, SUCCESS, WARN
from ..widgets.thumbs import thumbnail
from .output_batch import OutputBatch, show

TICK_EVERY = 1.0  # seconds between updates of a running tool's elapsed time
SHOW_AFTER = 0.5  # seconds a tool runs before its running line is shown (0: at once)
# Status glyphs from fonts every system has (geometric shapes, not emoji: ⏳/⏸ are boxes
# where no emoji font is installed).
RUNNING = "… running"
WAITING = "‖ waiting for permission"  # the call's line while the user answers the prompt
# What a finished line keeps of the output (the full output is in the session log): enough to
# recognise it; each saved line costs what it keeps (issue 47: ≤ 1 KB a step saved).
PREVIEW_LINES = 4
PREVIEW_CHARS = 240
ARGUMENTS_CHARS = 300
ERROR_CHARS = 200  # what a one-line outcome keeps of an error's first line
CODE_LINES, CODE_CHARS = 20, 800  # what a finished line keeps of an argument that is code


def call_brief(call: ToolCall, width: int = 70) -> str:
    """``bash(command='python -m unittest')`` shortened to one line."""
    if len(call.arguments) == 1:
        inner = repr(next(iter(call.arguments.values())))
    else:
        inner = ", ".join(f"{k}={v!r}" for k, v in call.arguments.items())
    inner = " ".join(inner.split())
    if len(inner) > width:
        inner = inner[: width - 1] + "…"
    return printable(f"{call.name}({inner})", one_line=True)


_EXIT_LINE = re.compile(r"exit code -?\d+( \(killed by \w+\))?")  # the last line bash adds on a failure


def result_brief(result: ToolResult) -> str:
    """One line: a short result itself, else its first error line or its size (escaped: a
    cloned file the agent read can hold terminal escapes)."""
    return printable(_result_brief(result), one_line=True)


def _result_brief(result: ToolResult) -> str:
    text = result.content.strip()
    lines = text.splitlines() or [""]
    # A command that exited non-zero is a normal result for the model, but it failed.
    tail = lines[-1] if _EXIT_LINE.fullmatch(lines[-1]) else ""
    mark = "✗" if result.is_error or tail else "✓"
    if len(lines) == 1 and len(lines[0]) <= 80:
        return f"{mark} {lines[0]}"
    if result.is_error:
        # An error's first line often ends with its fix ("…; rerun with --mode auto"): keep
        # it whole up to ERROR_CHARS, and mark a cut.
        first = lines[0]
        return f"{mark} {first if len(first) <= ERROR_CHARS else first[: ERROR_CHARS - 1] + '…'}"
    size = f"{len(lines):,} lines, {len(result.content.encode('utf-8')):,} bytes"
    return f"✗ {tail} · {size}" if tail else f"{mark} {size}"


class ToolLine:
    """One tool call's line. A call that ends within ``SHOW_AFTER`` seconds is shown once, its
    outcome, through the run's batch (a tool loop's lines then share outputs); a longer one
    gets its running line (its elapsed time ticking), replaced in place by the outcome, or
    marked when it is cut off. A permission prompt shows the line at once."""

    def __init__(self, call: ToolCall, tick: float = TICK_EVERY, batch: OutputBatch | None = None) -> None:
        self.call = call
        self.brief = call_brief(call)
        self.started = time.monotonic()
        self.asking = False  # the permission prompt is out: the line waits, the clock does not run
        self._batch = batch
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._handle: Any = None
        if SHOW_AFTER <= 0:
            self._show(self._running(0.0))
        self._ticker = threading.Thread(
            target=self._tick, args=(tick,), name="pseudoclaude-tool-line", daemon=True
        )
        self._ticker.start()

    def _show(self, data: dict[str, str]) -> None:
        if self._handle is None:
            self._handle = show(self._batch, data, raw=True, display_id=True)
        else:
            self._handle.update(data, raw=True)

    def _running(self, seconds: float) -> dict[str, str]:
        return tool_line_bundle(self.call, f"{RUNNING} {seconds:.0f} s", FG2, running=True)

    def _tick(self, every: float) -> None:
        wait = SHOW_AFTER if SHOW_AFTER > 0 else every
        while not self._done.wait(wait):
            wait = every
            with self._lock:
                if not self._done.is_set() and not self.asking:
                    self._show(self._running(time.monotonic() - self.started))

    def waiting(self) -> None:
        """The user is asked for permission: the line says so and no tool time ticks."""
        with self._lock:
            self.asking = True
            self._show(tool_line_bundle(self.call, WAITING, WARN, running=True))

    def resumed(self) -> None:
        """The user answered: the tool's own time starts now."""
        with self._lock:
            self.asking, self.started = False, time.monotonic()
            self._show(self._running(0.0))

    def _final(self, data: dict[str, str]) -> None:
        with self._lock:
            self._done.set()
            if self._handle is not None:
                self._handle.update(data, raw=True)
            elif self._batch is not None:
                self._batch.add_html(data)
            else:
                display(data, raw=True)

    def finished(self, event: ToolFinished) -> None:
        self._final(tool_result_bundle(event))

    def stopped(self, status: str) -> None:
        if self.asking:  # cut off at the prompt: the call never ran
            self._final(tool_line_bundle(self.call, f"■ {status} while waiting for permission", ERROR))
            return
        seconds = time.monotonic() - self.started
        self._final(tool_line_bundle(self.call, f"■ {status} after {seconds:.1f} s", ERROR))


def tool_line_bundle(call: ToolCall, outcome: str, color: str, *, running: bool = False) -> dict[str, str]:
    brief = call_brief(call)
    cls = "pc-tool pc-tool-running" if running else "pc-tool"
    markup = (
        f"<div class='{cls}'><code>{_text(brief)}</code> <span {_colour(color)}>{_text(outcome)}</span></div>"
    )
    return {"text/html": markup, "text/plain": f"→ {brief} {outcome}"}


_FALLBACK = {ERROR: "#d32f2f", SUCCESS: "#2e7d32", WARN: "#b26a00", FG2: "#777"}
_CLASS = {ERROR: "pc-bad", SUCCESS: "pc-ok", WARN: "pc-warn", FG2: "pc-dim"}

# What every tool line of a run shares, said once for the run (the renderer puts it with the
# run's gauge) instead of on each line: a tool loop's saved lines were ~170 bytes of style
# each (issue 47). The theme's colours are here; each line keeps a plain colour inline, which a
# sanitizer (an untrusted notebook drops ``<style>``) leaves, so a ✓ or ✗ keeps its colour there.
TOOL_CSS = (
    "<style>.pc-tool{margin:2px 0}.pc-tool pre{max-height:20em;overflow:auto;font-size:85%}"
    + "".join(f".pc-tool .{cls}{{color:{color}!important}}" for color, cls in _CLASS.items())
    + "</style>"
)


def _colour(color: str) -> str:
    """The attributes of a coloured part of a line: its class (the theme's colour, ``TOOL_CSS``)
    and a plain colour inline that survives an untrusted notebook's sanitizer."""
    return f"class='{_CLASS[color]}' style='color:{_FALLBACK[color]}'"


def _text(text: str) -> str:
    """Text as an element's content: ``<``, ``>`` and ``&`` escaped (quotes need no escape
    outside an attribute: a preview of code full of them stays its size)."""
    return html.escape(text, quote=False)


def preview(content: str) -> str:
    """The first lines of a tool's output, short: the saved notebook keeps this, the session
    log and the spill browser keep all of it."""
    lines = content.splitlines()
    shown = "\n".join(lines[:PREVIEW_LINES])
    if len(shown) > PREVIEW_CHARS:
        shown = shown[: PREVIEW_CHARS - 1] + "…"
    rest = len(content) - len(shown)
    if len(lines) > PREVIEW_LINES:  # the summary line says the size too
        shown += f"\n… {len(lines):,} lines in all (the session log keeps them)"
    elif rest > 0:
        shown += f"\n… {len(content):,} characters in all (the session log keeps them)"
    return shown


def tool_result_bundle(event: ToolFinished) -> dict[str, str]:
    """The finished call: one line (✓ or ✗ in its colour) that opens to its arguments (when the
    line cuts them) and the first lines of its output."""
    brief = call_brief(event.call)
    outcome = result_brief(event.result)
    # A command that exited non-zero is not an error result for the model, but it failed.
    color = ERROR if event.result.is_error or outcome.startswith("✗") else SUCCESS
    summary = f"<code>{_text(brief)}</code> <span {_colour(color)}>{_text(outcome)}</span> <small>{event.seconds:.1f} s</small>"
    pictures = event.result.images  # issue-14: what the code displayed, as thumbnails
    plain = f"→ {brief} {outcome}"
    if pictures:
        summary += " " + "".join(thumbnail(data, kind, px=32) for data, kind in pictures)
        plain += f" · {len(pictures)} image{'s' if len(pictures) > 1 else ''}"
    blocks = _argument_blocks(event.call, cut=brief.endswith("…)"))
    body = printable(preview(event.result.content))
    if body.strip() and body.strip() != outcome[2:].strip():
        blocks.append(_pre(body))
    if not blocks:
        return {"text/html": f"<div class='pc-tool'>{summary}</div>", "text/plain": plain}
    markup = f"<details class='pc-tool'><summary>{summary}</summary>" + "".join(blocks) + "</details>"
    return {"text/html": markup, "text/plain": plain}


def _pre(text: str, label: str = "") -> str:
    said = f"<div {_colour(FG2)}><small>{_text(label)}</small></div>" if label else ""
    return f"{said}<pre>{_text(text)}</pre>"


def _argument_blocks(call: ToolCall, *, cut: bool) -> list[str]:
    """The arguments under an opened tool line. Code and other text of several lines
    (``propose_cell``'s cell, a script) is shown as itself, one block per argument, not as a
    JSON string of ``\\n``s; the rest as JSON when the line cut it."""
    code = {k: v for k, v in call.arguments.items() if isinstance(v, str) and "\n" in v.strip()}
    rest = {k: v for k, v in call.arguments.items() if k not in code}
    blocks = []
    if rest and (cut or code):
        args = json.dumps(rest, indent=1, ensure_ascii=False)
        if len(args) > ARGUMENTS_CHARS:
            args = args[: ARGUMENTS_CHARS - 1] + "…"
        blocks.append(_pre(printable(args)))
    for name, text in code.items():
        lines = text.strip("\n").splitlines()
        shown = "\n".join(lines[:CODE_LINES])
        if len(shown) > CODE_CHARS:
            shown = shown[: CODE_CHARS - 1] + "…"
        if len(shown) < len(text.strip("\n")):
            shown += f"\n… {len(lines):,} lines in all (the session log keeps them)"
        blocks.append(_pre(printable(shown), f"{name}:"))
    return blocks
