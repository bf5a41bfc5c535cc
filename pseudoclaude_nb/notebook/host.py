"""The seam between the core's notebook tools and the notebook itself.

The core cannot see a kernel without IPython, so, like ``run_python``'s executor, it asks
a host for what it needs: the recorded cells, the user's namespace, and a way to propose
a new cell. The magics implement it over IPython; tests can implement it with a dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .store import CellStore


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
