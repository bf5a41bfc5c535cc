"""The session loader: replay a log into the effective conversation, never raising on content.

It owns reading ``conversation.jsonl``: ``replay`` is the replay core, ``fast_load`` the
resume from the last complete replace; both read entries through ``entries.parse_entry``.
Replay rules (SPEC §6.3):

* ``message`` appends; ``replace`` opens a pending snapshot that commits only when all
  ``count`` entries tagged with its ``replace_id`` have arrived. A snapshot cut off by EOF
  or by any other entry is discarded, so a replace is atomic: old state or new state.
* An unreadable line is skipped and its 1-based number kept in ``bad_lines``. An
  unreadable *last* line without ``\\n`` is a torn tail (a crash mid-write), as is a line
  the writer later marked torn; neither makes the recovery ``incomplete``.
* After replay, tool calls without results are cut (a trailing call with everything after
  it), and results without calls are dropped: results are never invented, because the
  host cannot know whether the tool ran.

Resume cost follows the effective state, not the physical log. When the last *complete*
replace lies ``FAST_MIN_SKIP`` (16 MiB) or more into the log, the log is read backwards to
it and only the region from it on is replayed (with the same code), plus the head of the
file for what the region cannot say (title, first model, first timestamp: looked for in
the first MiB) and a 1 MiB look-back before the replace for the entries that explain it
(its spill entries, a rollover intent, failed compactions). The messages, the anchor and
every flag about them are exactly those of a full replay (``test_session_loader_fast``).
What lies between head and look-back is not read (``LoadResult.skipped``), so:

* ``bad_lines``, ``torn_replace``, ``physical_messages``, ``replaces`` and the entry lists
  (``spills``, ``compacts``, ``rollovers``, ``notes``) describe the part that was read.
  Damage in the skipped part cannot change the effective state, and resume does not
  report it; ``load_session(path, full=True)`` replays everything and reports every line
  (the catalog rebuilds its sidecars that way, so ``%sessions list`` still shows it);
* an unreadable line *inside* the region makes the loader replay the whole log instead,
  so every line it reports carries its true line number;
* ``effective_from_line`` stays exact: it is counted when first asked for.
* the pins (``LoadResult.pins``, SPEC §19) are exact too: no replace drops a pin, so those
  set before the region come from the sidecar's stored replay state (``meta.json``), plus
  the pin entries between its offset and the region, found by their token. A resume with a
  current sidecar reads ~4 KB more for them (0.4 ms on a 216 MB log, fast load 4.6 → 5.0
  ms); without a sidecar the token scan reads the whole prefix (~0.4 s there, against 0.7 s
  for a full replay).

A full replay streams (issue 18): the log is read ``replay.CHUNK`` bytes at a time and only
the effective state is kept (a pending replace holds the state it would replace by offset),
so its peak memory is about the size of what it returns, not twice the log.

Only I/O errors raise, with the path in the message.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import safeio
from ..errors import SessionError
from ..workspace import log_path
from .entries import MessageEntry, ReplaceEntry, parse_line
from .fast_load import last_replace_hint, load_fast
from .replay import LoadResult, replay_file, settle

__all__ = ["FAST_MIN_SKIP", "LoadResult", "first_request", "load_session", "log_path", "marker_at"]

# Resume reads from the last complete replace only when that lies this far into the log.
# Below, the whole log is replayed: ~60 ms at most here (~290 MB/s), and a full replay
# numbers every unreadable line.
FAST_MIN_SKIP = 16 << 20


def load_session(path: str | Path, *, full: bool = False) -> LoadResult:
    """Load a session directory or its ``conversation.jsonl``.

    ``full`` replays the whole log even when it is large (every bad line reported, counts
    of the whole log); by default a large log is read from its last complete replace.
    """
    file = log_path(path)
    try:
        # No link followed, regular files only: a FIFO or /dev/zero as a log is refused, not read.
        with os.fdopen(safeio.open_file(file), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if not full and size >= FAST_MIN_SKIP:
                fast = load_fast(f.fileno(), file, size, FAST_MIN_SKIP)
                if fast is not None:
                    settle(fast)
                    return fast
            # Streamed: the log is read a chunk at a time and only the effective state is kept.
            result = LoadResult(path=file)
            hint = last_replace_hint(f.fileno(), size) if size >= FAST_MIN_SKIP else 0
            replay_file(f.fileno(), result, held_before=hint)
    except OSError as exc:
        raise SessionError(f"cannot read session log {file}: {exc.strerror or exc}") from exc
    settle(result)
    return result


def first_request(path: str | Path) -> tuple[str, str] | None:
    """(message id, content) of the log's first user text message (the session's original
    request, which every new window of a rollover pins); reads only up to it. None when the
    log holds none or cannot be read."""
    try:
        with os.fdopen(safeio.open_file(log_path(path)), "rb") as f:
            for line in f:
                entry = parse_line(line)
                if isinstance(entry, MessageEntry):
                    m = entry.message
                    if m.role == "user" and m.tool_result is None:
                        return m.id, m.content
    except OSError:
        return None
    return None


def marker_at(path: str | Path, offset: int) -> ReplaceEntry | None:
    """The replace marker whose line starts at ``offset`` (``LoadResult.effective_from_byte``:
    the replace the effective state began with), or None; reads that one line."""
    try:
        with os.fdopen(safeio.open_file(log_path(path)), "rb") as f:
            f.seek(offset)
            entry = parse_line(f.readline())
    except OSError:
        return None
    return entry if isinstance(entry, ReplaceEntry) else None
