"""The document tools (SPEC §20) on a real shared notebook model, with a person editing it too.

Each refusal is checked to leave the document exactly as it was; the person's edits made
between the agent's read and its change are never overwritten.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pseudoclaude_nb.messages import ToolCall
from pseudoclaude_nb.notebook.document import DocumentError
from pseudoclaude_nb.notebook.saved import SavedNotebook
from pseudoclaude_nb.tools.document import MAX_SOURCE, PAGE_CELLS, NotebookTools
from pseudoclaude_nb.tools.registry import Permissions, ToolRegistry
from tests.document_support import FakeCells, LocalNotebook, code, markdown

STAMP = {"session": "20261207-120000-abcd", "step": 3}


def _tools(doc: LocalNotebook, host: FakeCells | None = None) -> NotebookTools:
    return NotebookTools(doc, host or FakeCells(), lambda: dict(STAMP))


def _notebook() -> LocalNotebook:
    return LocalNotebook(
        [
            markdown("# Sales analysis\nWhat sold in March."),
            code("import pandas as pd\ndf = pd.read_csv('sales.csv')", 1),
            code("x = 2", None),  # nobody ran it
            code("print(df.shape)", 3, [{"output_type": "stream", "name": "stdout", "text": "(12, 4)\n"}]),
        ]
    )


def test_read_notebook_shows_every_cell_in_order_with_markdown_and_unrun_cells() -> None:
    doc = _notebook()
    text = _tools(doc).read(None, None)
    ids = [c["id"] for c in doc.cells()]
    assert "# Sales analysis" in text and "What sold in March." in text
    assert f"[0] markdown · id {ids[0]}" in text
    assert f"[1] code · id {ids[1]} · In [1]" in text
    assert f"[2] code · id {ids[2]} · not run" in text and "x = 2" in text
    assert "↳ stdout: (12, 4)" in text
    assert "4 cells" in text and "live" in text
    assert text.index("Sales analysis") < text.index("import pandas") < text.index("x = 2")


def test_a_secret_in_a_cell_or_its_output_is_redacted() -> None:
    key = "sk-ant-api03-" + "A" * 93 + "AA"
    doc = LocalNotebook(
        [code(f"KEY = '{key}'", 1, [{"output_type": "stream", "name": "stdout", "text": key}])]
    )
    text = _tools(doc).read(None, None)
    assert key not in text and "[REDACTED" in text


def test_cells_marked_agent_skip_show_as_a_place_only() -> None:
    doc = LocalNotebook(
        [
            code("token = 'hunter2'", 1, metadata={"tags": ["agent-skip"]}),
            code("# agent-skip\npw = 'x'"),
            code("y = 1"),
        ]
    )
    tools = _tools(doc)
    text = tools.read(None, None)
    assert "hunter2" not in text and "pw = 'x'" not in text and "y = 1" in text
    assert text.count("kept from you by the user") == 2
    with pytest.raises(DocumentError, match="agent-skip"):
        tools.edit(0, "token = None", None)
    with pytest.raises(DocumentError, match="agent-skip"):
        tools.run(1, None)


def test_a_long_notebook_comes_in_pages_that_say_how_to_read_on() -> None:
    doc = LocalNotebook([code(f"cell_{i} = {i}") for i in range(120)])
    tools = _tools(doc)
    first = tools.read(None, None)
    assert f"cells 0–{PAGE_CELLS - 1}" in first and "cell_49 = 49" in first and "cell_50" not in first
    assert f"read_notebook(start={PAGE_CELLS})" in first
    second = tools.read(PAGE_CELLS, None)
    assert "cell_50 = 50" in second and "cell_99 = 99" in second and "read_notebook(start=100)" in second
    last = tools.read(100, None)
    assert "cell_119 = 119" in last and "read_notebook(start=" not in last
    assert "cells 3–4" in tools.read(3, 5) and "cell_5 " not in tools.read(3, 5)
    with pytest.raises(DocumentError, match="past the last cell"):
        tools.read(120, None)


def test_a_page_stops_at_its_byte_cap_and_a_huge_cell_is_cut() -> None:
    big = "x = 1  # " + "y" * 10_000_000
    doc = LocalNotebook([code(big), *[code("z = " + "1" * 3000) for _ in range(20)]])
    text = _tools(doc).read(None, None)
    assert len(text) < 40_000
    assert "more characters of this cell not shown" in text
    assert "read_notebook(start=" in text  # the rest of the page did not fit


def test_insert_puts_the_cell_at_index_and_shifts_the_rest() -> None:
    doc = _notebook()
    tools = _tools(doc)
    tools.read(None, None)
    out = tools.insert(3, "print(x * 21)", "code")
    cells = doc.cells()
    assert [c["source"] for c in cells][2:5] == ["x = 2", "print(x * 21)", "print(df.shape)"]
    assert cells[3]["metadata"]["pseudoclaude"] == STAMP
    assert cells[3]["id"] in out
    tools.insert(5, "## Notes", "markdown")  # the cell count appends
    assert doc.cells()[-1] == {**doc.cells()[-1], "cell_type": "markdown", "source": "## Notes"}


def test_changes_need_a_read_first_and_an_index_in_range() -> None:
    doc = _notebook()
    tools = _tools(doc)
    before = doc.cells()
    with pytest.raises(DocumentError, match="read_notebook first"):
        tools.insert(0, "a = 1", "code")
    tools.read(None, None)
    with pytest.raises(DocumentError, match="out of range: insert at 0–4"):
        tools.insert(9, "a = 1", "code")
    with pytest.raises(DocumentError, match="out of range: the notebook has 4 cells"):
        tools.edit(4, "a = 1", None)
    with pytest.raises(DocumentError, match="at most"):
        tools.insert(0, "a" * (MAX_SOURCE + 1), "code")
    assert doc.cells() == before


def test_an_id_that_is_not_the_cell_at_index_is_refused_with_where_it_is() -> None:
    doc = _notebook()
    tools = _tools(doc)
    tools.read(None, None)
    ids = [c["id"] for c in doc.cells()]
    before = doc.cells()
    with pytest.raises(DocumentError, match=f"cell {ids[2]} is at index 2 now"):
        tools.edit(1, "y = 3", ids[2])
    with pytest.raises(DocumentError, match="no cell has the id gone-id"):
        tools.delete(1, "gone-id")
    assert doc.cells() == before


def test_the_persons_edit_since_the_read_is_never_overwritten() -> None:
    doc = _notebook()
    tools = _tools(doc)
    tools.read(None, None)
    doc.person_edits(2, "x = 3  # the person is typing")
    with pytest.raises(DocumentError, match="changed since you read it"):
        tools.edit(2, "x = 4", None)
    with pytest.raises(DocumentError, match="changed since you read it"):
        tools.run(2, None)
    assert doc.cells()[2]["source"] == "x = 3  # the person is typing"
    tools.read(2, 3)  # read again: now the change goes through
    tools.edit(2, "x = 4", None)
    assert doc.cells()[2]["source"] == "x = 4"
    tools.edit(2, "x = 5", None)  # its own edit counts as read
    assert doc.cells()[2]["source"] == "x = 5"


def test_indices_shifted_by_the_person_are_caught_and_the_id_still_finds_the_cell() -> None:
    doc = _notebook()
    host = FakeCells()
    tools = _tools(doc, host)
    tools.read(None, None)
    target = doc.cells()[2]["id"]
    doc.person_inserts(1, "# a note the person added")
    with pytest.raises(DocumentError, match="the notebook changed since you read it.*index 2 now holds"):
        tools.run(2, None)
    with pytest.raises(DocumentError, match="changed since you read it"):
        tools.insert(2, "a = 1", "code")
    assert host.ran == []
    out = tools.run(3, target)  # addressed by id: the cell it read, one further down now
    assert "ran cell 3" in str(out) and host.ran == ["x = 2"]


def test_ids_shared_by_copied_cells_are_shown_and_each_cell_is_still_addressed() -> None:
    doc = LocalNotebook([code("a = 1", id="same"), code("b = 2", id="same"), code("c = 3")])
    tools = _tools(doc)
    text = tools.read(None, None)
    assert text.count("(this id is shared with another cell)") == 2
    tools.edit(1, "b = 20", "same")
    tools.delete(0, "same")
    assert [c["source"] for c in doc.cells()] == ["b = 20", "c = 3"]


def test_run_puts_outputs_and_count_into_the_cell_and_refuses_what_it_must() -> None:
    doc = LocalNotebook(
        [markdown("# t"), code("x = 2"), code("%agent do it", id="agent-cell"), code("%compact --apply")]
    )
    host = FakeCells(running="agent-cell")
    tools = _tools(doc, host)
    tools.read(None, None)
    out = tools.run(1, None)
    cell = doc.cells()[1]
    assert cell["execution_count"] == 11 and cell["outputs"][0]["text"] == "ran 1\n"
    assert cell["metadata"]["pseudoclaude"] == STAMP
    assert "ran cell 1" in str(out) and "In [11]" in str(out)
    with pytest.raises(DocumentError, match="markdown cell; only code cells run"):
        tools.run(0, None)
    with pytest.raises(DocumentError, match="runs %agent"):
        tools.run(2, None)
    with pytest.raises(DocumentError, match="runs %agent"):
        tools.edit(2, "%agent something else", None)
    with pytest.raises(DocumentError, match="runs %agent"):
        tools.delete(3, None)
    assert host.ran == ["x = 2"]


def test_delete_returns_the_source_so_nothing_is_lost() -> None:
    doc = _notebook()
    tools = _tools(doc)
    tools.read(None, None)
    out = tools.delete(2, None)
    assert "x = 2" in out and len(doc.cells()) == 3
    tools.edit(2, "print(df.shape[0])", None)  # the order it knows moved up with the delete
    assert doc.cells()[2]["source"] == "print(df.shape[0])"


def test_read_only_mode_refuses_changes_and_ask_shows_before_and_after() -> None:
    doc = _notebook()
    registry = ToolRegistry(_tools(doc).tools())
    before = doc.cells()
    registry.run(ToolCall(id="r", name="read_notebook", arguments={}), Permissions("read-only"))
    refused = registry.run(
        ToolCall(id="e", name="edit_cell", arguments={"index": 2, "source": "x = 40"}),
        Permissions("read-only"),
    )
    assert refused.is_error and "read-only" in refused.content
    asked: list[str] = []
    no = registry.run(
        ToolCall(id="e2", name="edit_cell", arguments={"index": 2, "source": "x = 40"}),
        Permissions("ask", ask=lambda q: asked.append(q) or "n"),
    )
    assert no.is_error and doc.cells() == before
    assert "-x = 2" in asked[0] and "+x = 40" in asked[0] and "before → after" in asked[0]
    yes = registry.run(
        ToolCall(id="e3", name="edit_cell", arguments={"index": 2, "source": "x = 40"}),
        Permissions("ask", ask=lambda q: "y"),
    )
    assert not yes.is_error and doc.cells()[2]["source"] == "x = 40"


def test_the_saved_file_is_read_only_and_offers_only_read_notebook(tmp_path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Saved title"), nbformat.v4.new_code_cell("z = 9")]
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, path)
    saved = SavedNotebook(path, "n.ipynb", "this kernel was not started by a Jupyter server")
    tools = NotebookTools(saved, None, dict)
    assert [t.name for t in tools.tools()] == ["read_notebook"]
    text = tools.read(None, None)
    assert "the saved file n.ipynb" in text and "# Saved title" in text and "z = 9" in text
    with pytest.raises(DocumentError, match="cannot be changed from here"):
        saved.insert(0, "code", "a", {})


def test_five_thousand_cells_are_read_in_pages() -> None:
    doc = LocalNotebook([code(f"v{i} = {i}") for i in range(5000)])
    text = _tools(doc).read(4990, None)
    assert "5000 cells" in text and "v4999 = 4999" in text and "cells 4990–4999" in text
