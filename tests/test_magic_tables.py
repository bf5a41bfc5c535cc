"""Magics show tables where a person expects tables (issue 30, item 8).

In a real kernel (nbclient) every listing is one output: ``text/html`` with a ``<table>``
coloured by the theme's variables, whose cells hold the values, and a ``text/plain`` whose
columns start at the same offset on every line (what a terminal or an untrusted notebook
shows). A hostile session title stays text; a search hit with a line break shows a line
break; ``%memory show`` is Markdown; ``propose_cell``'s cell is shown as code. The module
``tables`` on its own is tested below.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from pseudoclaude_nb.magics.tables import Column, Note, Table, bundle, json_unescaped, markdown_text, width

HOSTILE = "</td><script>alert(1)</script> count"
CODE = "x = 1\ny = x + 41"
SCRIPT = {
    "model": "teaching-model",
    "turns": [
        {"text": "Let me propose it.", "tool_calls": [{"name": "propose_cell", "arguments": {"code": CODE}}]},
        {"text": "Run the cell below."},
    ],
}


class Cells(HTMLParser):
    """The rows of the first ``<table>``: header and body, each a list of cell texts."""

    def __init__(self, markup: str) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._tables = 0
        self.feed(markup)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "table":
            self._tables += 1
        elif tag == "tr" and self._tables == 1:
            self.rows.append([])
        elif tag in ("td", "th") and self._tables == 1:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def starts(text: str, names: list[str]) -> tuple[int, list[int]]:
    """The header line of an aligned table in ``text`` and where each column starts."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if all(f" {n}" in f" {line}" for n in names):
            offsets, pos = [], 0
            for n in names:
                pos = line.index(n, pos)
                offsets.append(pos)
                pos += len(n)
            return i, offsets
    raise AssertionError(f"no header {names} in:\n{text}")


def column_at(line: str, offset: int) -> bool:
    """Whether a cell starts at ``offset`` of ``line`` (a left-aligned column)."""
    return line[offset] != " " and (offset == 0 or line[offset - 1] == " ")


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> list[list[dict]]:
    workspace = tmp_path_factory.mktemp("tables") / "ws"
    workspace.mkdir()
    (workspace / "s.json").write_text(json.dumps(SCRIPT))
    cells = [
        "%load_ext pseudoclaude_nb",
        f"%agent --new --provider scripted --script s.json --mode auto {HOSTILE}",
        "%sessions list",
        "%sessions show",
        "%sessions search y = x",
        '%memory add pm -d "uses *pnpm* <img src=x onerror=alert(1)>" pnpm, not npm',
        "%memory show",
        "%mcp",
        "%compact --status",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    home = Path(tmp_path_factory.mktemp("home"))
    (home / "mcp.json").write_text(
        json.dumps({"mcpServers": {"clock": {"command": "true", "args": ["`now`"]}}})
    )
    # The kernel's home (the autouse fixture's is per test, set after a module's fixtures).
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PSEUDOCLAUDE_HOME", str(home))
        mp.delenv("JPY_SESSION_NAME", raising=False)
        client = NotebookClient(
            nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(workspace)}}
        )
        client.execute()
    return [[dict(o) for o in cell.outputs] for cell in nb.cells]


def _tables(outputs: list[dict]) -> list[dict]:
    return [o["data"] for o in outputs if "<table" in o.get("data", {}).get("text/html", "")]


def _streams(outputs: list[dict]) -> str:
    return "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")


def test_sessions_list_is_a_table_with_aligned_text_and_an_escaped_title(saved: list[list[dict]]) -> None:
    (data,) = _tables(saved[2])
    assert not _streams(saved[2])  # one output, not printed lines
    markup = data["text/html"]
    assert "var(--jp-ui-font-color1" in markup and "var(--jp-border-color2" in markup
    assert "<script>" not in markup and "</td><script" not in markup and "&lt;script&gt;" in markup
    header, *rows = Cells(markup).rows
    assert header == ["", "id", "last activity", "messages", "size", "status", "title"]
    (row,) = rows
    assert row[0] == "*" and row[5] == "current" and row[3] == "4/4"
    assert row[6] == HOSTILE  # the parser read the escaped text back as it was typed
    text = data["text/plain"]
    at, offsets = starts(text, ["id", "last activity", "messages", "size", "status", "title"])
    line = text.splitlines()[at + 1]
    assert line.startswith("* ") and row[1] in line
    for name, offset in zip(
        ["id", "last activity", "status", "title"], [offsets[i] for i in (0, 1, 4, 5)], strict=True
    ):
        assert column_at(line, offset), (name, text)
    assert line[offsets[5] :] == HOSTILE


def test_sessions_show_lists_messages_in_a_table(saved: list[list[dict]]) -> None:
    data = _tables(saved[3])[0]
    header, *rows = Cells(data["text/html"]).rows
    assert header == ["#", "role", "message"]
    assert [r[1] for r in rows] == ["user", "assistant", "user", "assistant"]
    assert "⇢ calls propose_cell" in rows[1][2]
    text = data["text/plain"]
    assert text.splitlines()[0].startswith("session ") and "effective messages of" in text
    at, (_, role, message) = starts(text, ["#", "role", "message"])
    for line in text.splitlines()[at + 1 : at + 5]:
        assert column_at(line, role) and column_at(line, message), text


def test_a_search_hit_with_a_line_break_shows_one(saved: list[list[dict]]) -> None:
    (data,) = _tables(saved[4])
    header, *rows = Cells(data["text/html"]).rows
    assert header == ["#", "when", "who", "match"]
    (hit,) = [r for r in rows if "called a tool" in r[2]]
    assert hit[2] == "assistant called a tool" and CODE in hit[3]  # a real line break
    assert "\\n" not in data["text/html"] and "\\n" not in data["text/plain"]
    text = data["text/plain"]
    assert text.startswith("1 match for 'y = x' in session ")
    lines = text.splitlines()
    at, (*_, match) = starts(text, ["#", "when", "who", "match"])
    first = next(i for i, line in enumerate(lines) if "x = 1" in line)
    assert lines[first + 1][match:].startswith("y = x + 41") and not lines[first + 1][:match].strip()


def test_memory_show_is_markdown_with_the_notes_as_literal_text(saved: list[list[dict]]) -> None:
    (data,) = [o["data"] for o in saved[6] if "text/markdown" in o.get("data", {})]
    md = data["text/markdown"]
    assert "**Project Memory**" in md and "## " not in md
    assert "- **pm** — uses \\*pnpm\\* &lt;img src=x onerror=alert\\(1\\)&gt;" in md and "<img" not in md
    assert "## Project Memory" in data["text/plain"]  # the terminal's text, as it was
    assert "- pm — uses *pnpm* <img src=x onerror=alert(1)> (fact," in data["text/plain"]


def test_mcp_lists_servers_as_a_table(saved: list[list[dict]]) -> None:
    (data,) = _tables(saved[7])
    header, row = Cells(data["text/html"]).rows
    assert header == ["server", "type", "status"] and row[:2] == ["clock", "stdio"]
    assert row[2]  # "not started", or "failed" once the %agent run tried it
    at, offsets = starts(data["text/plain"], ["server", "type", "status"])
    line = data["text/plain"].splitlines()[at + 1]
    assert all(column_at(line, o) for o in offsets)


def test_compact_status_shows_the_parts_table_not_the_text_again(saved: list[list[dict]]) -> None:
    status = saved[8]
    assert not _streams(status)  # no monospace repeat of %context
    gauge, parts = (o["data"] for o in status)
    assert "pc-gauge" in gauge["text/html"]
    assert "pc-context" in parts["text/html"] and "<table" in parts["text/html"]
    assert parts["text/plain"].startswith("context: ~")  # the terminal's text, for a fallback


def test_propose_cell_shows_the_cell_as_code(saved: list[list[dict]]) -> None:
    # The tool line is HTML, or an HTML block in the Markdown of a batch that holds an answer
    # (its line breaks written &#10; there).
    data = [o.get("data", {}) for o in saved[1]]
    markup = "".join(d.get("text/html", "") + d.get("text/markdown", "") for d in data)
    details = markup[markup.index("propose_cell(") :].split("</summary>", 1)[1].split("</details>")[0]
    assert "<pre" in details and "code:" in details
    assert "x = 1&#10;y = x + 41" in details or "x = 1\ny = x + 41" in details
    assert '"code"' not in details and "\\n" not in details


# --- the module on its own ------------------------------------------------------------------------


def test_table_text_aligns_wide_characters_multi_line_cells_and_numbers() -> None:
    t = Table((Column("name"), Column("size", right=True), Column("note")), indent="  ")
    t.add("压缩", "1.5 KB", "two\nlines")
    t.add("abc", "12 B", "")
    t.across("… 3 more")
    assert t.text().splitlines() == [
        "  name    size  note",
        "  压缩  1.5 KB  two",
        "                lines",
        "  abc     12 B",
        "  … 3 more",
    ]
    assert width("压缩") == 4 and width("e\u0301") == 1
    with pytest.raises(ValueError):
        t.add("one cell")


def test_table_html_escapes_every_cell_and_keeps_line_breaks() -> None:
    t = Table((Column("id", mono=True), Column("about", code=True)))
    t.add("</td><script>x</script>", "use `a<b` here\nthen \x1b[2J")
    t.across("<b>more</b>")
    out = bundle("<i>head</i>", t, Note("a hint"))
    markup = out["text/html"]
    assert "<script>" not in markup and "<b>" not in markup and "<i>" not in markup
    assert "&lt;/td&gt;&lt;script&gt;" in markup and "<code>a&lt;b</code>" in markup
    assert "\x1b" not in markup and "\\x1b[2J" in markup
    (header, row, across) = Cells(markup).rows
    assert row == ["</td><script>x</script>", "use a<b here\nthen \\x1b[2J"]
    assert across == ["<b>more</b>"]
    assert "text-align:left" in markup
    # Ids and times stay on one line; only the last column wraps, at spaces.
    first, last = markup.split("<td", 3)[1:3]
    assert "white-space:pre;" in first and "white-space:pre-wrap;overflow-wrap:normal" in last
    assert out["text/plain"].splitlines()[0] == "<i>head</i>" and "\x1b" not in out["text/plain"]
    assert out["text/plain"].endswith("a hint")


def test_markdown_text_and_json_unescaped() -> None:
    assert markdown_text("*a* [l](u) <b>") == "\\*a\\* \\[l\\]\\(u\\) &lt;b&gt;"
    assert (
        json_unescaped('propose_cell {"code": "a\\nb \\"q\\" \\\\n \\u00e9')
        == 'propose_cell {"code": "a\nb "q" \\n é'
    )
