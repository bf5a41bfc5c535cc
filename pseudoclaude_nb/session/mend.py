"""Ending a torn last line of a session log (a crash or a failed write mid-line).

The writer, when it opens a log and before it writes after a failed write, appends what
``mending`` returns: ``\n`` plus a note saying a line was torn, so the next entry does not
fuse with the torn one and the loader counts it as a crash's torn tail, not corruption.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import orjson

from .. import safeio
from . import entries

_MEND_LOOK = 1 << 16  # how far back the writer looks for its last line when it opens


def mending(fd: int, path: Path) -> bytes:
    """What ends a torn last line: ``\n`` plus a note saying the line was torn.

    The note lets the loader count the line as a crash's torn tail, not corruption. A
    last line that ends with ``\n`` but is a cut entry (a crash during an earlier mend
    wrote only its first bytes) gets the note too. The note's ``kind`` comes right after
    its type, so what a crash leaves of it is recognisable as part of a note.
    """
    size = os.fstat(fd).st_size
    if size == 0:
        return b""
    if _pread(fd, path, 1, size - 1) == b"\n":
        if not _last_line_torn(fd, path, size):
            return b""
        lead = b""
    else:
        lead = b"\n"
    note = entries.NoteEntry.torn().raw
    return lead + entries.encode(note)


def _pread(fd: int, path: Path, count: int, offset: int) -> bytes:
    """Bytes of the log, through the writer's fd (or a read-only one if it cannot read)."""
    try:
        return os.pread(fd, count, offset)
    except OSError as exc:
        if exc.errno != errno.EBADF:
            raise
    fd = safeio.open_file(path)
    try:
        return os.pread(fd, count, offset)
    finally:
        os.close(fd)


def _last_line_torn(fd: int, path: Path, size: int) -> bool:
    """True when the log's last line (it ends with ``\n``) does not parse: a mend cut short."""
    start = max(0, size - _MEND_LOOK)
    tail = _pread(fd, path, size - start, start)
    cut = tail.rfind(b"\n", 0, len(tail) - 1)
    if cut < 0 and start > 0:
        return False  # a last line longer than we look at: a real entry, not a cut note
    line = tail[cut + 1 : -1]
    # Only what a cut write leaves: the start of an entry (every entry starts so), not
    # a line someone edited by hand (that stays "incomplete").
    if not line.startswith(b'{"v":'):
        return False
    try:
        return type(orjson.loads(line)) is not dict
    except orjson.JSONDecodeError:
        return True
