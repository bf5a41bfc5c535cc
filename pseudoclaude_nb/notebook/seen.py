"""What the agent has read of the document, so a change never lands on a cell it did not mean.

The notebook is shared with a person who may be typing, inserting or deleting cells while
the agent works. Every change names a cell by index (and, optionally, the id it read); it is
made only when

- the cell at that index is the one the agent saw there (or the id it names), so indices
  that shifted under it are caught, and
- the cell's source is what the agent last saw of it (read, or wrote itself), so a person's
  edit since is never overwritten.

Otherwise the change is refused with a sentence the model can act on (read again, pass the
id). Cells are keyed by id and the id's occurrence, so a notebook whose copied cells share an
id still has one key per cell. No IPython here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from .document import DocCell, Snapshot


def digest(source: str) -> str:
    return hashlib.blake2b(source.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def keys(ids: Sequence[str]) -> list[str]:
    """One key per cell: its id, and ``#n`` for the n-th repeat of an id already seen above."""
    count: dict[str, int] = {}
    out = []
    for cell_id in ids:
        n = count.get(cell_id, 0)
        count[cell_id] = n + 1
        out.append(cell_id if n == 0 else f"{cell_id}#{n}")
    return out


def first_line(source: str, width: int = 60) -> str:
    line = next((ln.strip() for ln in source.splitlines() if ln.strip()), "(empty)")
    return line if len(line) <= width else line[: width - 1] + "…"


@dataclass
class Seen:
    """The order of the cells as last read, and each shown cell's source digest."""

    order: list[str] | None = None  # keys, in order (None: nothing read yet)
    sources: dict[str, str] = field(default_factory=dict)  # key -> digest of the source seen

    def read(self, snapshot: Snapshot) -> None:
        all_keys = keys(snapshot.ids)
        self.order = all_keys
        for cell in snapshot.cells:
            self.sources[all_keys[cell.index]] = digest(cell.source)

    # --- the checks: None when the change may go ahead, else the refusal -------------------------

    def position(self, live: Sequence[str], index: int, *, inserting: bool) -> str | None:
        """Whether ``index`` still means the place the agent read (the ids around it unchanged)."""
        if self.order is None:
            return "read_notebook first: changes are made to cells as you have read them"
        now = keys(live)
        span = [index - 1, index] if inserting else [index]
        for i in span:
            if 0 <= i < len(self.order) or 0 <= i < len(now):
                was = self.order[i] if i < len(self.order) else None
                is_ = now[i] if i < len(now) else None
                if was != is_:
                    return (
                        "the notebook changed since you read it (cells were added, moved or removed): "
                        f"index {i} now holds {_name(is_)}, not {_name(was)}"
                        + _moved(was, now)
                        + "; read_notebook again, or pass the cell's id"
                    )
        return None

    def source(self, live: Sequence[str], cell: DocCell) -> str | None:
        """Whether ``cell``'s source is what the agent last saw of it."""
        key = keys(live)[cell.index]
        seen = self.sources.get(key)
        where = f"read_notebook(start={cell.index}, end={cell.index + 1})"
        if seen is None:
            return f"cell {cell.index} (id {cell.id}) has not been read yet: {where} first"
        if seen != digest(cell.source):
            return (
                f"cell {cell.index} (id {cell.id}) changed since you read it (the person may be editing it); "
                f"nothing was changed: {where} to see it now"
            )
        return None

    # --- the agent's own changes -------------------------------------------------------------

    def inserted(self, index: int, cell: DocCell) -> None:
        if self.order is not None:
            self.order.insert(index, cell.id)
        self.sources[cell.id] = digest(cell.source)

    def edited(self, live: Sequence[str], cell: DocCell) -> None:
        self.sources[keys(live)[cell.index]] = digest(cell.source)

    def deleted(self, live: Sequence[str], index: int) -> None:
        key = keys(live)[index]
        self.sources.pop(key, None)
        if self.order is not None and index < len(self.order) and self.order[index] == key:
            self.order.pop(index)
        else:
            self.order = None  # out of step: the next change asks for a fresh read


def _name(key: str | None) -> str:
    return "no cell" if key is None else f"cell {key.split('#')[0]}"


def _moved(key: str | None, now: Sequence[str]) -> str:
    if key is None:
        return ""
    return f" (that cell is at index {now.index(key)} now)" if key in now else " (that cell is gone)"
