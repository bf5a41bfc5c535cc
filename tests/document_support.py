"""A live notebook document without a server, for the document tools' tests.

``LocalNotebook`` is ``notebook.live.LiveNotebook`` with its connection cut out: the same
operations (insert, edit, delete, outputs, stamps) run on a real ``jupyter_ydoc.YNotebook``
in this process, and a test plays the person by changing ``doc`` directly. The server, the
socket and the page are tested elsewhere (``test_document_live.py``, the browser test).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import nbformat

from pseudoclaude_nb.notebook.document import CellRun
from pseudoclaude_nb.notebook.live import LiveNotebook
from pseudoclaude_nb.notebook.route import Route

T = TypeVar("T")


class LocalNotebook(LiveNotebook):
    def __init__(self, cells: list[dict[str, Any]]) -> None:
        super().__init__(Route("http://127.0.0.1:9/", "", "t.ipynb", Path("t.ipynb")), timeout=1)
        from jupyter_ydoc import YNotebook

        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.from_dict(c) for c in cells]
        self.doc = YNotebook()
        self.doc.set(nb)
        self._alive = True

    def _call(self, fn: Callable[[Any], T], *, change: bool = False) -> T:
        with self.doc.ydoc.transaction():
            return fn(self.doc)

    # --- the person ------------------------------------------------------------------------

    def person_edits(self, index: int, source: str) -> None:
        self.doc.set_cell(index, source=source)

    def person_inserts(self, index: int, source: str) -> None:
        self.doc.ycells.insert(index, self.doc.create_ycell(dict(nbformat.v4.new_code_cell(source))))

    def cells(self) -> list[dict[str, Any]]:
        return self.doc.get()["cells"]


def code(
    source: str, count: int | None = None, outputs: list[dict[str, Any]] | None = None, **kw: Any
) -> dict[str, Any]:
    cell = nbformat.v4.new_code_cell(source, execution_count=count, outputs=outputs or [], **kw)
    return dict(cell)


def markdown(source: str, **kw: Any) -> dict[str, Any]:
    return dict(nbformat.v4.new_markdown_cell(source, **kw))


class FakeCells:
    """A ``CellHost`` that records what it was asked to run and prints a line for each."""

    def __init__(self, running: str | None = None) -> None:
        self.ran: list[str] = []
        self.running = running
        self.count = 10

    def run_code(self, source: str) -> CellRun:
        self.ran.append(source)
        self.count += 1
        outputs = ({"output_type": "stream", "name": "stdout", "text": f"ran {len(self.ran)}\n"},)
        return CellRun(self.count, outputs, f"### In [{self.count}]\n--- stdout\nran {len(self.ran)}")

    def running_cell_id(self) -> str | None:
        return self.running

    def package_cell(self, source: str) -> bool:
        return source.lstrip().startswith(("%agent", "%%agent", "%compact"))
