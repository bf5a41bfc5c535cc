"""``run_python``'s executor: runs code in the notebook's own namespace, output captured.

Like a cell: statements run, the value of a final expression is shown. It does not go
through ``shell.run_cell``, because a nested cell would publish its result to the
notebook instead of returning it to the model.

Output is captured through the same bounded buffer as ``bash`` (kept whole up to 20 MiB,
spooled to a temporary file; beyond, head and tail, redacted before the cut), then goes to
Layer 1 like any tool result: ``while True: print('y' * 1000)`` cannot exhaust memory.
``SystemExit`` and a ``KeyboardInterrupt`` the code raises itself become results; a real
interrupt (SIGINT: the user pressed stop) still interrupts the run.

What the code displays (``display``, ``plt.show`` inline, matplotlib figures it leaves open)
goes back as images (issue-14): a ``ToolOutput`` whose images the runner stores in the session.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import io
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from IPython.utils.capture import capture_output

from ..redact import redacted_head
from ..tools import shell as bounds
from ..tools.registry import ToolOutput

VALUE_CAP = 10_000  # a repr longer than this is cut: the model asked to run code, not to dump data
# issue-14: what a display sends the model. Raster images go as images; an SVG this small
# goes as its text (the models read images, not vector markup, but a tiny SVG is cheap).
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
SVG_TEXT_CAP = 8_000
MAX_IMAGES = 8  # per call: more is a loop that plots, and the model cannot use them all


class BoundedStream(io.TextIOBase):
    """A text stream (``sys.stdout``'s stand-in) that feeds an ``OutputBuffer``."""

    def __init__(self, buffer: bounds.OutputBuffer) -> None:
        self._buffer = buffer

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._buffer.feed(text.encode("utf-8", errors="replace"))
        return len(text)

    def isatty(self) -> bool:
        return False


@contextlib.contextmanager
def _user_interrupts() -> Iterator[list[bool]]:
    """Notes whether a real SIGINT arrived (``flag[0]``) while the code ran; main thread only."""
    flag = [False]
    if threading.current_thread() is not threading.main_thread():
        flag[0] = True  # cannot tell: every KeyboardInterrupt counts as the user's
        yield flag
        return
    previous = signal.getsignal(signal.SIGINT)

    def on_sigint(signum: int, frame: Any) -> None:
        flag[0] = True
        if callable(previous):
            previous(signum, frame)
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGINT, on_sigint)
    except ValueError:
        flag[0] = True
        yield flag
        return
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass
class Execution:
    """What running one block of code in the user's namespace did (``execute``)."""

    displays: list[Any]  # IPython's captured RichOutput objects, in order
    value: Any = None
    has_value: bool = False
    error: BaseException | None = None
    note: str = ""  # what the error was, when it is not the code's own (an exit, a raised interrupt)


def execute(
    shell: Any,
    code: str,
    *,
    filename: str,
    out: bounds.OutputBuffer,
    err: bounds.OutputBuffer,
    before_exit: Callable[[], None] | None = None,
) -> Execution:
    """Run ``code`` like a cell in ``shell``'s namespace: statements, then the last expression's
    value; printed output into ``out``/``err`` (the same buffer twice keeps them interleaved),
    displays captured. The code's own errors are returned, never raised; a real interrupt (the
    user pressed stop) is raised. ``before_exit`` runs inside the capture after the code (the
    inline backend's figures are displayed there)."""
    namespace = shell.user_ns
    with (
        _user_interrupts() as interrupted,
        contextlib.redirect_stdout(BoundedStream(out)),
        contextlib.redirect_stderr(BoundedStream(err)),
        _rich_formats(shell),
        capture_output(stdout=False, stderr=False, display=True) as captured,
    ):
        ran = Execution([])
        try:
            tree = ast.parse(code, filename, "exec")
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, filename, "exec"), namespace)
            if last is not None:
                expr = cast(ast.Expr, last).value  # popped above only when it is an Expr
                ran.value = eval(compile(ast.Expression(expr), filename, "eval"), namespace)
                ran.has_value = ran.value is not None
        except KeyboardInterrupt as exc:
            if interrupted[0]:
                raise  # the user pressed stop: the run stops
            ran.error, ran.note = exc, "(raised by the code, not by an interrupt)"
        except SystemExit as exc:
            ran.error, ran.note = exc, f"(the code called exit with {exc.code!r}; the kernel keeps running)"
        except Exception as exc:  # noqa: BLE001 - the code's own error is the model's result
            ran.error = exc
        if before_exit is not None:
            before_exit()
    ran.displays = captured.outputs  # a copy made when read: read once the code is done
    return ran


def python_executor(shell: Any) -> Callable[[str], str | ToolOutput]:
    def run(code: str) -> str | ToolOutput:
        parts: list[str] = []
        figures_before = _figure_numbers()
        out = bounds.OutputBuffer(bounds.HEAD_BYTES, bounds.TAIL_BYTES, margin=bounds.REDACT_MARGIN)
        try:
            ran = execute(shell, code, filename="<run_python>", out=out, err=out)
        except BaseException:
            out.close()
            raise
        if ran.has_value:
            parts.append(redacted_head(repr(ran.value), VALUE_CAP))
        if ran.error is not None:
            parts.append(_format(ran.error, ran.note))
        text = (out.text() + "".join(parts)).rstrip()
        # issue-14: what the code displayed (display(), plt.show inline) and the figures it left open
        shown, images = _displayed(ran.displays)
        images += _open_figures(figures_before)
        notes = []
        if len(images) > MAX_IMAGES:
            notes.append(f"[{len(images) - MAX_IMAGES} more images not sent: at most {MAX_IMAGES} per call]")
            images = images[:MAX_IMAGES]
        text = "\n".join(t for t in [text, *shown, *notes] if t)
        if images:
            return ToolOutput(
                text or f"(displayed {len(images)} image{'s' if len(images) > 1 else ''})", tuple(images)
            )
        return text or "(no output)"

    return run


def _format(exc: BaseException, note: str = "") -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3))
    return text + (note + "\n" if note else "")


@contextlib.contextmanager
def _rich_formats(shell: Any) -> Iterator[None]:
    """Images and SVG formatted while the code runs, also where the frontend shows only text
    (a terminal IPython); a kernel has them on already."""
    formatter: Any = getattr(shell, "display_formatter", None)
    before = list(getattr(formatter, "active_types", None) or [])
    wanted = (
        [t for t in (*IMAGE_TYPES, "image/svg+xml") if t not in before and t in formatter.formatters]
        if before
        else []
    )
    if wanted:
        formatter.active_types = before + wanted
    try:
        yield
    finally:
        if wanted:
            formatter.active_types = before


def _displayed(outputs: list[Any]) -> tuple[list[str], list[tuple[bytes, str]]]:
    """The text and the images of what the code displayed (``display``, ``plt.show`` inline)."""
    texts: list[str] = []
    images: list[tuple[bytes, str]] = []
    for out in outputs:
        data = getattr(out, "data", None) or {}
        raster = next((t for t in IMAGE_TYPES if t in data), None)
        if raster is not None:
            raw = _raw(data[raster])
            if raw:
                images.append((raw, raster))
                continue
        svg = data.get("image/svg+xml")
        if svg is not None:
            svg_text = svg.decode("utf-8", "replace") if isinstance(svg, bytes) else str(svg)
            if len(svg_text.encode("utf-8")) <= SVG_TEXT_CAP:
                texts.append(f"[displayed SVG]\n{svg_text}")
            else:
                texts.append(
                    f"[displayed SVG of {len(svg_text):,} characters: not sent, over {SVG_TEXT_CAP:,}]"
                )
            continue
        plain = data.get("text/plain")
        if plain:
            texts.append(redacted_head(str(plain), VALUE_CAP))
    return texts, images


def _raw(value: Any) -> bytes:
    """A display's image bytes: IPython keeps bytes; a kernel's message holds base64 text."""
    if isinstance(value, bytes):
        return value
    try:
        return base64.b64decode(str(value), validate=False)
    except ValueError:
        return b""


def _figure_numbers() -> set[int]:
    plt = sys.modules.get("matplotlib.pyplot")  # only if the user imported it: never imported here
    return set(plt.get_fignums()) if plt is not None else set()


def _open_figures(before: set[int]) -> list[tuple[bytes, str]]:
    """PNGs of the matplotlib figures the code left open (new ones, or ones it drew on)."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    out = []
    for num in plt.get_fignums():
        fig = plt.figure(num)
        if num in before and not getattr(fig, "stale", True):
            continue  # the user's figure, untouched by this code
        buf = io.BytesIO()
        try:
            fig.savefig(buf, format="png", bbox_inches="tight")
        except Exception:  # noqa: BLE001 - a figure that cannot be drawn is not the model's image
            continue
        out.append((buf.getvalue(), "image/png"))
    return out
