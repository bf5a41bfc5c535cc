"""Which cells never reach the model: the ``agent-skip`` tag, its comment form, ``--skip-cells``.

A kernel is not told a cell's tags: an execute request carries the code and, from
JupyterLab and VS Code, a ``cellId`` in its metadata. ``NotebookTags`` maps that id to the
cell's tags by reading the notebook file (cached by its mtime and size), so a tag counts
once the notebook is saved. ``# agent-skip`` as a cell's first line is the same signal
anywhere (a terminal, nbclient, an unsaved notebook). No IPython here.
"""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

SKIP_TAG = "agent-skip"
MAX_NOTEBOOK_BYTES = 64_000_000

_MARK = re.compile(r"#\s*agent-skip\b", re.IGNORECASE)


def marked_in_source(source: str) -> bool:
    """Whether the cell's first non-empty line is the comment ``# agent-skip``."""
    for line in source.splitlines():
        if line.strip():
            return bool(_MARK.match(line.strip()))
    return False


class NotebookTags:
    """``cellId`` → tags of one notebook file, re-read only when the file changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[str, int, int] | None = None
        self._tags: dict[str, frozenset[str]] = {}

    def tags(self, path: str | os.PathLike[str] | None, cell_id: str | None) -> frozenset[str]:
        if not path or not cell_id:
            return frozenset()
        return self._load(Path(path)).get(cell_id, frozenset())

    def skipped(self, path: str | os.PathLike[str] | None, cell_id: str | None) -> bool:
        return SKIP_TAG in self.tags(path, cell_id)

    def _load(self, path: Path) -> dict[str, frozenset[str]]:
        try:
            st = path.stat()
        except OSError:
            return {}
        key = (str(path), st.st_mtime_ns, st.st_size)
        with self._lock:
            if key == self._key:
                return self._tags
        tags = _read_tags(path) if st.st_size <= MAX_NOTEBOOK_BYTES else {}
        with self._lock:
            self._key, self._tags = key, tags
        return tags


def _read_tags(path: Path) -> dict[str, frozenset[str]]:
    try:
        nb = json.loads(path.read_bytes().decode("utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError):
        return {}
    cells = nb.get("cells") if isinstance(nb, dict) else None
    out: dict[str, frozenset[str]] = {}
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or not isinstance(cell.get("id"), str):
            continue
        meta = cell.get("metadata")
        tags = meta.get("tags") if isinstance(meta, dict) else None
        if isinstance(tags, list):
            out[cell["id"]] = frozenset(t for t in tags if isinstance(t, str))
    return out


def parse_counts(text: str) -> frozenset[int]:
    """``"3,5,7-9"`` → {3, 5, 7, 8, 9}; ``ValueError`` saying what is wrong otherwise."""
    counts: set[int] = set()
    for piece in text.split(","):
        piece = piece.strip()
        match = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", piece)
        if not match:
            raise ValueError(f"{piece!r} is not an execution count (3) or a range (3-5)")
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) else lo
        if hi < lo:
            raise ValueError(f"{piece!r} ends before it starts")
        if hi - lo > 10_000:
            raise ValueError(f"{piece!r} is too wide a range")
        counts.update(range(lo, hi + 1))
    return frozenset(counts)
