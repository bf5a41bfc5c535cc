"""The notebook document the person has open, as the agent's tools see it.

A ``Document`` is the notebook's cells in order (``DocCell``: index, id, type, source,
execution count, outputs). Two kinds implement it: ``live.LiveNotebook``, the open document
as the Jupyter server's collaboration room holds it (changes appear in the page as they are
made), and ``saved.SavedNotebook``, the ``.ipynb`` file on disk, read-only, where no live
document is reachable (a terminal, nbclient, VS Code, a server without collaboration).

Every change is addressed by index *and* checked against what the agent last read
(``seen.Seen``): the document is shared with a person who may be typing in it.
No IPython here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..errors import ToolError

CellType = Literal["code", "markdown", "raw"]


class DocumentError(ToolError):
    """The document could not be read or changed; the message is the model's result."""


class JoinError(DocumentError):
    """The live document could not be joined; ``reason`` is the sentence a run says."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the live notebook could not be joined: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class DocCell:
    """One cell as read from the document (a copy: changing it changes nothing)."""

    index: int
    id: str
    cell_type: str
    source: str
    execution_count: int | None = None
    outputs: tuple[Mapping[str, Any], ...] = ()
    agent: Mapping[str, Any] | None = None  # metadata.pseudoclaude: the agent's stamp, if any
    tags: tuple[str, ...] = ()

    @property
    def ran(self) -> bool:
        return self.execution_count is not None

    @property
    def skipped(self) -> bool:
        """The person keeps this cell from the model (tag or first-line comment ``agent-skip``)."""
        from .skip import SKIP_TAG, marked_in_source

        return SKIP_TAG in self.tags or marked_in_source(self.source)


@dataclass(frozen=True)
class CellRun:
    """What running a cell's code produced, in the notebook format and for the model.

    ``outputs`` are nbformat output dicts (stream, display_data, execute_result, error),
    already bounded; ``text`` is what the model reads (redacted, capped, as ``read_cells``
    renders a cell); ``images`` go to the model as images.
    """

    execution_count: int | None
    outputs: tuple[Mapping[str, Any], ...]
    text: str
    images: tuple[tuple[bytes, str], ...] = ()
    interrupted: bool = False


@dataclass(frozen=True)
class Snapshot:
    """The document at one moment: every cell's id in order, and the cells asked for in full."""

    ids: tuple[str, ...]
    cells: tuple[DocCell, ...]  # the requested range, in order
    where: str  # how the model should think of it: "the open notebook (live)" or "the saved file …"
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def count(self) -> int:
        return len(self.ids)


class Document(Protocol):
    """The notebook's cells; the live kind can also change them."""

    @property
    def live(self) -> bool:
        """Whether changes reach the page the person sees (else: read-only, from the file)."""
        ...

    def snapshot(self, start: int, end: int) -> Snapshot:
        """Every id, and the cells ``start`` (inclusive) to ``end`` (exclusive) in full."""
        ...

    def insert(self, index: int, cell_type: CellType, source: str, stamp: Mapping[str, Any]) -> DocCell: ...

    def set_source(self, index: int, cell_id: str, source: str, stamp: Mapping[str, Any]) -> DocCell: ...

    def delete(self, index: int, cell_id: str) -> DocCell: ...

    def begin_run(self, index: int, cell_id: str) -> None:
        """Mark the cell running (``[*]``), its old outputs cleared."""
        ...

    def end_run(self, index: int, cell_id: str, run: CellRun, stamp: Mapping[str, Any]) -> None:
        """Put the run's outputs and execution count into the cell (found by id if it moved)."""
        ...


def cell_ids(cells: Sequence[DocCell]) -> tuple[str, ...]:
    return tuple(c.id for c in cells)
