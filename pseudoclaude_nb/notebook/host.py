"""The seam between the core's notebook tools and the notebook itself.

The core cannot see a kernel without IPython, so, like ``run_python``'s executor, it asks
a host for what it needs: the recorded cells, the user's namespace, a way to propose
a new cell, and the notebook document with a way to run its cells (SPEC §20). The magics implement it over IPython; tests can implement it with a dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .store import CellStore

if TYPE_CHECKING:
    from .document import CellRun, Document


class CellHost(Protocol):
    """What the document tools need of the kernel to run a cell (the magics implement it)."""

    def run_code(self, source: str) -> CellRun:
        """Run ``source`` as a cell of this kernel: outputs bounded, an execution count taken."""
        ...

    def running_cell_id(self) -> str | None:
        """The id of the cell running this ``%agent``, when the frontend sent it."""
        ...

    def package_cell(self, source: str) -> bool:
        """Whether ``source`` calls one of this package's magics (``%agent``, ``%compact``, …)."""
        ...


@dataclass(frozen=True)
class DocumentAccess:
    """The notebook document a run works on, and how.

    ``document`` is the live document, or the saved file (read-only), or ``None`` (no
    notebook at all); ``why`` says why it is not the live one; ``news`` is the line the run
    says about that (once per kernel); ``cells`` runs a cell's code where that is possible.
    """

    document: Document | None = None
    why: str | None = None
    news: str | None = None
    cells: CellHost | None = None


class NotebookHost(Protocol):
    @property
    def cells(self) -> CellStore:
        """The cells this kernel ran."""
        ...

    def namespace(self) -> Mapping[str, Any]:
        """The user's namespace (read, never changed, by the tools)."""
        ...

    def propose_cell(self, code: str) -> str:
        """Put ``code`` in a new cell below the current one; returns what happened, for the model."""
        ...

    def document(self, *, live: bool = True) -> DocumentAccess:
        """The notebook document for the next run (joined, or read from its file, or none);
        ``live=False`` (the ``notebook_document`` setting off): never joined."""
        ...
