"""The notebook tools: ``read_cells``, ``inspect_variable``, ``propose_cell`` (SPEC §18).

All three change nothing the user has not approved (``propose_cell`` only fills the next
cell for the user to review and run), so they are allowed in ``read-only`` mode. What
they return passes through the redactor first: a key typed into a cell, or held in a
variable, is not the model's business.
"""

from __future__ import annotations

from pydantic import Field

from ..errors import ToolError
from ..notebook import NotebookHost, inspect_variable
from ..redact import redact_text
from .registry import Tool, ToolArgs

DEFAULT_CELLS = 5
MAX_CELLS = 20
READ_CELLS_BYTES = 30_000
PER_CELL_BYTES = 4_000


class ReadCellsArgs(ToolArgs):
    start: int | None = Field(
        None, description="First execution count (In [n]) to read; default: the last 5 cells."
    )
    end: int | None = Field(None, description="Last execution count to read (inclusive); default: start + 4.")


class InspectVariableArgs(ToolArgs):
    name: str = Field(description="A name or dotted name in the user's namespace, e.g. df or model.config.")


class ProposeCellArgs(ToolArgs):
    code: str = Field(description="The Python source of the new cell.")


def read_cells(host: NotebookHost, start: int | None, end: int | None) -> str:
    store = host.cells
    if start is None and end is None:
        records = store.last(DEFAULT_CELLS)
    else:
        if start is None:
            start = (end or 0) - DEFAULT_CELLS + 1
        if end is None:
            end = start + DEFAULT_CELLS - 1
        if end < start:
            raise ToolError(f"end ({end}) is before start ({start})")
        records = store.by_count(start, end)
    if not records:
        counts = [r.execution_count for r in store.records() if r.execution_count is not None]
        where = (
            f"recorded cells are In [{counts[0]}]…In [{counts[-1]}]" if counts else "no cells recorded yet"
        )
        raise ToolError(f"no cells in that range; {where}")
    note = ""
    if len(records) > MAX_CELLS:
        note = f"(showing the last {MAX_CELLS} of {len(records)} cells in that range)\n"
        records = records[-MAX_CELLS:]
    parts: list[str] = []
    size = 0
    for record in reversed(records):
        text = record.render(limit=PER_CELL_BYTES)
        if size + len(text) > READ_CELLS_BYTES and parts:
            note += f"(earlier cells left out to stay under {READ_CELLS_BYTES:,} bytes; ask for fewer)\n"
            break
        parts.append(text)
        size += len(text)
    return redact_text(note + "\n\n".join(reversed(parts)))


def notebook_tools(host: NotebookHost) -> list[Tool]:
    return [
        Tool(
            name="read_cells",
            description=(
                "Read cells the user ran in this notebook kernel, by execution count (In [n]), with "
                "their source, printed output, results, displays and errors. Default: the last 5."
            ),
            args=ReadCellsArgs,
            handler=lambda a: read_cells(host, a.start, a.end),
        ),
        Tool(
            name="inspect_variable",
            description=(
                "Describe a variable in the user's notebook namespace without running its code: type, "
                "length, shape, dtype, columns and dtypes, keys, first items and a short repr. Accepts "
                "dotted names (obj.attr). Properties are reported, not evaluated."
            ),
            args=InspectVariableArgs,
            handler=lambda a: redact_text(
                inspect_variable(host.namespace(), a.name, withheld=host.cells.withheld(host.namespace()))
            ),
        ),
        Tool(
            name="propose_cell",
            description=(
                "Propose a new code cell below the current one in the user's notebook. The user reviews "
                "and runs it; nothing runs now. Use it for fixes and next steps the user should see."
            ),
            args=ProposeCellArgs,
            handler=lambda a: host.propose_cell(a.code),
        ),
    ]
