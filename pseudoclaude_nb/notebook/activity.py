"""The notebook activity block that begins a run's user message: a pure function of records.

Cells since the session's previous run (the first run: the last ``FIRST_RUN_CELLS``) are
rendered oldest first; when the budget forces a cut, the newest are the ones kept, and a
line says how many earlier cells were left out and how to read them (``read_cells``).
The block is plain text between two delimiter lines, but what marks it in the
conversation is the message's structured ``notebook`` field, never this text. Cells the
user marked ``agent-skip`` (or left out with ``--skip-cells``) are not in it: the block
only counts them, for the run's first line and ``%context``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .record import CellRecord, cap

FIRST_RUN_CELLS = 10
PER_CELL_BYTES = 2_500
BEGIN = "<notebook-activity>"
END = "</notebook-activity>"
HEADER = (
    "Cells the user ran in this notebook since your last turn, oldest first (captured by the "
    "host; the user did not type this part). Use read_cells and inspect_variable for more."
)


# A cell may print an earlier block (or type its tags): inside the block each delimiter is
# written as ``&lt;notebook-activity>``, so the model can always tell where the block ends.
_DELIMITER = re.compile(r"<(/?notebook-activity)", re.IGNORECASE)


def escape_delimiters(text: str) -> str:
    return _DELIMITER.sub(r"&lt;\1", text) if "otebook-activity" in text.lower() else text


# Likewise a line of a cell's source or output that looks like a cell's header ("### In [9]
# — raised ValueError") is written "\### …", so a header always starts a cell: the model
# and the offline explainer (``explain``) read the cells as they were.
_HEADER_LOOKALIKE = re.compile(r"^### ", re.MULTILINE)


def escape_headers(cell_text: str) -> str:
    """``cell_text`` with every line after its own header that starts with "### " escaped."""
    head, newline, rest = cell_text.partition("\n")
    return head + newline + _HEADER_LOOKALIKE.sub(r"\\### ", rest) if "### " in rest else cell_text


@dataclass(frozen=True)
class ShownCell:
    """One cell of the block, as ``%context`` lists it."""

    label: str  # "In [3]"
    execution_count: int | None
    text: str  # the cell as the block renders it


@dataclass(frozen=True)
class ActivityBlock:
    text: str  # "" when there is nothing to show
    shown: int  # cells in the block
    total: int  # cells since the previous run, skipped ones not counted
    last_seq: int  # the newest record's seq: the next run starts after it
    skipped: int = 0  # cells since the previous run kept out (agent-skip, --skip-cells)
    cells: tuple[ShownCell, ...] = ()  # the ``shown`` cells, oldest first

    @property
    def omitted(self) -> int:
        return self.total - self.shown

    def summary(self) -> str:
        """The run's first line: what the agent sees of the notebook."""
        skipped = f"; {self.skipped} skipped (agent-skip)" if self.skipped else ""
        if not self.total:
            return f"notebook: no new cells since the last run{skipped}"
        first = self.cells[0].label if self.cells else ""
        last = self.cells[-1].label if self.cells else ""
        span = f" ({first}…{last})" if first and first != last else (f" ({first})" if first else "")
        more = f"; {self.omitted} earlier not shown (over the budget)" if self.omitted else ""
        plural = "s" if self.shown != 1 else ""
        return f"notebook: the agent sees {self.shown} cell{plural} in context{span}{more}{skipped}"


def cells_for_run(records: list[CellRecord], seen_seq: int | None) -> list[CellRecord]:
    """The cells a run reports: those after ``seen_seq``, or the last 10 on a session's first run.

    Skipped records are returned too (the caller counts them); the first run's 10 are 10
    that can be shown, with the skipped ones among them.
    """
    if seen_seq is None:
        sendable = [r for r in records if not r.skipped]
        if len(sendable) <= FIRST_RUN_CELLS:
            return list(records)
        start = sendable[-FIRST_RUN_CELLS].seq
        return [r for r in records if r.seq >= start]
    return [r for r in records if r.seq > seen_seq]


def split_skipped(
    records: list[CellRecord], skip_counts: frozenset[int] = frozenset()
) -> tuple[list[CellRecord], int]:
    """The records the block may show, and how many were kept out (marked, or in ``skip_counts``)."""
    kept = [r for r in records if not r.skipped and r.execution_count not in skip_counts]
    return kept, len(records) - len(kept)


def render_activity(
    records: list[CellRecord],
    *,
    budget_bytes: int = 8_000,
    per_cell_bytes: int = PER_CELL_BYTES,
    total: int | None = None,
    skipped: int = 0,
) -> ActivityBlock:
    """The block for ``records`` (oldest first), newest kept first within ``budget_bytes``.

    ``total`` is how many cells the run should have reported (more than ``records`` when
    some were left out before this call, e.g. the first run's last-10 rule does not count).
    ``skipped`` is only counted (the caller left those records out).
    """
    total = len(records) if total is None else total
    last_seq = records[-1].seq if records else 0
    if not records:
        return ActivityBlock("", 0, 0, last_seq, skipped)
    room = budget_bytes - len(BEGIN) - len(END) - len(HEADER) - 80  # the omitted line
    kept: list[ShownCell] = []
    for record in reversed(records):
        text = escape_headers(escape_delimiters(record.render(limit=per_cell_bytes)))
        size = len(text.encode("utf-8")) + 1
        if size > room:
            if not kept and room > 200:
                # The newest cell always shows, cut to what is left.
                kept.append(ShownCell(record.label, record.execution_count, cap(text, room - 60)))
            break
        kept.append(ShownCell(record.label, record.execution_count, text))
        room -= size
    kept.reverse()
    omitted = total - len(kept)
    lines = [BEGIN, HEADER]
    if omitted > 0:
        lines.append(f"… {omitted} earlier cell{'s' if omitted != 1 else ''} not shown; use read_cells")
    lines += [cell.text for cell in kept]
    lines.append(END)
    return ActivityBlock("\n".join(lines), len(kept), total, last_seq, skipped, tuple(kept))


def package_cell(source: str, magic_names: frozenset[str] | set[str]) -> bool:
    """Whether ``source`` is a cell of this package's magics (left out of the block).

    A cell counts when its first non-empty line is ``%name`` or ``%%name`` for one of
    ``magic_names``: ``%agent`` cells, ``%context``, ``%sessions`` and the like.
    """
    for line in source.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not stripped.startswith("%"):
            return False
        word = stripped.lstrip("%").split(maxsplit=1)
        return bool(word) and word[0].rstrip("?") in magic_names
    return False
