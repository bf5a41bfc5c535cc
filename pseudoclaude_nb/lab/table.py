"""One table of the lab: a caption that says what was measured, headers, rows, and notes under
it; as Markdown (a terminal, the docs) and as HTML a notebook's sanitizer keeps. No lab logic."""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..widgets.theme import NO_MATH


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown pipe table; the first column left-aligned, the others right-aligned."""
    cells = [[str(c) for c in headers], *([str(c) for c in row] for row in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        out = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))]
        return "| " + " | ".join(out) + " |"

    rule = "| " + " | ".join([":" + "-" * (widths[0] - 1), *("-" * (w - 1) + ":" for w in widths[1:])]) + " |"
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


@dataclass(frozen=True)
class Table:
    """One table of the lab: ``caption`` says what was measured, so two tables never seem to
    disagree (a fact kept in a 60K window and lost in a 20K one are both true)."""

    caption: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()  # lines under the table: an arm that failed or stopped, and why

    @classmethod
    def of(
        cls,
        caption: str,
        headers: Sequence[object],
        rows: Sequence[Sequence[object]],
        notes: Sequence[str] = (),
    ) -> Table:
        return cls(
            caption,
            tuple(str(h) for h in headers),
            tuple(tuple(str(c) for c in r) for r in rows),
            tuple(notes),
        )

    def markdown(self) -> str:
        return table(self.headers, self.rows)

    def __str__(self) -> str:
        under = "".join(f"\n\n{note}" for note in self.notes)
        return f"{self.caption}\n\n{self.markdown()}{under}"

    def html(self) -> str:
        """The table as HTML a sanitizer keeps (no ``<style>``): one row per line, numbers right."""
        cell = "padding:2px 6px;white-space:nowrap;"  # a row never wraps; a heading may
        head = "".join(
            f"<th style='padding:2px 6px;vertical-align:bottom;text-align:{'left' if i == 0 else 'right'}'>"
            f"{html.escape(h)}</th>"
            for i, h in enumerate(self.headers)
        )
        body = "".join(
            "<tr>"
            + "".join(
                f"<td style='{cell}text-align:{'left' if i == 0 else 'right'}'>{html.escape(c)}</td>"
                for i, c in enumerate(row)
            )
            + "</tr>"
            for row in self.rows
        )
        notes = "".join(f"<p style='margin:2px 0'>{html.escape(note)}</p>" for note in self.notes)
        return (
            f"<div class='pc-lab-table {NO_MATH}' style='overflow-x:auto'><table style='border-collapse:collapse;font-size:90%'>"
            f"<caption style='text-align:left;caption-side:top;padding:2px 0'>{html.escape(self.caption)}</caption>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{notes}</div>"
        )

    def _repr_mimebundle_(self, **_: Any) -> dict[str, str]:
        return {"text/html": self.html(), "text/plain": str(self)}


__all__ = ["Table", "table"]
