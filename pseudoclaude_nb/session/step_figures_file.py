"""The step figures of a log, kept beside it (``steps.idx``): the file, written and read back.

Derived data, like ``timeline.idx``: written whole and atomically (a temporary file renamed
over it, no fsync); read only when it belongs to the log as it is now — the same first
bytes (the sidecar's head digest), a line boundary where it ends, a checksum that matches,
its version, and the same log file (its inode and device: figures shipped beside a log, or
copied with it, are built again rather than believed). ``step_figures`` then checks it against the log's timeline (the same message
entries at the same offsets) before it trusts a figure, and a row read through it is checked
against its line's CRC. Anything else and the figures are built again from the log.
"""

from __future__ import annotations

import os
import struct
import zlib
from array import array
from pathlib import Path
from typing import Any

import orjson

from .. import safeio
from ..workspace import STEP_FIGURES
from .sidecar_meta import head_digest

_MAGIC = b"PCSTFIG1"  # a later layout takes another magic: an older file is then rebuilt
# magic, timeline entries covered, log bytes covered, message entries, extras' bytes, the log
# file's inode and device, head digest
_HEADER = struct.Struct("<8sQQQQQQ40s")
_CRC = struct.Struct("<I")
_PER_MESSAGE = 8 + 4 + 8 + 1 + 1  # offset, line CRC, units, flags, pairing
LIMIT = 1 << 31  # a file bigger than this is not read
EXTRAS_LIMIT = 1 << 24


def covered(session_dir: Path) -> int:
    """How many log bytes the kept figures say they cover (the header only; 0: none)."""
    head = safeio.read_head(Path(session_dir) / STEP_FIGURES, _HEADER.size)
    if len(head) < _HEADER.size or not head.startswith(_MAGIC):
        return 0
    return int(_HEADER.unpack(head)[2])


def save(session_dir: Path, fd: int, fig: Any) -> bool:
    """Write the figures (a ``step_figures.Figures``: not imported, it imports this) of the log
    open as ``fd``; False when they cannot be (never raises)."""
    extras = orjson.dumps({"rid": fig.rid, "clean": fig.clean, "open": list(fig.open.items())})
    try:
        digest = head_digest(fd, fig.covered).encode()
        st = os.fstat(fd)
        header = _HEADER.pack(
            _MAGIC, fig.entries, fig.covered, len(fig.offsets), len(extras), st.st_ino, st.st_dev, digest
        )
        body = b"".join(
            (header, fig.offsets.tobytes(), fig.crcs.tobytes(), fig.units.tobytes(),
             bytes(fig.flags), bytes(fig.pairs), extras)
        )  # fmt: skip
        safeio.write_atomic(Path(session_dir) / STEP_FIGURES, body + _CRC.pack(zlib.crc32(body)), fsync=False)
    except (OSError, ValueError, OverflowError):
        return False
    return True


def load(session_dir: Path, fd: int, *, size: int) -> dict[str, Any] | None:
    """The fields of the figures kept for the log open as ``fd`` (``size`` bytes), or None
    when there are none that may describe it (missing, damaged, of another log or layout)."""
    try:
        ifd = safeio.open_file(Path(session_dir) / STEP_FIGURES)
    except OSError:
        return None
    try:
        body = _body(ifd, fd, size=size)
    except OSError:
        return None
    finally:
        os.close(ifd)
    if body is None:
        return None
    _, entries, cov, n, _, _, _, _ = _HEADER.unpack_from(body)
    at = _HEADER.size
    columns: dict[str, Any] = {"entries": entries, "covered": cov}
    for name, code, count in (("offsets", "Q", n), ("crcs", "I", n), ("units", "Q", n + 1)):
        column = array(code)
        column.frombytes(body[at : at + column.itemsize * count])
        at += column.itemsize * count
        columns[name] = column
    columns["flags"] = bytearray(body[at : at + n])
    columns["pairs"] = bytearray(body[at + n : at + 2 * n])
    try:
        extras = orjson.loads(body[at + 2 * n :])
        rid, clean, open_calls = extras["rid"], extras["clean"], extras["open"]
        if not (rid is None or type(rid) is str) or type(clean) is not bool:
            return None
        columns.update(rid=rid, clean=clean, open={str(k): str(v) for k, v in open_calls})
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    return columns


def _body(ifd: int, fd: int, *, size: int) -> bytes | None:
    length = os.fstat(ifd).st_size
    if not _HEADER.size + _CRC.size <= length <= LIMIT:
        return None
    head = os.pread(ifd, _HEADER.size, 0)
    if len(head) != _HEADER.size or not head.startswith(_MAGIC):
        return None
    _, entries, cov, n, extra, ino, dev, digest = _HEADER.unpack(head)
    st = os.fstat(fd)
    if (ino, dev) != (st.st_ino, st.st_dev):
        return None  # made for another file: a copy, an import, a repository's (built again here)
    if extra > EXTRAS_LIMIT or length != _HEADER.size + _PER_MESSAGE * n + 8 + extra + _CRC.size:
        return None
    if n > entries or not 0 < cov <= size or os.pread(fd, 1, cov - 1) != b"\n":
        return None
    if head_digest(fd, cov).encode() != digest:
        return None
    parts, got = [], 0
    while got < length - _HEADER.size:
        piece = os.pread(ifd, min(1 << 24, length - _HEADER.size - got), _HEADER.size + got)
        if not piece:
            return None
        parts.append(piece)
        got += len(piece)
    rest = b"".join(parts)
    body, (crc,) = head + rest[: -_CRC.size], _CRC.unpack(rest[-_CRC.size :])
    return body if zlib.crc32(body) == crc else None
