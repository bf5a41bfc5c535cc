"""``run_python``'s executor: runs code in the notebook's own namespace, output captured.

Like a cell: statements run, the value of a final expression is shown. It does not go
through ``shell.run_cell``, because a nested cell would publish its result to the
notebook instead of returning it to the model.

Output is captured through the same bounded buffer as ``bash`` (kept whole up to 20 MiB,
spooled to a temporary file; beyond, head and tail, redacted before the cut), then goes to
Layer 1 like any tool result: ``while True: print('y' * 1000)`` cannot exhaust memory.
``SystemExit`` and a ``KeyboardInterrupt`` the code raises itself become results; a real
interrupt (SIGINT: the user pressed stop) still interrupts the run.
"""

from __future__ import annotations

import ast
import contextlib
import io
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from ..tools import shell as bounds

VALUE_CAP = 10_000  # a repr longer than this is cut: the model asked to run code, not to dump data


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


def python_executor(shell: Any) -> Callable[[str], str]:
    def run(code: str) -> str:
        namespace = shell.user_ns
        parts: list[str] = []
        out = bounds.OutputBuffer(bounds.HEAD_BYTES, bounds.TAIL_BYTES, margin=bounds.REDACT_MARGIN)
        stream = BoundedStream(out)
        try:
            with _user_interrupts() as interrupted, contextlib.redirect_stdout(stream), contextlib.redirect_stderr(
                stream
            ):
                try:
                    tree = ast.parse(code, "<run_python>", "exec")
                    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
                    exec(compile(tree, "<run_python>", "exec"), namespace)
                    if last is not None:
                        value = eval(compile(ast.Expression(last.value), "<run_python>", "eval"), namespace)
                        if value is not None:
                            parts.append(repr(value)[:VALUE_CAP])
                except KeyboardInterrupt as exc:
                    if interrupted[0]:
                        raise  # the user pressed stop: the run stops
                    parts.append(_format(exc, "(raised by the code, not by an interrupt)"))
                except SystemExit as exc:
                    parts.append(_format(exc, f"(the code called exit with {exc.code!r}; the kernel keeps running)"))
                except Exception as exc:
                    parts.append(_format(exc))
        except BaseException:
            out.close()
            raise
        text = (out.text() + "".join(parts)).rstrip()
        return text or "(no output)"

    return run


def _format(exc: BaseException, note: str = "") -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-3))
    return text + (note + "\n" if note else "")
