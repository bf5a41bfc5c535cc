"""The person's own summary for ``%compact --apply --edit PATH``: read and checked within bounds.

The path is the person's, but what it names is not always a text file: a FIFO blocked the
kernel in ``open()``, ``/dev/zero`` ran it out of memory, and a 60 MB file became a "summary"
that grew the append-only log by 60 MB (issue 41). So the file is opened without blocking,
must be a regular file, and is refused — never cut — when it is larger than the summary
reserve allows or than the messages it would replace. Nothing here writes.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import ConfigError
from .estimate import BYTES_PER_TOKEN, estimate_text
from .plan import Plan, Preview

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISSOCK, "a socket"),
)


def max_bytes(reserve_tokens: int) -> int:
    """The largest summary file taken: what the summary reserve holds at the estimate's ratio
    (70,000 bytes at the default 20,000 tokens)."""
    return int(reserve_tokens * BYTES_PER_TOKEN)


def read_summary(path: str, reserve_tokens: int) -> str:
    """The text of the file at ``path`` (``~`` expanded), or ``ConfigError`` saying why not."""
    where = Path(path).expanduser()
    limit = max_bytes(reserve_tokens)
    try:
        # O_NONBLOCK: opening a FIFO with no writer returns at once (and is refused below).
        fd = os.open(where, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(
            f"--edit {path}: cannot read it ({exc.strerror or exc}); give a UTF-8 text file"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _KINDS if test(info.st_mode)), "a special file")
            raise ConfigError(f"--edit {path}: not a regular file ({kind}); give a UTF-8 text file")
        if info.st_size > limit:
            raise _too_big(path, info.st_size, limit, reserve_tokens)
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)  # the file may have grown since fstat
    finally:
        os.close(fd)
    if len(data) > limit:
        raise _too_big(path, len(data), limit, reserve_tokens)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--edit {path}: not UTF-8 text ({exc.reason} at byte {exc.start:,})") from None
    if not text.strip():
        raise ConfigError(f"--edit {path}: the file is empty; write the summary into it first")
    return text


def check_fits(path: str, text: str, plan: Preview | None) -> None:
    """Refuse a summary that is bigger than the messages it would replace (``plan``'s head)."""
    if not isinstance(plan, Plan) or plan.new is None:
        return  # no summary preview to apply (none, or a drop): the apply itself says so
    tokens = estimate_text(text)
    if tokens > plan.head_tokens:
        raise ConfigError(
            f"--edit {path}: refused: it is ~{tokens:,} tokens, more than the {plan.head:,} messages "
            f"it replaces (~{plan.head_tokens:,} tokens); a summary must make the context smaller"
        )


def _too_big(path: str, size: int, limit: int, reserve_tokens: int) -> ConfigError:
    return ConfigError(
        f"--edit {path}: the file is {size:,} bytes: refused (not cut); a summary may be at most "
        f"{limit:,} bytes (summary_reserve {reserve_tokens:,} tokens); shorten it, or raise "
        "%config PseudoClaude.summary_reserve"
    )
