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

from IPython.display import display

from ..events import ToolFinished
from ..messages import ToolCall, ToolResult
from ..textsafe import printable
from ..widgets.theme import ERROR, FG2, SUCCESS, WARN
from ..widgets.thumbs import thumbnail

TICK_EVERY = 1.0  # seconds between updates of a running tool's elapsed time
WAITING = "⏸ waiting for permission"  # the call's line while the user answers the prompt


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
        return f"{mark} {lines[0][:80]}"
    size = f"{len(lines):,} lines, {len(result.content.encode('utf-8')):,} bytes"
    return f"✗ {tail} · {size}" if tail else f"{mark} {size}"


class ToolLine:
    """One tool call's line: shown when the tool starts (with its elapsed time, ticking),
    replaced in place by the outcome when it finishes, or marked when it is cut off."""

    def __init__(self, call: ToolCall, tick: float = TICK_EVERY) -> None:
        self.call = call
        self.brief = call_brief(call)
        self.started = time.monotonic()
        self.asking = False  # the permission prompt is out: the line waits, the clock does not run
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._handle = display(self._running(0.0), raw=True, display_id=True)
        self._ticker = threading.Thread(target=self._tick, args=(tick,), name="pseudoclaude-tool-line", daemon=True)
        self._ticker.start()

    def _running(self, seconds: float) -> dict[str, str]:
        return tool_line_bundle(self.call, f"⏳ running {seconds:.0f} s", FG2, running=True)

    def _tick(self, every: float) -> None:
        while not self._done.wait(every):
            with self._lock:
                if not self._done.is_set() and not self.asking:
                    self._handle.update(self._running(time.monotonic() - self.started), raw=True)

    def waiting(self) -> None:
        """The user is asked for permission: the line says so and no tool time ticks."""
        with self._lock:
            self.asking = True
            self._handle.update(tool_line_bundle(self.call, WAITING, WARN, running=True), raw=True)

    def resumed(self) -> None:
        """The user answered: the tool's own time starts now."""
        with self._lock:
            self.asking, self.started = False, time.monotonic()
            self._handle.update(self._running(0.0), raw=True)

    def _final(self, data: dict[str, str]) -> None:
        with self._lock:
            self._done.set()
            self._handle.update(data, raw=True)

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
        f"<div class='{cls}' style='margin:2px 0'><code>{html.escape(brief)}</code> "
        f"<span style='color:{color}'>{html.escape(outcome)}</span></div>"
    )
    return {"text/html": markup, "text/plain": f"→ {brief} {outcome}"}


def tool_result_bundle(event: ToolFinished) -> dict[str, str]:
    """The finished call: one line (✓ or ✗ in its colour) that expands to arguments and output."""
    brief = call_brief(event.call)
    outcome = result_brief(event.result)
    body = event.result.content
    shown = body if len(body) <= 4000 else body[:4000] + f"\n… ({len(body) - 4000:,} more characters)"
    args = json.dumps(event.call.arguments, indent=1, ensure_ascii=False)
    if len(args) > 2000:
        args = args[:2000] + "\n…"
    # A command that exited non-zero is not an error result for the model, but it failed.
    color = ERROR if event.result.is_error or outcome.startswith("✗") else SUCCESS
    summary = (
        f"<code>{html.escape(brief)}</code> <span style='color:{color}'>{html.escape(outcome)}</span>"
        f" <span style='color:{FG2}'>{event.seconds:.1f} s</span>"
    )
    pictures = event.result.images  # issue-14: what the code displayed, as thumbnails
    plain = f"→ {brief} {outcome}"
    if pictures:
        summary += " " + "".join(thumbnail(data, kind, px=32) for data, kind in pictures)
        plain += f" · {len(pictures)} image{'s' if len(pictures) > 1 else ''}"
    markup = (
        f"<details class='pc-tool' style='margin:2px 0'><summary>{summary}</summary>"
        f"<pre style='max-height:20em;overflow:auto;font-size:85%'>{html.escape(args)}</pre>"
        f"<pre style='max-height:20em;overflow:auto;font-size:85%'>{html.escape(shown)}</pre>"
        + "".join(thumbnail(data, kind, px=240) for data, kind in pictures)
        + "</details>"
    )
    return {"text/html": markup, "text/plain": plain}
