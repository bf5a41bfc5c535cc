"""A session's spend: every ``usage`` entry of its log, with its model (issue 31).

The log is the record of what was paid for, so the session's cost is read from it — a resumed
session counts the runs of earlier kernels too. Reading is incremental: the bytes read are
remembered per log (with its inode), so the end line of each run reads only what that run
appended. Usage lines are found by their ``"usage"`` bytes before any JSON is parsed
(``entries.parse_line`` is the one parser). An old log without the newer fields reads as 0.
No IPython here; nothing is written.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import safeio
from ..cost import Spend
from ..messages import Usage
from ..workspace import log_path
from .entries import SpendEntry, UsageEntry, parse_line

# Every count of a usage entry: Usage's integer fields (a field added there is read here too).
_COUNTS = tuple(name for name, info in Usage.model_fields.items() if info.annotation is int)


@dataclass
class _Read:
    inode: tuple[int, int]
    offset: int  # the byte after the last whole line read
    spend: Spend = field(default_factory=Spend)


_READ: dict[str, _Read] = {}
CHUNK = 8 << 20
_LOCK = threading.Lock()


def usage_of(raw: dict[str, Any]) -> Usage:
    """A usage entry's counts; a missing or malformed count is 0 (a log of another version)."""
    counts = {}
    for key in _COUNTS:
        value = raw.get(key)
        counts[key] = value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
    reason = raw.get("cache_miss_reason")  # issue 43: the API's cache diagnosis, a short type name
    return Usage(**counts, cache_miss_reason=reason[:64] if isinstance(reason, str) and reason else None)


def _read_lines(data: bytes, spend: Spend) -> None:
    for raw in data.split(b"\n"):
        if b'"usage"' not in raw and b'"spend"' not in raw:
            continue
        entry = parse_line(raw)
        if isinstance(entry, (UsageEntry, SpendEntry)):  # a step's, or a summary's
            spend.add(usage_of(entry.raw), entry.model)
            ts = entry.raw.get("ts")
            if isinstance(ts, (int, float)):
                spend.last_ts = float(ts)


def session_spend(path: str | Path) -> Spend:
    """The spend of the session whose folder or log is ``path`` (a copy: callers may keep it)."""
    file = log_path(path)
    key = str(file)
    with _LOCK:
        try:
            fd = safeio.open_file(file)
        except OSError:
            return Spend()
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            inode = (st.st_dev, st.st_ino)
            done = _READ.get(key)
            if done is None or done.inode != inode or done.offset > st.st_size:
                done = _Read(inode, 0)  # a new log, or one replaced or cut: read it again
            f.seek(done.offset)
            left, carry = st.st_size - done.offset, b""
            while left > 0:  # in chunks: a log can be far larger than memory should hold
                chunk = f.read(min(CHUNK, left))
                if not chunk:
                    break
                left -= len(chunk)
                data = carry + chunk
                end = data.rfind(b"\n") + 1  # a line still being written is read next time
                _read_lines(data[:end], done.spend)
                done.offset += end
                carry = data[end:]
        _READ[key] = done
        copy = Spend(list(done.spend.requests), done.spend.last_ts)
    return copy
