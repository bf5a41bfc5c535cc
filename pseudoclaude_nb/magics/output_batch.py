"""Finished pieces of a run shown together: a tool loop's lines, a few per output, not one each.

A 100-step loop used to put ~300 messages a second on iopub (a display per answer, a display
and an update per tool line). Here a finished piece (a short answer, a tool line that never
needed its running state) waits in a batch; the batch is shown at most every ``EVERY``
seconds as one output, by the next piece or by a timer (so a loop that pauses for the model
still shows its last line at once). Anything else the renderer shows flushes the batch
first, so the order on screen is the run's order.

A batch of tool lines only is HTML; one that holds an answer too is Markdown with each tool
line as a one-line HTML block (its newlines written ``&#10;``, so a blank line in a tool's
output cannot end the block), so the answer keeps its Markdown rendering.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from IPython.core import display_functions

from ..textsafe import printable
from .inert_markdown import inert_markdown

EVERY = 0.2  # seconds between batches at most: a tool loop's output is ~5 messages a second


class OutputBatch:
    def __init__(self, every: float = EVERY) -> None:
        self.every = every
        self._pieces: list[tuple[str, str, str]] = []  # (kind: "md" | "html", markup, plain)
        self._lock = threading.RLock()
        self._timer: threading.Timer | None = None
        self._shown_at = 0.0

    def add_markdown(self, text: str) -> None:
        self._add(("md", inert_markdown(text), printable(text)))  # its fences closed, no live HTML

    def add_html(self, bundle: dict[str, str]) -> None:
        self._add(("html", bundle["text/html"], bundle["text/plain"]))

    def _add(self, piece: tuple[str, str, str]) -> None:
        with self._lock:
            self._pieces.append(piece)
            if self._timer is not None:
                return
            wait = self._shown_at + self.every - time.monotonic()
            if wait <= 0:
                self._show()
                return
            self._timer = threading.Timer(wait, self.flush)
            self._timer.daemon = True
            self._timer.start()

    def flush(self) -> None:
        """Show what waits, now (before anything else is shown, and when the run ends)."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._pieces:
                self._show()

    def _show(self) -> None:
        pieces, self._pieces = self._pieces, []
        self._shown_at = time.monotonic()
        plain = "\n".join(p for _, _, p in pieces)
        if all(kind == "html" for kind, _, _ in pieces):
            display_functions.display(
                {"text/html": "".join(m for _, m, _ in pieces), "text/plain": plain}, raw=True
            )
            return
        markdown = "\n\n".join(m if kind == "md" else one_line_html(m) for kind, m, _ in pieces)
        display_functions.display({"text/markdown": markdown, "text/plain": plain}, raw=True)


def one_line_html(markup: str) -> str:
    """HTML that Markdown keeps as one raw block: no line breaks in it at all."""
    return markup.replace("\r", "").replace("\n", "&#10;")


def show(batch: OutputBatch | None, data: Any, **kwargs: Any) -> Any:
    """``display`` after what the batch holds."""
    if batch is not None:
        batch.flush()
    return display_functions.display(data, **kwargs)
