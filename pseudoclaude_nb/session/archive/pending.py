"""Exports under way: where each one's temporary zip is, so that a killed export's is found.

An export writes its zip to a temporary file beside the destination (the person's folder:
the rename into place must not cross a filesystem), then renames it. A kill -9 in between
left ``.NAME.zip.XXXX.tmp`` there forever (issue 41). So an export first notes its temporary
file under ``.pseudoclaude/exports/`` (the process and the path), and removes the note once
the file is renamed or removed; ``sweep``, at the start of every export, removes what the
notes of processes that are gone still name. Only a regular file with an export's temporary
name is ever removed, never through a link.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ... import safeio
from ...workspace import ensure_state_dir

EXPORTS_DIR = "exports"
MAX_NOTE_BYTES = 8_192
# A note older than this is stale whatever its process id says (the id may have been reused
# since): no export takes a day.
STALE_SECONDS = 24 * 3600.0
# What an export's temporary file is called: ``.<dest name>.pc-export-<pid>-<random>.tmp``.
TEMP_NAME = re.compile(r"\..+\.pc-export-\d+-[A-Za-z0-9_]+\.tmp")


def temp_prefix(dest: Path) -> str:
    return f".{dest.name[:100]}.pc-export-{os.getpid()}-"


def _folder(workspace: Path) -> Path:
    return ensure_state_dir(workspace) / EXPORTS_DIR


@contextmanager
def noted(workspace: Path, tmp: Path) -> Iterator[None]:
    """While the block runs, a note says this process is writing ``tmp``; removed after it."""
    folder = _folder(workspace)
    note = folder / f"{os.getpid()}-{secrets.token_hex(4)}.json"
    data = {"pid": os.getpid(), "tmp": str(Path(tmp).absolute()), "ts": time.time()}
    safeio.write_atomic(note, json.dumps(data), create_dirs=True, fsync=False)
    try:
        yield
    finally:
        _unlink(note)


def sweep(workspace: Path) -> int:
    """Remove the temporary files of exports whose process is gone (killed), and their notes;
    how many files were removed. Never raises: a note it cannot read is left for later."""
    folder = _folder(workspace)
    removed = 0
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return 0
    for name in names:
        if not name.endswith(".json"):
            continue
        note = folder / name
        try:
            data = json.loads(safeio.read_bytes(note, limit=MAX_NOTE_BYTES))
            pid, tmp, ts = int(data["pid"]), Path(str(data["tmp"])), float(data["ts"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _alive(pid) and time.time() - ts < STALE_SECONDS:
            continue  # an export under way, in this process or another
        removed += _remove_temp(tmp)
        _unlink(note)
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True


def _remove_temp(tmp: Path) -> int:
    """Delete ``tmp`` if it is a regular file with an export's temporary name (not a link)."""
    if not TEMP_NAME.fullmatch(tmp.name):
        return 0
    try:
        if not stat.S_ISREG(os.lstat(tmp).st_mode):
            return 0
        os.unlink(tmp)
    except OSError:
        return 0
    return 1


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
