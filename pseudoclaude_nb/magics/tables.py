"""A magic's listing as one output: an HTML table in a notebook, aligned columns in a terminal.

A listing is a sequence of parts: lines of text (``str``, or ``Note`` for a quieter one) and
``Table``s. ``bundle`` makes one display bundle of them: ``text/html`` with ``<table>``s
coloured by the front end's theme variables (they read in light and dark themes) and
``text/plain`` with the same information in aligned columns (what a terminal, an untrusted
notebook's fallback or a converter shows). ``emit`` displays the bundle where the shell has a
rich front end and prints the text where it has none, as the other magics decide
(``render.in_notebook``).

Everything in a cell may come from disk (a cloned session's title, a note's description): it
is made printable for the text and escaped for the HTML here, so callers pass it as it is.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from ..textsafe import printable
from ..widgets.theme import FG1, FG2, NO_MATH

# Lines between rows and under the header; Lab's own table CSS uses the same variables.
BORDER2 = "var(--jp-border-color2, var(--vscode-panel-border, rgba(128, 128, 128, 0.3)))"
HEAD_BG = "var(--jp-layout-color2, var(--vscode-editorWidget-background, rgba(128, 128, 128, 0.12)))"
BODY_BG = "var(--jp-layout-color1, transparent)"
MONO = "var(--jp-code-font-family, var(--vscode-editor-font-family, monospace))"


# A plain table of label/value rows in the theme's colours (``%context``'s parts, a preview).
TABLE_STYLE = (
    f"font-size:90%;border-collapse:collapse;margin:4px 0;margin-left:0;table-layout:auto;color:{FG1}"
)


@dataclass(frozen=True)
class Column:
    name: str
    right: bool = False  # numbers and sizes line up on their last digit
    gap: int = 2  # spaces after the column in the text
    mono: bool = False  # ids and paths: a monospace cell in HTML
    code: bool = False  # Markdown `code` spans (a tool's description) shown as code in HTML
    # In HTML, whether the cell's text may wrap (at spaces, never inside a word); default:
    # only the last column (a title, a message), so ids, times and sizes stay on one line.
    wrap: bool | None = None


class Note(str):
    """A line said more quietly than the listing around it (a hint, a legend)."""


@dataclass
class Table:
    columns: tuple[Column, ...]
    rows: list[tuple[str, ...] | str] = field(default_factory=list)  # a str: a line across the table
    indent: str = ""  # the text's left margin (HTML tables sit at the left edge)

    def add(self, *cells: object) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(tuple("" if c is None else str(c) for c in cells))

    def across(self, line: str) -> None:
        """A line that spans the table ("… 20 more messages")."""
        self.rows.append(line)

    def text(self) -> str:
        # Each cell made printable once (a 1,000-row listing has 7,000 cells), kept for the lines.
        lined = [row if isinstance(row, str) else [_lines(c) for c in row] for row in self.rows]
        rows = [row for row in lined if not isinstance(row, str)]
        header = [[c.name] for c in self.columns]
        widths = [
            max(width(line) for cells in (header, *rows) for line in cells[i])
            for i in range(len(self.columns))
        ]
        out = [self._line([c.name for c in self.columns], widths)]
        for cells in lined:
            if isinstance(cells, str):
                out.append(self.indent + printable(cells, one_line=True))
                continue
            for k in range(max(len(c) for c in cells)):  # a multi-line cell: its lines under it
                out.append(self._line([c[k] if k < len(c) else "" for c in cells], widths))
        return "\n".join(out)

    def _line(self, cells: list[str], widths: list[int]) -> str:
        parts = []
        last = len(cells) - 1
        for i, (text, col) in enumerate(zip(cells, self.columns, strict=True)):
            pad = " " * (widths[i] - width(text))
            if i == last:
                parts.append(pad + text if col.right else text)
            else:
                parts.append((pad + text if col.right else text + pad) + " " * col.gap)
        return (self.indent + "".join(parts)).rstrip()

    def html(self) -> str:
        last = self.columns[-1]

        # Each cell keeps inline what a sanitized (untrusted) page needs to read it — its
        # alignment and wrapping, against Lab's right-aligned cells — and the rest (padding,
        # lines, the header's weight) is said once per output (``TABLE_CSS`` in ``bundle``):
        # a 41-row listing's style was ~200 bytes a cell (issue 47).
        def cell(tag: str, text: str, col: Column, top: str) -> str:
            align = "right" if col.right else "left"
            wraps = col.wrap if col.wrap is not None else col is last
            if wraps and "\n" not in text and "  " not in text:
                space = ""  # one line of single spaces wraps at spaces as it is (a listing's message)
            else:
                space = ";white-space:pre-wrap;overflow-wrap:normal" if wraps else ";white-space:pre"
            font = f";font-family:{MONO}" if col.mono and tag == "td" else ""
            markup = _escape(text)
            if col.code and tag == "td":
                markup = _CODE_SPAN.sub(r"<code>\1</code>", markup)
            return f"<{tag} style='text-align:{align}{top}{space}{font}'>{markup}</{tag}>"

        head = "".join(cell("th", c.name, c, ";vertical-align:bottom") for c in self.columns)
        body = []
        for row in self.rows:
            if isinstance(row, str):
                body.append(
                    f"<tr><td colspan='{len(self.columns)}' class='pc-across' style='text-align:left;color:{FG2}'>"
                    f"{_escape(row, one_line=True)}</td></tr>"
                )
            else:
                # A row of several lines reads from its top (one line is the same either way).
                top = ";vertical-align:top" if any("\n" in t for t in row) else ""
                cells = "".join(cell("td", t, c, top) for t, c in zip(row, self.columns, strict=True))
                body.append(f"<tr>{cells}</tr>")
        # Lab centres tables, fixes their layout and right-aligns cells by default (for
        # DataFrames): a listing is read from the left, its columns as wide as their text.
        return (
            f"<table class='pc-table' style='border-collapse:collapse;margin:4px 0;margin-left:0;"
            f"table-layout:auto;color:{FG1};background:{BODY_BG};font-size:90%'>"
            f"<thead style='background:{HEAD_BG}'><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        )


Part = str | Table
_CODE_SPAN = re.compile(r"`([^`\n]+)`")  # on escaped text: the span holds no markup of its own


# What every listing table's cells share, once per output (a sanitizer that drops it leaves
# the front end's own table lines and padding: the cells keep their alignment inline).
TABLE_CSS = (
    "<style>.pc-table td,.pc-table th{padding:2px 10px 2px 0}"
    f".pc-table thead th{{border-bottom:1px solid {BORDER2};font-weight:600}}"
    f".pc-table tbody td{{border-top:1px solid {BORDER2}}}.pc-table td.pc-across{{padding:2px 0;border-top:none}}</style>"
)


def bundle(*parts: Part) -> dict[str, str]:
    """One output: ``text/html`` and an aligned ``text/plain`` of the same parts."""
    plain, markup = [], []
    if any(isinstance(part, Table) for part in parts):
        markup.append(TABLE_CSS)
    for part in parts:
        if isinstance(part, Table):
            plain.append(part.text())
            markup.append(part.html())
        else:
            plain.append(printable(part))
            color = FG2 if isinstance(part, Note) else FG1
            markup.append(f"<div style='color:{color};white-space:pre-wrap'>{_escape(part)}</div>")
    return {
        "text/html": f"<div class='pc-listing {NO_MATH}'>{''.join(markup)}</div>",
        "text/plain": "\n".join(plain),
    }


def emit(shell: Any, *parts: Part) -> None:
    """Show the parts: one display bundle in a notebook, the aligned text in a terminal."""
    from .frontend import in_notebook

    if in_notebook(shell):
        from IPython.display import display

        display(bundle(*parts), raw=True)
    else:  # the text alone: a terminal never shows the HTML (a 1,000-row listing's third)
        print("\n".join(part.text() if isinstance(part, Table) else printable(part) for part in parts))


def width(text: str) -> int:
    """Columns a terminal gives ``text``: wide (CJK) characters take two, combining marks none."""
    n = len(text)
    if text.isascii():  # no ASCII character is wide or combining: a listing's cells, mostly
        return n
    for ch in text:
        if ch > "\x7f":  # only these can be wide (two columns) or combining (none)
            if unicodedata.combining(ch):
                n -= 1
            elif unicodedata.east_asian_width(ch) in "WF":
                n += 1
    return n


def _lines(text: str) -> list[str]:
    return [printable(line, one_line=True) for line in text.split("\n")] or [""]


def _escape(text: str, *, one_line: bool = False) -> str:
    return html.escape(printable(text, one_line=one_line))


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")


def markdown_text(text: str) -> str:
    """``text`` as literal Markdown: no emphasis, link, heading or HTML of its own (a note's name
    or description can come with a cloned repository)."""
    text = html.escape(printable(text, one_line=True), quote=False)
    return _MD_SPECIAL.sub(r"\\\1", text)


_JSON_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|[\"\\/bfnrt])")
_JSON_CHARS = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def json_unescaped(text: str) -> str:
    """A snippet of JSON (a tool call's arguments, maybe cut) with its string escapes read:
    ``\\n`` a line break, ``\\"`` a quote. Not a parse: a cut snippet is not valid JSON."""

    def one(m: re.Match[str]) -> str:
        s = m.group(1)
        return chr(int(s[1:], 16)) if s[0] == "u" else _JSON_CHARS[s]

    return _JSON_ESCAPE.sub(one, text)
