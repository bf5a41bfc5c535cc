"""The document tools (SPEC §20): ``read_notebook``, ``insert_cell``, ``edit_cell``, ``delete_cell``,
``run_cell`` — the agent working in the notebook the person has open.

``read_notebook`` reads every cell in order (pages of ``PAGE_CELLS`` cells and ``PAGE_BYTES``
bytes; the result says how to ask for the next page), outputs summarized and redacted as
``read_cells`` does; cells the person marked ``agent-skip`` show as a place only. The four
change tools exist only with a live document (``notebook.live``); each is a side effect
(asked in mode ``ask`` with the cell before and after, refused in ``read-only``), re-checked
against what the agent read (``notebook.seen``) when it is made, and stamps the cell's
``metadata.pseudoclaude`` with the session and step. The cell running this ``%agent``, and
any cell that calls this package's magics, is never changed or run.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import Field

from ..notebook.document import CellRun, Document, DocumentError
from ..notebook.host import CellHost
from ..notebook.ipynb import CELL_OUTPUTS_CAP, output_lines
from ..notebook.record import cap
from ..notebook.seen import Seen, first_line
from ..redact import redact_text
from .registry import Tool, ToolArgs, ToolOutput

PAGE_CELLS = 50
PAGE_BYTES = 30_000
SOURCE_SHOWN = 4_000  # characters of one cell's source in a read
MAX_SOURCE = (
    1_000_000  # a cell the agent writes: more is not a cell (and the server's socket limit is ~10 MB)
)
DELETED_SHOWN = 4_000


class ReadNotebookArgs(ToolArgs):
    start: int | None = Field(None, description="First cell index (0-based, inclusive); default 0.")
    end: int | None = Field(None, description="Cell index to stop before (exclusive); default: a page.")


class InsertCellArgs(ToolArgs):
    index: int = Field(
        description="Where the new cell goes (0-based); later cells shift down; the cell count appends."
    )
    source: str = Field(description="The new cell's source.")
    cell_type: Literal["code", "markdown"] = Field("code", description="code or markdown.")


class EditCellArgs(ToolArgs):
    index: int = Field(description="The cell's index (0-based), as read_notebook showed it.")
    source: str = Field(description="The cell's whole new source.")
    id: str | None = Field(
        None, description="The cell's id as read_notebook showed it; refused if another cell is there now."
    )


class CellRefArgs(ToolArgs):
    index: int = Field(description="The cell's index (0-based), as read_notebook showed it.")
    id: str | None = Field(
        None, description="The cell's id as read_notebook showed it; refused if another cell is there now."
    )


@dataclass
class NotebookTools:
    """The document tools of one run, sharing what the agent has read (``seen``)."""

    document: Document
    host: CellHost | None
    stamp: Callable[[], Mapping[str, Any]]
    seen: Seen = field(default_factory=Seen)

    def tools(self) -> list[Tool]:
        read = Tool(
            name="read_notebook",
            description=(
                "Read the notebook the user has open: every cell in order with its index (0-based), id, "
                "type, source, whether it ran (In [n]) and its outputs summarized — Markdown and cells "
                "nobody ran included. Long notebooks come in pages; the result says how to read the next."
                + ("" if self.document.live else " (Here: the saved file, read-only.)")
            ),
            args=ReadNotebookArgs,
            handler=lambda a: self.read(a.start, a.end),
        )
        if not self.document.live or self.host is None:
            return [read]
        return [
            read,
            Tool(
                name="insert_cell",
                description=(
                    "Insert a new code or Markdown cell into the open notebook at index (later cells shift "
                    "down; the cell count appends). It appears in the user's page at once; it does not run."
                ),
                args=InsertCellArgs,
                handler=lambda a: self.insert(a.index, a.source, a.cell_type),
                side_effect=True,
                preview=self.preview_insert,
            ),
            Tool(
                name="edit_cell",
                description=(
                    "Replace the source of the cell at index in the open notebook (read it first; refused if "
                    "the user changed it since). Outputs stay until it runs again."
                ),
                args=EditCellArgs,
                handler=lambda a: self.edit(a.index, a.source, a.id),
                side_effect=True,
                preview=self.preview_edit,
            ),
            Tool(
                name="delete_cell",
                description="Delete the cell at index from the open notebook (read it first). Its source is returned.",
                args=CellRefArgs,
                handler=lambda a: self.delete(a.index, a.id),
                side_effect=True,
                preview=self.preview_cell("delete"),
            ),
            Tool(
                name="run_cell",
                description=(
                    "Run the code cell at index in this kernel, as the user would: its outputs and execution "
                    "count appear in that cell of the page and come back to you. Read it first."
                ),
                args=CellRefArgs,
                handler=lambda a: self.run(a.index, a.id),
                side_effect=True,
                preview=self.preview_cell("run"),
            ),
        ]

    # --- reading -----------------------------------------------------------------------------

    def read(self, start: int | None, end: int | None) -> str:
        first = 0 if start is None else start
        if first < 0 or (end is not None and end < first):
            raise DocumentError(f"start={start}, end={end}: start must be 0 or more and end at least start")
        snap = self.document.snapshot(
            first, first + PAGE_CELLS if end is None else min(end, first + PAGE_CELLS)
        )
        if first > snap.count or (first == snap.count and snap.count):
            raise DocumentError(
                f"start={first} is past the last cell: the notebook has {snap.count} cells (0–{snap.count - 1})"
            )
        running = self.host.running_cell_id() if self.host is not None else None
        parts: list[str] = []
        size = 0
        shown = []
        for cell in snap.cells:
            text = self._render(cell, running, snap.ids.count(cell.id) > 1)
            if parts and size + len(text) > PAGE_BYTES:
                break
            parts.append(text)
            shown.append(cell)
            size += len(text)
        self.seen.read(replace(snap, cells=tuple(shown)))
        last = shown[-1].index if shown else first - 1
        head = f"# {snap.where} · {snap.count} cells" + (f" · cells {first}–{last}" if shown else "")
        wanted_end = snap.count if end is None else min(end, snap.count)
        tail = ""
        if last + 1 < wanted_end:
            tail = f"\n(cells {last + 1}–{wanted_end - 1} not shown: read_notebook(start={last + 1}) for the next page)"
        elif last + 1 < snap.count and end is None:
            tail = f"\n(cells {last + 1}–{snap.count - 1} follow: read_notebook(start={last + 1}))"
        return redact_text(head + "\n" + "\n".join(parts) + tail)

    def _render(self, cell: Any, running: str | None, shared_id: bool) -> str:
        label = f"[{cell.index}] {cell.cell_type} · id {cell.id}"
        if shared_id:
            label += " (this id is shared with another cell)"
        if cell.cell_type == "code":
            label += f" · In [{cell.execution_count}]" if cell.ran else " · not run"
        if cell.agent:
            step = cell.agent.get("step")
            label += " · by the agent" + (f" (step {step})" if step is not None else "")
        if running and cell.id == running:
            label += " · this %agent cell, running now"
        if cell.skipped:
            return f"{label} · agent-skip: kept from you by the user (not shown)"
        source = cell.source
        if len(source) > SOURCE_SHOWN:
            source = (
                source[:SOURCE_SHOWN]
                + f"\n… [{len(cell.source) - SOURCE_SHOWN:,} more characters of this cell not shown]"
            )
        lines = [label, source if source.strip() else "(empty)"]
        outputs: list[str] = []
        for output in cell.outputs:
            outputs.extend(output_lines(dict(output)))
        if outputs:
            block = cap("\n".join(outputs), CELL_OUTPUTS_CAP)
            lines += [f"  ↳ {line}" for line in block.splitlines()]
        return "\n".join(lines)

    # --- changes -----------------------------------------------------------------------------

    def _target(self, index: int, cell_id: str | None, *, verb: str) -> tuple[tuple[str, ...], Any]:
        """The cell a change means, checked: in range, the id named, the place read, the source seen."""
        snap = self.document.snapshot(index, index + 1)
        if not 0 <= index < snap.count:
            raise DocumentError(
                f"index {index} is out of range: the notebook has {snap.count} cells" + _span(snap.count)
            )
        cell = snap.cells[0]
        if cell_id is not None and cell.id != cell_id:
            where = [i for i, c in enumerate(snap.ids) if c == cell_id]
            there = (
                f"cell {cell_id} is at index {where[0]} now" if where else f"no cell has the id {cell_id} now"
            )
            raise DocumentError(
                f"refused: cell {index} is {cell.id} ({cell.cell_type}: {first_line(cell.source)}), not {cell_id}; "
                f"{there}. Nothing was changed"
            )
        if cell_id is None:
            moved = self.seen.position(snap.ids, index, inserting=False)
            if moved:
                raise DocumentError(f"refused: {moved}. Nothing was changed")
        running = self.host.running_cell_id() if self.host is not None else None
        if (running and cell.id == running) or (
            self.host is not None and self.host.package_cell(cell.source)
        ):
            raise DocumentError(
                f"refused: cell {index} runs %agent or another of this package's magics; it is not changed or "
                "run from inside a run"
            )
        if cell.skipped:
            raise DocumentError(
                f"refused: cell {index} is marked agent-skip by the user; it is not yours to {verb}"
            )
        changed = self.seen.source(snap.ids, cell)
        if changed:
            raise DocumentError(f"refused: {changed}")
        return snap.ids, cell

    def insert(self, index: int, source: str, cell_type: str) -> str:
        _bounded(source)
        snap = self.document.snapshot(max(0, index - 1), index + 1)
        if not 0 <= index <= snap.count:
            raise DocumentError(
                f"index {index} is out of range: insert at 0–{snap.count} (the notebook has {snap.count} cells; "
                f"{snap.count} appends)"
            )
        moved = self.seen.position(snap.ids, index, inserting=True)
        if moved:
            raise DocumentError(f"refused: {moved}. Nothing was changed")
        kind: Any = cell_type
        cell = self.document.insert(index, kind, source, self.stamp())
        self.seen.inserted(index, cell)
        return f"inserted a {cell_type} cell at index {index} (id {cell.id}); later cells moved down by one"

    def edit(self, index: int, source: str, cell_id: str | None) -> str:
        _bounded(source)
        ids, cell = self._target(index, cell_id, verb="edit")
        done = self.document.set_source(index, cell.id, source, self.stamp())
        self.seen.edited(ids, done)
        note = " (its outputs are from the old source until it runs again)" if cell.outputs else ""
        return f"cell {index} (id {cell.id}) now holds the new source{note}"

    def delete(self, index: int, cell_id: str | None) -> str:
        ids, cell = self._target(index, cell_id, verb="delete")
        gone = self.document.delete(index, cell.id)
        self.seen.deleted(ids, index)
        text = gone.source if len(gone.source) <= DELETED_SHOWN else gone.source[:DELETED_SHOWN] + "\n…"
        return (
            f"deleted cell {index} ({gone.cell_type}, id {gone.id}); later cells moved up by one. "
            f"Its source was:\n{text}"
        )

    def run(self, index: int, cell_id: str | None) -> str | ToolOutput:
        assert self.host is not None
        _, cell = self._target(index, cell_id, verb="run")
        if cell.cell_type != "code":
            raise DocumentError(f"cell {index} is a {cell.cell_type} cell; only code cells run")
        self.document.begin_run(index, cell.id)
        try:
            ran = self.host.run_code(cell.source)
        except BaseException:
            self.document.end_run(index, cell.id, CellRun(None, (), ""), self.stamp())
            raise
        try:
            self.document.end_run(index, cell.id, ran, self.stamp())
            written = ""
        except DocumentError as exc:
            written = f"\n(the outputs could not be put into the page: {exc})"
        if ran.interrupted:
            raise KeyboardInterrupt  # the user pressed stop: the outputs so far are in the cell
        head = f"ran cell {index} (id {cell.id}) as In [{ran.execution_count}]{written}\n"
        return ToolOutput(head + ran.text, ran.images) if ran.images else head + ran.text

    # --- what mode ``ask`` shows -------------------------------------------------------------

    def preview_insert(self, args: Any) -> str:
        return f"new {args.cell_type} cell at index {args.index}:\n" + _box(args.source)

    def preview_edit(self, args: Any) -> str:
        try:
            snap = self.document.snapshot(args.index, args.index + 1)
            before = snap.cells[0].source if snap.cells else ""
        except DocumentError:
            before = ""
        diff = difflib.unified_diff(
            before.splitlines(), args.source.splitlines(), "before", "after", lineterm="", n=2
        )
        return f"cell {args.index}, before → after:\n" + "\n".join(list(diff)[:60])

    def preview_cell(self, verb: str) -> Callable[[Any], str]:
        def preview(args: Any) -> str:
            try:
                snap = self.document.snapshot(args.index, args.index + 1)
                source = snap.cells[0].source if snap.cells else ""
            except DocumentError:
                source = ""
            return f"{verb} cell {args.index}:\n" + _box(source)

        return preview


def _box(source: str, lines: int = 15) -> str:
    body = source.splitlines() or ["(empty)"]
    out = [f"  │ {line[:160]}" for line in body[:lines]]
    if len(body) > lines:
        out.append(f"  … ({len(body) - lines:,} more lines)")
    return "\n".join(out)


def _span(count: int) -> str:
    return f" (0–{count - 1})" if count else ""


def _bounded(source: str) -> None:
    if len(source) > MAX_SOURCE:
        raise DocumentError(
            f"a cell's source is at most {MAX_SOURCE:,} characters (this one has {len(source):,}); "
            "write large data to a file instead"
        )
