"""Figures per message of a log, so that a step's request is told without building it (issue 47).

On a session that never compacted, the last step's request is the whole session (25,000
messages, 50 MB): replaying it to show 200 rows and two totals costs its size. What the
view needs besides those rows — how many messages, their estimate, whether the replay
would have repaired anything — is known per message once, in the log's order, and summed
for a range. For each message entry of the timeline (``session.timeline``), in order:

- its line's offset and CRC-32 (a row read later is checked against it);
- its size in the estimator's unit (``context.estimate.message_bytes``), kept summed:
  ``units[k]`` is the sum over the messages before ``k``;
- ``flags``: what the replay and ``replay.settle`` would look at — its role, whether it
  names a replace (and the one just before it), an unreadable message, image parts, the
  durable marks and a legacy text ``settle`` would mark, and whether the line is exactly
  the writer's encoding of its message (a fork may copy it: ``step_fast.copy_line``);
- ``pairs``: the tool-protocol check (``messages.pairing_problems``) run forward from the
  latest replace marker before it: clean so far, calls still open after it.

Each figure is made from the message itself, by the functions the full path uses (the
line parsed by ``entries.parse_entry``, ``message_bytes``, ``upgrade_legacy``,
``message_entry``), so a figure is what the full path would compute. They are kept beside
the log in ``steps.idx`` (``step_figures_file``) when a build read much, and by the session
writer at a run's end (``keep``), like ``timeline.idx``; a log appended to since is
extended from the saved state over the new lines only. ``step_fast`` reads them.
"""

from __future__ import annotations

import os
import zlib
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import compress
from pathlib import Path

from .. import safeio
from ..context.estimate import message_bytes
from ..messages import Message
from ..workspace import LOG_NAME
from . import step_figures_file as figures_file
from .entries import MessageEntry, encode, message_entry, parse_line
from .legacy import upgrade_legacy
from .step_index import MESSAGE_KINDS, StepIndex
from .timeline.items import KIND_CODE

# flags
ASSISTANT, NAMES_REPLACE, NAMES_LAST_REPLACE, UNREADABLE = 1, 2, 4, 8
IMAGES, MARKED, LEGACY, WRITERS_LINE = 16, 32, 64, 128
# pairs
CLEAN, OPEN, SPILLED = 1, 2, 4

SAVE_BYTES = 4 << 20  # figures read from this many more log bytes than kept are saved
KEEP_FROM_START = 2 * SAVE_BYTES  # the writer builds figures from nothing only for a log this short
BATCH = 4096  # lines read at a time while building
PLACEHOLDER = "0" * 32  # a replace id as ``messages.new_id`` makes them: 32 hex digits
_REPLACE = KIND_CODE["replace"]
_BUILT = frozenset((*MESSAGE_KINDS, _REPLACE))
_MESSAGES = bytes(int(c in MESSAGE_KINDS) for c in range(256))


def has(bit: int) -> bytes:
    """A table for ``bytes.translate``: 1 where a byte has ``bit``."""
    return bytes(int(bool(c & bit)) for c in range(256))


def copy_line(raw: bytes, replace_id: str) -> bytes | None:
    """The writer's line ``raw`` (no newline) as a snapshot line of the replace ``replace_id``
    with no model: its ``model`` and ``replace_id`` dropped and the id added; None when its
    ending is not the writer's. Exact only for a line flagged ``WRITERS_LINE``."""
    cut = body_end(raw, 0, len(raw))
    return None if cut < 0 else raw[:cut] + snapshot_tail(replace_id)


def snapshot_tail(replace_id: str) -> bytes:
    return b',"replace_id":"' + replace_id.encode() + b'"}\n'


_DROPPED = (b',"replace_id":"', b',"model":"')  # the writer's last members, last first


def body_end(data: bytes, start: int, end: int) -> int:
    """Where the line ``data[start:end]`` ends without its closing brace and its last members
    ``replace_id`` and ``model`` (each dropped only with a plain string value: no quote or
    backslash in it, so the key found is a key); -1 when it does not end with a brace."""
    if end <= start or data[end - 1] != 0x7D:  # "}"
        return -1
    stop = end - 1
    for key in _DROPPED:
        if stop - start < len(key) + 1 or data[stop - 1] != 0x22:  # a string value ends here
            continue
        quote = data.rfind(b'"', start, stop - 1)  # where that value starts
        at = quote + 1 - len(key)
        if quote < 0 or at < start or not data.startswith(key, at) or data.find(b"\\", quote, stop) >= 0:
            continue
        stop = at
    return stop


@dataclass
class Figures:
    entries: int = 0  # timeline entries covered
    covered: int = 0  # log bytes covered: the end of the last covered entry's line
    offsets: array[int] = field(default_factory=lambda: array("Q"))
    crcs: array[int] = field(default_factory=lambda: array("I"))
    units: array[int] = field(default_factory=lambda: array("Q", [0]))  # summed: len(offsets) + 1
    flags: bytearray = field(default_factory=bytearray)
    pairs: bytearray = field(default_factory=bytearray)
    # The forward pass's state after the last covered entry (to go on from).
    rid: str | None = None  # the replace id of the latest replace marker
    clean: bool = True
    open: dict[str, str] = field(default_factory=dict)  # call id -> name
    saved: int = 0  # the bytes the kept file covers

    def ordinal(self, offset: int) -> int:
        """The number of covered message entries that start before ``offset``."""
        return bisect_left(self.offsets, offset)

    def add(self, raw: bytes, offset: int) -> None:
        """One message entry's figures, from its line."""
        entry = parse_line(raw)
        self.offsets.append(offset)
        self.crcs.append(zlib.crc32(raw))
        if not isinstance(entry, MessageEntry):
            self.units.append(self.units[-1])
            self.flags.append(UNREADABLE)
            self.pairs.append(0)
            return
        m = entry.message
        self.units.append(self.units[-1] + message_bytes(m))
        rid = entry.raw.get("replace_id")
        flags = ASSISTANT if m.role == "assistant" else 0
        if rid is not None:
            flags |= NAMES_REPLACE | (NAMES_LAST_REPLACE if rid == self.rid else 0)
        spilled = m.tool_result is not None and bool(m.tool_result.spilled)
        if m.parts:
            flags |= IMAGES
        if m.host is not None or spilled:
            flags |= MARKED
        elif upgrade_legacy([m])[0] is not m:
            flags |= LEGACY
        if copy_line(raw, PLACEHOLDER) == _encoded(m):
            flags |= WRITERS_LINE
        self.flags.append(flags)
        self._pair(m)
        self.pairs.append(
            (CLEAN if self.clean else 0) | (OPEN if self.open else 0) | (SPILLED if spilled else 0)
        )

    def _pair(self, m: Message) -> None:
        """``messages.pairing_problems``, one message at a time: ``clean`` while it finds none."""
        if m.tool_result is not None:
            if self.open.pop(m.tool_result.call_id, None) is None:
                self.clean = False
            return
        if self.open:
            self.clean = False
            self.open.clear()
        if m.role == "assistant":
            for call in m.tool_calls:
                if call.id in self.open:
                    self.clean = False
                self.open[call.id] = call.name
        if m.role == "user" and m.tool_calls:
            self.clean = False

    def restart(self, replace_id: str) -> None:
        """A replace marker: what follows is checked from here."""
        self.rid, self.clean, self.open = replace_id, True, {}


def _encoded(m: Message) -> bytes | None:
    try:
        return encode(message_entry(m, replace_id=PLACEHOLDER))
    except (TypeError, ValueError):  # what the writer's encoder would escape: not copied
        return None


def figures_for(index: StepIndex, *, save: bool = True) -> Figures | None:
    """The figures of ``index``'s log, covering every entry of its timeline whose line is
    whole: the kept ones when they belong to it, extended over the lines after them; saved
    again when that read much (``save``). None when the log cannot be read."""
    kept: Figures | None = index._figures
    if kept is not None:
        return kept
    t = index.timeline
    try:
        with os.fdopen(safeio.open_file(index.path), "rb") as f:
            fd = f.fileno()
            size = os.fstat(fd).st_size
            fig = _kept(index, fd, size) or Figures()
            stop = t.count if t.count and os.pread(fd, 1, index.size - 1) == b"\n" else max(t.count - 1, 0)
            _extend(index, fig, stop)
            if (
                save
                and fig.covered - fig.saved >= SAVE_BYTES
                and figures_file.save(index.path.parent, fd, fig)
            ):
                fig.saved = fig.covered
    except OSError:
        return None
    index._figures = fig
    return fig


def keep(session_dir: Path) -> str | None:
    """Bring the log's ``steps.idx`` up to date when it covers 4 MB less than the log (the
    session writer's ``settle_meta``: a run's end, close); never raises: what went wrong is
    returned. A long log that has none (written before them) is left to the first reader
    that needs them: a run's end does not pay for its whole history."""
    from .step_index import step_index

    folder = Path(session_dir)
    try:
        size = os.stat(folder / LOG_NAME).st_size
        have = figures_file.covered(folder)
        if size - have < SAVE_BYTES or (not have and size > KEEP_FROM_START):
            return None
        figures_for(step_index(folder))
    except Exception as exc:  # noqa: BLE001 - derived: the next reader builds what is not kept
        return (
            f"the step figures of session {Path(session_dir).name} were not kept: {type(exc).__name__}: {exc}"
        )
    return None


def _kept(index: StepIndex, fd: int, size: int) -> Figures | None:
    """The kept figures, when they describe this log's first entries as its timeline has them."""
    fields = figures_file.load(index.path.parent, fd, size=size)
    if fields is None:
        return None
    t, n = index.timeline, fields["entries"]
    if n > t.count or (n and t.offsets[n - 1] >= fields["covered"]):
        return None
    if n < t.count and t.offsets[n] != fields["covered"]:
        return None
    messages = array("Q", compress(t.offsets[:n], t.kinds[:n].translate(_MESSAGES)))
    if messages != fields["offsets"] or not _sums(fields["units"]):
        return None
    return Figures(**fields, saved=fields["covered"])


def _sums(units: array[int]) -> bool:
    """Running sums from 0 (each figure is checked against its line when it is read)."""
    return bool(units) and units[0] == 0


def _extend(index: StepIndex, fig: Figures, stop: int) -> None:
    """Add the figures of the timeline entries [fig.entries, stop): message lines and the
    replace markers they follow, read ``BATCH`` lines at a time."""
    t = index.timeline
    todo = [i for i in range(fig.entries, stop) if t.kinds[i] in _BUILT]
    markers = {m.entry: m for m in index.markers(stop) if m.entry >= fig.entries}
    for start in range(0, len(todo), BATCH):
        batch = todo[start : start + BATCH]
        for i, raw in zip(batch, index.lines(batch), strict=True):
            if t.kinds[i] == _REPLACE:
                fig.restart(markers[i].replace_id)
            else:
                fig.add(raw, t.offsets[i])
    if stop > fig.entries:
        fig.entries, fig.covered = stop, index.end_of(stop - 1)
