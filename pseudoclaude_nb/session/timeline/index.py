"""The timeline's classification of a log, kept beside it (``timeline.idx``) so an open scans only new bytes.

Derived data, like the sidecar: what the timeline's scan found in the log's first
``covered`` bytes (each entry's offset, line and kind, the usage points, replace reasons,
image parts and torn-line notes), before the sidecar's unreadable lines are applied
(``Scanner.finish`` does that at every build). Written whole and atomically (a temporary
file renamed over it, no fsync), by the session writer at a run's end and on close when its
log has grown enough since (``timeline.keep_index``), and by a timeline build that scanned much. It is used only when it
belongs to the log as it is now: the same first bytes (the sidecar's head digest), a line
boundary at ``covered``, a checksum that matches, entries in order; anything else and the
log is scanned in full, as without it. Like the sidecar it trusts the log to be append-only.
"""

from __future__ import annotations

import os
import struct
import zlib
from array import array
from dataclasses import dataclass, field
from itertools import islice
from operator import lt
from pathlib import Path

import orjson

from ... import safeio
from ...workspace import TIMELINE_INDEX
from ..sidecar_meta import head_digest

_MAGIC = b"PCTLIDX1"
# magic, covered bytes, the next line's number, entries, usage points, extras' bytes, head digest
_HEADER = struct.Struct("<8sQQQQQ40s")
_CRC = struct.Struct("<I")
MIN_BYTES = 4 << 20  # a log scanned in well under 0.1 s is not worth a file
LIMIT = 1 << 31  # an index bigger than this is not read


@dataclass
class Saved:
    covered: int  # the log bytes the entries cover (the end of a whole line)
    next_line: int  # the number of the line that starts at ``covered``
    offsets: array[int] = field(default_factory=lambda: array("Q"))
    lines: array[int] = field(default_factory=lambda: array("Q"))
    kinds: bytearray = field(default_factory=bytearray)
    usage: list[tuple[int, int]] = field(default_factory=list)
    reasons: dict[int, str] = field(default_factory=dict)
    images: dict[int, int] = field(default_factory=dict)
    torn_notes: list[int] = field(default_factory=list)


def covered(session_dir: Path) -> int:
    """How many log bytes the index says it covers (its header only; 0 when there is none)."""
    head = safeio.read_head(Path(session_dir) / TIMELINE_INDEX, _HEADER.size)
    if len(head) < _HEADER.size or not head.startswith(_MAGIC):
        return 0
    return int(_HEADER.unpack(head)[1])


def save(session_dir: Path, fd: int, saved: Saved) -> bool:
    """Write the index of the log open as ``fd``; False when it cannot be (never raises)."""
    try:
        usage_at = array("Q", (i for i, _ in saved.usage))
        usage_tokens = array("Q", (n for _, n in saved.usage))
    except OverflowError:  # a count no 64 bits hold (a hand-written line): no index
        return False
    extras = orjson.dumps(
        {
            "reasons": list(saved.reasons.items()),
            "images": list(saved.images.items()),
            "torn": saved.torn_notes,
        }
    )
    try:
        digest = head_digest(fd, saved.covered).encode()
        header = _HEADER.pack(
            _MAGIC, saved.covered, saved.next_line, len(saved.offsets), len(saved.usage), len(extras), digest
        )
        body = b"".join(
            (header, saved.offsets.tobytes(), saved.lines.tobytes(), bytes(saved.kinds),
             usage_at.tobytes(), usage_tokens.tobytes(), extras)
        )  # fmt: skip
        safeio.write_atomic(
            Path(session_dir) / TIMELINE_INDEX, body + _CRC.pack(zlib.crc32(body)), fsync=False
        )
    except (OSError, ValueError):
        return False
    return True


def load(session_dir: Path, fd: int, *, size: int, trusted: int, kinds: int) -> Saved | None:
    """The index of the log open as ``fd`` (``size`` bytes, readable up to ``trusted``), or None.

    None whenever it may not describe this log: missing, damaged, another log's, beyond
    the bytes the sidecar's replay read, or holding an impossible entry (``kinds``: the
    number of kind codes). The header is read first and the file's size checked against it
    and against the log: a shipped index (a sparse 2 GiB file, say) is refused without
    reading more than its header.
    """
    try:
        ifd = safeio.open_file(Path(session_dir) / TIMELINE_INDEX)
    except OSError:
        return None
    try:
        body = _body(ifd, fd, size=size, trusted=trusted)
    except OSError:
        return None
    finally:
        os.close(ifd)
    if body is None:
        return None
    _, cov, next_line, count, points, _, _ = _HEADER.unpack_from(body)
    at = _HEADER.size
    out = Saved(cov, next_line)
    for column in (out.offsets, out.lines):
        column.frombytes(body[at : at + 8 * count])
        at += 8 * count
    out.kinds = bytearray(body[at : at + count])
    at += count
    usage_at, usage_tokens = array("Q"), array("Q")
    for column in (usage_at, usage_tokens):
        column.frombytes(body[at : at + 8 * points])
        at += 8 * points
    try:
        extras = orjson.loads(body[at:])
        out.reasons = {int(i): str(r) for i, r in extras["reasons"]}
        out.images = {int(i): int(n) for i, n in extras["images"]}
        out.torn_notes = [int(i) for i in extras["torn"]]
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    out.usage = list(zip(usage_at, usage_tokens, strict=True))
    if not _plausible(out, count, kinds):
        return None
    return out


def _read(fd: int, n: int, at: int) -> bytes:
    """``n`` bytes of ``fd`` from ``at`` (fewer only at its end)."""
    parts = []
    while n > 0:
        piece = os.pread(fd, min(n, 1 << 24), at)
        if not piece:
            break
        parts.append(piece)
        n -= len(piece)
        at += len(piece)
    return b"".join(parts)


def _body(ifd: int, fd: int, *, size: int, trusted: int) -> bytes | None:
    """The index's bytes but its checksum, when its header fits its size and the log; else None."""
    length = os.fstat(ifd).st_size
    if not _HEADER.size + _CRC.size <= length <= LIMIT:
        return None
    head = _read(ifd, _HEADER.size, 0)
    if len(head) != _HEADER.size or not head.startswith(_MAGIC):
        return None
    _, cov, _, count, points, extra, digest = _HEADER.unpack(head)
    if length != _HEADER.size + 17 * count + 16 * points + extra + _CRC.size:
        return None
    # An index holds ~21 bytes an entry and each entry is a line of the log: one bigger than
    # the log bytes it covers is not of this log (and is not read).
    if length - _HEADER.size - _CRC.size > cov or points > count:
        return None
    if (
        not 0 < cov <= min(size, trusted)
        or os.pread(fd, 1, cov - 1) != b"\n"
        or head_digest(fd, cov).encode() != digest
    ):
        return None
    rest = _read(ifd, length - _HEADER.size, _HEADER.size)
    if len(rest) != length - _HEADER.size:
        return None
    body, (crc,) = head + rest[: -_CRC.size], _CRC.unpack(rest[-_CRC.size :])
    return body if zlib.crc32(body) == crc else None


def _plausible(s: Saved, count: int, kinds: int) -> bool:
    """Entries in order inside the bytes and lines covered, every index naming an entry."""
    if count:
        if (
            s.offsets[-1] >= s.covered
            or s.lines[0] < 1
            or s.lines[-1] >= s.next_line
            or max(s.kinds) >= kinds
        ):
            return False
        if not all(map(lt, s.offsets, islice(s.offsets, 1, None))) or not all(
            map(lt, s.lines, islice(s.lines, 1, None))
        ):
            return False
    elif s.next_line < 1:
        return False
    marks = [i for i, _ in s.usage] + list(s.reasons) + list(s.images) + s.torn_notes
    return all(0 <= i < count for i in marks) and all(map(lt, s.usage, islice(s.usage, 1, None)))
