"""The notebook as last saved to disk: the read-only ``Document`` where no live one is reachable.

A terminal IPython has no notebook; nbclient, VS Code or a server without the collaboration
extension have one the kernel cannot join. There the agent can still read what was saved,
told plainly that it is the file and not the page (unsaved edits are not in it), and the
change tools are absent. No IPython here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from .document import CellRun, CellType, DocCell, DocumentError, Snapshot

MAX_NOTEBOOK_BYTES = 64_000_000


class SavedNotebook:
    """The ``.ipynb`` at ``path``, re-read at each snapshot (it may have been saved since)."""

    live = False

    def __init__(self, path: Path, shown: str, why: str) -> None:
        self.path, self.shown, self.why = path, shown, why

    @property
    def where(self) -> str:
        return f"the saved file {self.shown} (not the live page: {self.why}; unsaved edits are not in it)"

    def snapshot(self, start: int, end: int) -> Snapshot:
        cells = self._cells()
        ids = tuple(c.id for c in cells)
        return Snapshot(ids, tuple(cells[max(0, start) : end]), self.where)

    def _cells(self) -> list[DocCell]:
        try:
            with self.path.open("rb") as f:
                data = f.read(MAX_NOTEBOOK_BYTES + 1)
        except OSError as exc:
            raise DocumentError(f"{self.shown} could not be read ({exc.strerror or exc})") from None
        if len(data) > MAX_NOTEBOOK_BYTES:
            raise DocumentError(
                f"{self.shown} is over {MAX_NOTEBOOK_BYTES:,} bytes; read_file reads it in parts"
            )
        try:
            nb = json.loads(data.decode("utf-8", errors="replace"))
        except (ValueError, RecursionError):
            raise DocumentError(
                f"{self.shown} is not valid notebook JSON; read_file shows it as text"
            ) from None
        raw = nb.get("cells") if isinstance(nb, dict) else None
        if not isinstance(raw, list):
            raise DocumentError(f"{self.shown} has no list of cells")
        return [_cell(i, c) for i, c in enumerate(raw) if isinstance(c, dict)]

    def _read_only(self, *_: Any) -> NoReturn:
        raise DocumentError(f"the notebook cannot be changed from here: {self.why}")

    def insert(self, index: int, cell_type: CellType, source: str, stamp: Mapping[str, Any]) -> DocCell:
        self._read_only()

    def set_source(self, index: int, cell_id: str, source: str, stamp: Mapping[str, Any]) -> DocCell:
        self._read_only()

    def delete(self, index: int, cell_id: str) -> DocCell:
        self._read_only()

    def begin_run(self, index: int, cell_id: str) -> None:
        self._read_only()

    def end_run(self, index: int, cell_id: str, run: CellRun, stamp: Mapping[str, Any]) -> None:
        self._read_only()


def _text(value: Any) -> str:
    return (
        "".join(str(v) for v in value) if isinstance(value, list) else ("" if value is None else str(value))
    )


def _cell(index: int, cell: dict[str, Any]) -> DocCell:
    count = cell.get("execution_count")
    outputs = cell.get("outputs")
    metadata = cell.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    stamp = metadata.get("pseudoclaude")
    tags = metadata.get("tags")
    return DocCell(
        index=index,
        id=str(cell.get("id") or f"(no id: cell {index})"),
        cell_type=str(cell.get("cell_type") or "code"),
        source=_text(cell.get("source")),
        execution_count=count if isinstance(count, int) and not isinstance(count, bool) else None,
        outputs=tuple(o for o in outputs if isinstance(o, dict)) if isinstance(outputs, list) else (),
        agent=stamp if isinstance(stamp, dict) else None,
        tags=tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else (),
    )
