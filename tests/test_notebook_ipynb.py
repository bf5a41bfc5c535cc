"""``read_file`` on a notebook: numbered lines of cells and capped text outputs, not raw JSON."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import nbformat
import pytest

from pseudoclaude_nb.errors import ToolError
from pseudoclaude_nb.tools.files import ReadFileArgs, read_file


def _write(workspace: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    code = nbformat.v4.new_code_cell("total = sum(revenue)\ntotal / count", execution_count=3)
    code.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="x" * 5_000),
        nbformat.v4.new_output(
            "error",
            ename="ZeroDivisionError",
            evalue="division by zero",
            traceback=["\x1b[0;31mZeroDivisionError\x1b[0m", "Cell \x1b[0;32mIn[3], line 2\x1b[0m"],
        ),
    ]
    plot = nbformat.v4.new_code_cell("plot()", execution_count=4)
    png = base64.b64encode(b"\x89PNG" + b"\0" * 20_000).decode()
    plot.outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"}),
        nbformat.v4.new_output("execute_result", data={"text/plain": "42"}, execution_count=4),
    ]
    nb.cells = [nbformat.v4.new_markdown_cell("# Sales\nNotes."), code, plot]
    path = workspace / "analysis.ipynb"
    nbformat.write(nb, path)
    return path


def test_a_notebook_reads_as_cells(tmp_path: Path) -> None:
    path = _write(tmp_path)
    text = read_file(tmp_path, ReadFileArgs(path="analysis.ipynb"))
    lines = text.splitlines()
    assert lines[0].startswith("(a notebook, shown as cells")
    assert lines[1] == "     1\t# notebook · 3 cells · kernel python3"
    assert "     2\t## [1] markdown" in lines and "     5\t## [2] code · In [3]" in lines
    assert "     6\ttotal = sum(revenue)" in lines
    assert any("error: ZeroDivisionError: division by zero" in line for line in lines)
    assert any(line.endswith("Cell In[3], line 2") for line in lines)  # ANSI stripped
    assert any("display: <Figure> [image/png]" in line for line in lines)
    assert any("Out[4]: 42" in line for line in lines)
    assert "\x1b" not in text and "iVBORw" not in text and len(text) < 4_000
    assert len(text) < path.stat().st_size / 5


def test_offsets_apply_to_the_rendering(tmp_path: Path) -> None:
    _write(tmp_path)
    text = read_file(tmp_path, ReadFileArgs(path="analysis.ipynb", offset=5, limit=2))
    assert text.splitlines()[1:] == [
        "     5\t## [2] code · In [3]",
        "     6\ttotal = sum(revenue)",
        text.splitlines()[-1],
    ]
    assert text.splitlines()[-1].startswith("… ") and "use offset=7" in text
    with pytest.raises(ToolError, match="past the end"):
        read_file(tmp_path, ReadFileArgs(path="analysis.ipynb", offset=500))


def test_a_broken_notebook_reads_as_text(tmp_path: Path) -> None:
    (tmp_path / "broken.ipynb").write_text('{"cells": [ {"cell_type"')
    assert read_file(tmp_path, ReadFileArgs(path="broken.ipynb")) == '     1\t{"cells": [ {"cell_type"'
    (tmp_path / "other.ipynb").write_text(json.dumps({"not": "a notebook"}))
    assert '"not"' in read_file(tmp_path, ReadFileArgs(path="other.ipynb"))


# --- the read path opens once, without following links (issue 19) ------------------------------


def _outside_notebook(tmp_path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("SECRET_OUTSIDE = 'the decoy notebook outside the workspace'")]
    decoy = tmp_path / "outside" / "secret.ipynb"
    decoy.parent.mkdir()
    nbformat.write(nb, decoy)
    return decoy


def _read_through_agent(ip, workspace: Path, tmp_path: Path, path: str) -> str:
    from pseudoclaude_nb.magics import current_agent
    from tests.scripts import run_magic, script, turn

    s = tmp_path / "read.json"
    s.write_text(json.dumps(script(turn("", ("read_file", {"path": path}, "c_nb")), turn("read"))))
    run_magic(ip, f"agent --provider scripted --script {s} --mode auto read the notebook")
    messages = current_agent(ip).session.conversation.messages()
    return next(m.tool_result.content for m in messages if m.tool_result and m.tool_result.call_id == "c_nb")


def test_a_notebook_swapped_for_a_link_after_it_was_opened_is_read_from_the_opened_file(
    ip, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pseudoclaude_nb.tools import files

    path = _write(workspace)
    decoy = _outside_notebook(tmp_path)
    real_open = files.open_resolved

    def open_then_swap(*args, **kwargs):
        fd = real_open(*args, **kwargs)
        if args[1].name == "analysis.ipynb":  # the race's window: checks done, the name swapped
            aside = path.with_name("moved-aside.ipynb")
            path.rename(aside)
            path.symlink_to(decoy)
        return fd

    monkeypatch.setattr(files, "open_resolved", open_then_swap)
    shown = _read_through_agent(ip, workspace, tmp_path, "analysis.ipynb")
    assert "SECRET_OUTSIDE" not in shown
    assert "# notebook · 3 cells" in shown and "total = sum(revenue)" in shown


def test_a_hard_linked_notebook_is_refused(ip, workspace: Path, tmp_path: Path) -> None:
    decoy = _outside_notebook(tmp_path)
    (workspace / "linked.ipynb").hardlink_to(decoy)
    shown = _read_through_agent(ip, workspace, tmp_path, "linked.ipynb")
    assert "SECRET_OUTSIDE" not in shown and "hard links" in shown


def test_a_fifo_named_like_a_notebook_is_refused_without_blocking(
    ip, workspace: Path, tmp_path: Path
) -> None:
    import os

    os.mkfifo(workspace / "pipe.ipynb")
    shown = _read_through_agent(ip, workspace, tmp_path, "pipe.ipynb")  # would block on open or read
    assert "not a regular file" in shown


def test_a_notebook_nested_past_the_parser_reads_as_text(workspace: Path) -> None:
    (workspace / "deep.ipynb").write_text('{"cells": ' + "[" * 5_000 + "]" * 5_000 + "}", encoding="utf-8")
    out = read_file(workspace, ReadFileArgs(path="deep.ipynb"))
    assert out.startswith('     1\t{"cells": [[[')  # plain text, no RecursionError
