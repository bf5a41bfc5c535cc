"""One step's answer in a notebook: new text only on the wire while it streams, Markdown once.

Re-sending the whole answer on every update costs the browser O(n²) bytes (an 8,000-token
answer put 13–16 MB on iopub). Here the text streams as plain ``stream`` messages that
each carry only what is new, into an ``ipywidgets.Output`` (the front end routes the cell's
stream output there), and when the step ends that output is replaced in place by the
answer's Markdown, sent once, and the widget is closed: the saved notebook keeps static
Markdown and text, no widget. A short answer (a tool loop's "Running the tests.") never
starts a widget: it is shown once, when its step ends.

Each message costs ~500 bytes of headers whatever it carries, so sends are spaced by a
budget: a few quick ones at first (the answer appears and moves), then one per
``CHARS_PER_SEND`` characters of answer, so the headers stay under the answer's own size.
Together with the final Markdown (text twice: Markdown and plain), an answer costs the
browser about 4× its text, however long it is (``bench.notebook_wire`` measures it).
"""

from __future__ import annotations

import time
from typing import Any

from IPython.display import display

from ..textsafe import printable
from ..widgets.settle import close_tree
from .inert_markdown import inert_markdown
from .output_batch import OutputBatch, show

START_AFTER = 0.5  # seconds of streaming before the answer is shown live (short ones: at the end)
START_CHARS = 600  # ... or this much text, whichever comes first
EVERY = 0.25  # seconds between sends at most
FREE_SENDS = 4  # the first sends, quick whatever their size
CHARS_PER_SEND = 1_500  # then one send per this many characters of answer (~500 bytes of headers each)


def markdown_bundle(text: str) -> dict[str, str]:
    # text/plain carries the same text, for terminals, nbval and text-only frontends. The
    # Markdown is made inert first: a live output is rendered unsanitized (inert_markdown.py).
    return {"text/markdown": inert_markdown(text), "text/plain": printable(text)}


class AnswerStream:
    """The answer of one step. ``add`` each delta, ``finish`` when the step ends (or is cut)."""

    def __init__(self, kernel: Any, batch: OutputBatch | None = None) -> None:
        self.text = ""
        self._batch = batch
        self._kernel: Any = kernel if _can_stream(kernel) else None
        self._sent = 0  # characters of ``text`` already on the wire
        self._first = 0.0
        self._last = 0.0
        self._sends = 0
        self._out: Any = None  # the Output widget while the answer streams live
        self._handle: Any = None

    @property
    def live(self) -> bool:
        return self._out is not None

    def add(self, delta: str) -> None:
        now = time.monotonic()
        if not self.text:
            self._first = now
        self.text += delta
        if self._kernel is None:
            return  # no iopub to stream on (a test's stand-in kernel): shown once, at the end
        if self._out is None:
            if now - self._first >= START_AFTER or len(self.text) >= START_CHARS:
                self._start()
                self._send(now)
            return
        allowed = FREE_SENDS + len(self.text) // CHARS_PER_SEND
        if now - self._last >= EVERY and self._sends < allowed:
            self._send(now)

    def finish(self) -> None:
        """The step's answer as Markdown, in place of the live text (or new, if it was never live)."""
        if self._out is not None:
            out, self._out = self._out, None
            out.__exit__(None, None, None)  # later outputs of the cell are the cell's again
            self._handle.update(markdown_bundle(self.text), raw=True)
            close_tree(out)  # its view is gone: no model is left for a saved notebook's widget state
        elif self.text.strip():  # a short answer: with the tool lines around it, in one output
            if self._batch is not None:
                self._batch.add_markdown(self.text)
            else:
                display(markdown_bundle(self.text), raw=True)
        self.text, self._sent, self._sends = "", 0, 0

    def _start(self) -> None:
        import ipywidgets

        self._out = ipywidgets.Output()
        self._handle = show(self._batch, self._out, display_id=True)
        self._out.__enter__()  # the front end now routes this cell's stream output into it

    def _send(self, now: float) -> None:
        new = self.text[self._sent :]
        self._sent, self._last = len(self.text), now
        if not new:
            return
        self._sends += 1
        kernel = self._kernel
        kernel.session.send(
            kernel.iopub_socket,
            "stream",
            {"name": "stdout", "text": printable(new)},
            parent=kernel.get_parent(),
            ident=b"stream.stdout",
        )


def _can_stream(kernel: Any) -> bool:
    return all(hasattr(kernel, name) for name in ("session", "iopub_socket", "get_parent"))
