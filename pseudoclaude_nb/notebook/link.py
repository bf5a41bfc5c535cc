"""Which document a run's tools work on: the live one when it can be joined, else the saved file.

Asked once per run, at its plan: a live document already joined is kept for the kernel's
life (and rejoined if its connection dropped); otherwise the route is looked for again, so
a server restarted with the collaboration extension is found by the next run. What is not
reachable is a reason, said once per kernel (``news``). No IPython here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from .document import Document, JoinError
from .live import LiveNotebook
from .route import find_route
from .saved import SavedNotebook


class DocumentLink:
    """The document of the notebook this kernel runs, as ``notebook()`` names it."""

    def __init__(
        self, notebook: Callable[[], str | None], env: Callable[[], Mapping[str, str]] | None = None
    ) -> None:
        self._notebook = notebook
        self._env = env
        self._live: LiveNotebook | None = None
        self._said: set[str] = set()

    def resolve(self, *, live: bool = True) -> tuple[Document | None, str | None]:
        """The document for a run, and why it is not the live one (``None`` when it is)."""
        path = self._notebook()
        if not live:
            self.close()
            why = "%config PseudoClaude.notebook_document = False"
            return self._saved(path, why), why
        if self._live is not None and path and Path(path) == self._live.route.file:
            try:
                self._live.open()  # a no-op while connected
                return self._live, None
            except JoinError as exc:
                why = exc.reason
                self._live.close()
                self._live = None
                return self._saved(path, why), why
        route = find_route(path, self._env() if self._env is not None else None)
        if isinstance(route, str):
            return self._saved(path, route), route
        joined = LiveNotebook(route)
        try:
            joined.open()
        except JoinError as exc:
            why = exc.reason
            return self._saved(path, why), why
        self._live = joined
        return joined, None

    def news(self, why: str | None, document: Document | None) -> str | None:
        """The line a run says about ``why`` — once per kernel for each reason."""
        if why is None or why in self._said:
            return None
        self._said.add(why)
        if document is not None:
            return f"the agent reads the saved notebook file and cannot change cells here ({why}); it can still propose a cell"
        return (
            f"the agent cannot read or change this notebook's cells here ({why}); it can still propose a cell"
        )

    def close(self) -> None:
        if self._live is not None:
            self._live.close()
            self._live = None

    @staticmethod
    def _saved(path: str | None, why: str) -> Document | None:
        if not path or not Path(path).is_file():
            return None
        return SavedNotebook(Path(path), Path(path).name, why)
