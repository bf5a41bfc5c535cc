"""A cell's printed output, copied from what the kernel sends rather than from each write.

In a kernel, ``sys.stdout`` is ipykernel's ``OutStream``: it buffers writes and sends them
to the front end a batch at a time (``_flush_buffers``, on its IO thread, every ~0.2 s and
when the cell ends). Copying the batches costs nothing per write: a tee on ``sys.stdout``
cost a Python call per write, ~4 a printed line (an output-heavy cell ran 20–30 % slower
with the extension loaded). ``_flush_buffers`` is ipykernel's (6.29+/7); a stream without
it (a terminal, another kernel) is teed as before (``magics.notebook``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

# A failure that must not reach the user's output is logged at debug, with its traceback:
# logging.getLogger("pseudoclaude_nb").setLevel(logging.DEBUG) (and a handler) shows it.
_log = logging.getLogger(__name__)


def can_tap(stream: Any) -> bool:
    return callable(getattr(stream, "_flush_buffers", None)) and hasattr(stream, "pub_thread")


class StreamTap:
    """Hands each batch ``stream`` sends to ``sink`` (called on the kernel's IO thread)."""

    def __init__(self, stream: Any, sink: Callable[[str], None]) -> None:
        self.stream = stream
        self._sink = sink
        self._send = stream._flush_buffers
        stream._flush_buffers = self._flush_buffers

    def _flush_buffers(self) -> Iterator[tuple[dict, str]]:
        for parent, data in self._send():
            if data:
                try:
                    self._sink(data)
                except Exception:  # noqa: BLE001 - recording must never stop the user's output
                    _log.debug("the cell recorder could not copy a stream batch", exc_info=True)
            yield parent, data

    def flush(self) -> None:
        """Send what the stream holds now (so the cell's record has all of it)."""
        try:
            self.stream.flush()
        except Exception:  # noqa: BLE001 - a flush for the record must never break the cell
            _log.debug("the stream could not be flushed for the cell's record", exc_info=True)

    def remove(self) -> None:
        if vars(self.stream).get("_flush_buffers") == self._flush_buffers:
            del self.stream._flush_buffers  # the class's method shows through again
