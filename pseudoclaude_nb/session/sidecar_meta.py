"""A sidecar (``meta.json``) as a reader meets it: read, checked for being current and plausible.

Split from ``sidecar`` (the incremental replay that writes sidecars) so a reader of current
sidecars — ``%sessions list``, ``resume --last`` in a fresh kernel — imports neither the
log's entry readers nor pydantic's message models (issue 34). ``sidecar`` re-exports all of
these names.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, TypeGuard

from .. import safeio
from ..workspace import META_NAME

TITLE_MAX = 80  # ``MessageEntry.title``: the first user text, 80 characters
HEAD_BYTES = 4096  # a rewritten log (import, hand edit) is recognised by its first bytes

CLOCK_SKEW = 86_400.0  # a time this far past now is another clock's, or crafted
MIN_MESSAGE_BYTES = 16  # no line holds a message in fewer bytes: '"type":"message"' alone is 16


def _time_ok(value: object, now: float) -> bool:
    # Compared as they are: float(10**400) would raise, and NaN compares false.
    return type(value) in (int, float) and 0 <= value <= now + CLOCK_SKEW  # type: ignore[operator]


def dated(ts: object, mtime: float, now: float | None = None) -> float:
    """A session's time from its log's ``ts``: the file's (never later than now) when the
    log has none, or one in the future (a cloned session dated 2099 must not be the latest)."""
    now = time.time() if now is None else now
    if ts and _time_ok(ts, now):
        return ts  # type: ignore[return-value]
    return min(mtime, now) if mtime > 0 else 0.0


def head_digest(fd: int, offset: int) -> str:
    """What identifies the log an offset belongs to: a digest of its first bytes."""
    return hashlib.sha1(os.pread(fd, min(offset, HEAD_BYTES), 0)).hexdigest()


META_VERSION = 2
META_LIMIT = 1 << 20  # a sidecar is small; a bigger one is rebuilt, not read


def read_meta(session_dir: Path) -> dict[str, Any] | None:
    try:
        meta = json.loads(safeio.read_bytes(Path(session_dir) / META_NAME, limit=META_LIMIT))
    except (OSError, ValueError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else None


def is_current(meta: dict[str, Any] | None, st: os.stat_result) -> TypeGuard[dict[str, Any]]:
    """Whether ``meta`` describes the log whose ``stat`` is ``st``, without reading the log.

    The size alone is not enough: a log rewritten under the same name (an import, a hand
    repair) can have the size the sidecar recorded. Its modification time tells them apart;
    a sidecar without one is caught up from its offset, which checks the log's first bytes.
    A sidecar whose values no log of this size could give (``plausible``) is not current.
    """
    return (
        meta is not None
        and meta.get("version") == META_VERSION
        and meta.get("bytes") == st.st_size
        and meta.get("mtime_ns") == st.st_mtime_ns
        and plausible(meta, st.st_size)
    )


_STATUSES = ("ok", "recovered", "incomplete")


def _count_ok(value: object, most: int) -> bool:
    return type(value) is int and 0 <= value <= most


def plausible(meta: dict[str, Any], size: int, now: float | None = None) -> bool:
    """Whether every value of ``meta`` is one a replay of a log of ``size`` bytes can give.

    A workspace is untrusted: a cloned repository can ship a ``meta.json`` with a title of
    terminal escapes 10 KB long, 10**15 messages or a date in 2099 (which ``resume --last``
    would pick). Types, lengths, counts against the log's bytes, and dates no later than a
    day from now; anything else and the sidecar is rebuilt from the log.
    """
    now = time.time() if now is None else now
    title, problems_ = meta.get("title"), meta.get("problems")
    physical = meta.get("physical_messages")
    return (
        type(title) is str
        and len(title) <= TITLE_MAX
        and all(type(meta.get(k)) is str or meta.get(k) is None for k in ("first_model", "last_model"))
        and type(meta.get("bytes")) is int
        and meta["bytes"] == size
        and _count_ok(physical, size // MIN_MESSAGE_BYTES)
        and _count_ok(meta.get("effective_messages"), physical)  # type: ignore[arg-type]
        and _time_ok(meta.get("created"), now)
        and _time_ok(meta.get("last_activity"), now)
        and meta.get("status") in _STATUSES
        and _count_ok(meta.get("effective_from"), size)
        and _count_ok(meta.get("offset"), size)
        and type(problems_) is list
        and len(problems_) <= 5
        and all(type(p) is str and len(p) <= 300 for p in problems_)
    )
