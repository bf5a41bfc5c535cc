"""One executed cell as the agent sees it: a ``CellRecord``, and the bounded pieces it is made of.

Everything here is capped when it is *recorded*, not when it is shown: a cell that prints
10 MB keeps a head and a tail of its output (``BoundedText``) and a count of the rest, so
the store's memory stays small whatever the user runs. Every cut is made on redacted text
(SPEC §6.2, §18): each kept part is redacted with ``REDACT_MARGIN`` characters of what is
cut beyond it, so a cut cannot leave half a key (a ``BEGIN PRIVATE KEY`` line cut off, its
base64 lines kept) or separate a label from its value. Error text loses its ANSI colour
codes. No IPython here: the magics feed these functions what IPython hands them.
"""

from __future__ import annotations

import base64
import re
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# Per-field caps, in characters. Sized so that ten ordinary cells fit the 8,000-byte block.
SOURCE_CAP = 2_000
STDOUT_CAP = 2_000
STDERR_CAP = 1_000
RESULT_CAP = 1_000
DISPLAY_CAP = 1_000
MESSAGE_CAP = 500
FRAMES = 3
# issue-14: the images a cell displayed, kept (raw bytes) so the next run can show them to
# the model: the last few per cell, none larger than this.
CELL_IMAGES = 2
CELL_IMAGE_BYTES = 4 << 20
RASTER_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
FRAME_LINE_CAP = 200
# What a kept part is redacted with beyond its cut: a PEM key of 4096 bits is ~3,300 characters.
REDACT_MARGIN = 4_096

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# Control characters other than tab and newline (binary output) are shown as "\xNN".
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def clean(text: str) -> str:
    """Text safe to show the model: no ANSI codes, ``\\r\\n`` as ``\\n``, control bytes escaped."""
    text = strip_ansi(text).replace("\r\n", "\n")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def cap(text: str, limit: int) -> str:
    """``text`` redacted and cut to about ``limit`` characters: head and tail kept, the middle counted."""
    from ..redact import Redactor  # on the first recorded cell, not at %load_ext (issue 30)

    redactor = Redactor()
    if len(text) <= limit + 2 * REDACT_MARGIN:
        text = redactor.text(text)
        if len(text) <= limit:
            return text
        head_text, tail_text, total = text, text, len(text)
    else:  # each kept part with a margin of what is cut: time bounded however long the text
        head_text = redactor.text(text[: limit + REDACT_MARGIN])
        tail_text = redactor.text(text[-(limit + REDACT_MARGIN) :])
        total = len(text)
    head = limit * 2 // 3
    tail = limit - head
    return f"{head_text[:head]}\n… [{total - head - tail:,} characters not shown] …\n{tail_text[-tail:]}"


class BoundedText:
    """A write-only text sink that keeps the first ``head`` and last ``tail`` characters.

    Memory stays at ``head + tail`` (plus one write's slice and ``REDACT_MARGIN`` on each side)
    however much is written: the 10 MB print case. ``total`` counts everything, so the cut is
    reported honestly. ``value()`` redacts each part with its margin, then cuts.
    """

    def __init__(self, head: int = STDOUT_CAP, tail: int = STDOUT_CAP // 2) -> None:
        self.head_cut, self.tail_cut = head, tail
        self.head_cap, self.tail_cap = head + REDACT_MARGIN, (tail + REDACT_MARGIN if tail else 0)
        self._head: list[str] = []
        self._head_len = 0
        # The tail as the last writes: a write costs O(its length), not O(tail_cap) (a print
        # loop writes ~80,000 times; copying a 5 KB tail each time was most of the recorder's
        # cost). They are joined and cut back to tail_cap once they hold twice that.
        self._tail_parts: list[str] = []
        self._tail_len = 0
        self.total = 0

    def write(self, text: str) -> None:
        if text.__class__ is not str:
            text = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
        n = len(text)
        self.total += n
        if self._head_len < self.head_cap:
            piece = text[: self.head_cap - self._head_len]
            self._head.append(piece)
            self._head_len += len(piece)
            text = text[len(piece) :]
            n = len(text)
        if n and self.tail_cap:
            self._tail_parts.append(text)
            self._tail_len += n
            if self._tail_len >= 2 * self.tail_cap:  # amortized: one join per tail_cap characters
                kept = "".join(self._tail_parts)[-self.tail_cap :]
                self._tail_parts = [kept]
                self._tail_len = len(kept)

    @property
    def _tail(self) -> str:
        return "".join(self._tail_parts)[-self.tail_cap :] if self.tail_cap else ""

    def value(self) -> str:
        head, tail = "".join(self._head), self._tail
        if self.total <= self.head_cut + self.tail_cut:
            return head + tail  # whole: the record's cap redacts it
        from ..redact import Redactor  # as in cap(): loaded when a cell is first recorded

        redactor = Redactor()
        if self.total == len(head) + len(tail):  # nothing dropped yet: redacted as one text
            head = tail = redactor.text(head + tail)
        else:
            head, tail = redactor.text(head), redactor.text(tail)
        head, tail = head[: self.head_cut], (tail[-self.tail_cut :] if self.tail_cut else "")
        dropped = self.total - self.head_cut - self.tail_cut
        return f"{head}\n… [{dropped:,} characters not shown] …\n{tail}"


@dataclass(frozen=True)
class ErrorInfo:
    type: str
    message: str
    frames: tuple[str, ...] = ()  # "Cell In[3], line 2, in <module>: total / count", innermost last

    def render(self) -> str:
        lines = [f"{self.type}: {self.message}" if self.message else self.type]
        if self.frames:
            lines.append("  last frames (innermost last):")
            lines.extend(f"    {frame}" for frame in self.frames)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "message": self.message, "frames": list(self.frames)}


def error_info(
    exc: BaseException,
    *,
    label: Callable[[str], str | None] | None = None,
    frames: int = FRAMES,
) -> ErrorInfo:
    """Type, message and the last ``frames`` frames of ``exc``, ANSI stripped, capped.

    ``label`` turns a file name into what a person calls it ("Cell In[3]"); returning
    ``None`` drops the frame (the shell's own machinery).
    """
    summary = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    shown: list[str] = []
    for fs in summary:
        name = label(fs.filename) if label is not None else fs.filename
        if name is None:
            continue
        line = f"{name}, line {fs.lineno}, in {fs.name}"
        if fs.line:
            line += f": {fs.line.strip()}"
        shown.append(cap(clean(line), FRAME_LINE_CAP))
    if isinstance(exc, SyntaxError) and exc.text:
        shown.append(cap(clean(f"line {exc.lineno}: {exc.text.strip()}"), FRAME_LINE_CAP))
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not break recording
        message = "(the exception's message could not be read)"
    return ErrorInfo(type(exc).__name__, cap(clean(message), MESSAGE_CAP), tuple(shown[-frames:]))


def describe_display(data: Mapping[str, Any]) -> str:
    """A display bundle as text: its ``text/plain``, images by type and size, other types named."""
    parts: list[str] = []
    for mime, value in data.items():
        if mime.startswith("image/"):
            parts.append(f"[{mime} image, {_size_of(value):,} bytes]")
        elif mime == "application/vnd.jupyter.widget-view+json":
            parts.append("[widget]")
    text = data.get("text/plain")
    if isinstance(text, str) and not (parts and text.startswith("<Figure")):
        parts.insert(0, clean(text))
    elif not parts:
        kinds = ", ".join(sorted(data)) or "nothing"
        parts.append(f"[display of {kinds}]")
    return "\n".join(parts)


def display_image(data: Mapping[str, Any]) -> tuple[bytes, str] | None:
    """The raster image of a display bundle as (bytes, media type), if it has a small enough one."""
    for mime in RASTER_TYPES:
        value = data.get(mime)
        if value is None:
            continue
        if isinstance(value, (bytes, bytearray)):
            raw = bytes(value)
        else:
            try:
                raw = base64.b64decode(str(value), validate=False)
            except (ValueError, TypeError):
                return None
        return (raw, mime) if 0 < len(raw) <= CELL_IMAGE_BYTES else None
    return None


def _size_of(value: Any) -> int:
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, str):
        try:  # binary image types travel base64-encoded
            return len(base64.b64decode(value, validate=False))
        except (ValueError, TypeError):
            return len(value.encode("utf-8"))
    return 0


@dataclass
class CellRecord:
    """What one executed cell did, every field already capped."""

    seq: int  # this kernel's order of recording (execution counts can be missing)
    execution_count: int | None
    source: str
    stdout: str = ""
    stderr: str = ""
    result: str = ""
    displays: list[str] = field(default_factory=list)
    error: ErrorInfo | None = None
    images: list[tuple[bytes, str]] = field(default_factory=list)  # issue-14: (bytes, media type)
    # issue-29: the user kept this cell from the model (tag or comment ``agent-skip``): only
    # its place (seq, execution count) is recorded, never its source or output.
    skipped: bool = False

    @classmethod
    def skipped_cell(cls, seq: int, execution_count: int | None) -> CellRecord:
        """The record of a cell marked ``agent-skip``: where it ran, nothing of what it did."""
        return cls(seq, execution_count, "", skipped=True)

    @classmethod
    def make(
        cls,
        seq: int,
        execution_count: int | None,
        source: str,
        *,
        stdout: str = "",
        stderr: str = "",
        result: str = "",
        displays: list[str] | None = None,
        error: ErrorInfo | None = None,
        images: list[tuple[bytes, str]] | None = None,
    ) -> CellRecord:
        shown = [cap(d, DISPLAY_CAP) for d in (displays or [])][-5:]
        record = cls(
            seq,
            execution_count,
            cap(clean(source), SOURCE_CAP),
            cap(clean(stdout), STDOUT_CAP + STDOUT_CAP // 2 + 80),
            cap(clean(stderr), STDERR_CAP),
            cap(clean(result), RESULT_CAP),
            shown,
            error,
        )
        record.images = list(images or [])[-CELL_IMAGES:]
        return record

    @property
    def label(self) -> str:
        return f"In [{self.execution_count}]" if self.execution_count is not None else f"cell #{self.seq}"

    def render(self, limit: int | None = None) -> str:
        """The cell as text for the model; ``limit`` caps the whole rendering (bytes-ish)."""
        if self.skipped:
            return f"### {self.label} — skipped (agent-skip)"
        status = f" — raised {self.error.type}" if self.error else ""
        out = [f"### {self.label}{status}", self.source.rstrip() or "(empty)"]
        if self.stdout.strip():
            out += ["--- stdout", self.stdout.rstrip()]
        if self.stderr.strip():
            out += ["--- stderr", self.stderr.rstrip()]
        for display in self.displays:
            out += ["--- display", display.rstrip()]
        if self.result:
            out += [f"--- Out[{self.execution_count}]", self.result.rstrip()]
        if self.error:
            out += ["--- error", self.error.render()]
        text = "\n".join(out)
        return cap(text, limit) if limit is not None else text
