"""The agent working in the open notebook, seen in a real browser (SPEC §20, issue 42).

JupyterLab (and Notebook 7) with jupyter-collaboration on 127.0.0.1 and Debian's chromium: a
notebook with a Markdown title and a cell nobody ran; a scripted ``%agent`` reads the
notebook (the title and the unrun cell are in what it read), runs the unrun cell, inserts a
cell below it and runs that. The page shows the new cell and both outputs without a reload
(a marker set on ``window`` before the run is still there), readable in the light and the
dark theme; saving writes them to the file, with the agent's stamp in the cell's metadata.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import nbformat
import pytest

from tests.lab_support import CHROMIUM_FLAGS, lab_server, set_theme
from tests.test_browser import KERNEL_IDLE, _browser_or_skip

HERE = ".jp-NotebookPanel:not(.lm-mod-hidden)"
PROMPT = (
    "%agent --new --provider scripted --script s.json --mode auto run the setup cell, add one printing x*21"
)
CELLS_TEXT = """(sel) => [...document.querySelectorAll(sel + ' .jp-Cell')].map(c => ({
  text: c.innerText,
  prompt: (c.querySelector('.jp-InputPrompt') || {}).innerText || '',
  out: [...c.querySelectorAll('.jp-OutputArea-output')].map(o => o.innerText).join('\\n'),
}))"""


def _workspace(root: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Sales analysis"),
        nbformat.v4.new_code_cell("%load_ext pseudoclaude_nb"),
        nbformat.v4.new_code_cell("x = 2\nprint('x is', x)"),  # nobody ran it
        nbformat.v4.new_code_cell(PROMPT),
    ]
    turns = [
        {"text": "", "tool_calls": [{"name": "read_notebook", "arguments": {}}]},
        {"text": "", "tool_calls": [{"name": "run_cell", "arguments": {"index": 2}}]},
        {
            "text": "",
            "tool_calls": [{"name": "insert_cell", "arguments": {"index": 3, "source": "print(x * 21)"}}],
        },
        {"text": "", "tool_calls": [{"name": "run_cell", "arguments": {"index": 3}}]},
        {"text": "Done: the new cell printed 42.", "tool_calls": []},
    ]
    (root / "s.json").write_text(
        json.dumps({"model": "scripted-test", "context_window": 200_000, "turns": turns})
    )
    path = root / "analysis.ipynb"
    nbformat.write(nb, path)
    return path


def _read_result(root: Path) -> str:
    log = next((root / ".pseudoclaude" / "sessions").iterdir()) / "conversation.jsonl"
    for line in log.read_text().splitlines():
        result = json.loads(line).get("tool_result") or {}
        if result.get("content", "").startswith("# the open notebook"):
            return result["content"]
    raise AssertionError("no read_notebook result in the log")


def _saved(path: Path) -> list[dict]:
    return nbformat.read(path, as_version=4).cells


def test_in_jupyterlab_the_page_shows_the_agents_cells_live_in_both_themes(tmp_path: Path) -> None:
    chromium = _browser_or_skip()
    from playwright.sync_api import sync_playwright

    root = tmp_path / "lab"
    root.mkdir()
    path = _workspace(root)
    with lab_server(root, tmp_path) as (base, token), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1100})
        page.goto(f"{base}/lab/tree/analysis.ipynb?token={token}")
        page.wait_for_selector(f"{HERE} .jp-Cell", timeout=60_000)
        page.wait_for_function(KERNEL_IDLE, timeout=90_000)
        set_theme(page, "JupyterLab Light", True)
        page.evaluate("() => { window.__pc_no_reload = true; }")
        for index in (1, 3):  # %load_ext, then %agent: the setup cell is left for the agent
            page.evaluate(
                f"""() => {{ const app = window.jupyterapp; app.shell.currentWidget.content.activeCellIndex = {index};
                 return app.commands.execute('notebook:run-cell'); }}"""
            )
            page.wait_for_function(KERNEL_IDLE, timeout=120_000)
        page.wait_for_selector(f"{HERE} .jp-Cell >> text=Done: the new cell printed 42.", timeout=60_000)
        cells = page.evaluate(CELLS_TEXT, HERE)
        assert page.evaluate("() => window.__pc_no_reload === true"), "the page reloaded"
        assert len(cells) == 5, [c["text"][:40] for c in cells]
        setup, new = cells[2], cells[3]
        assert "x is 2" in setup["out"] and setup["prompt"].strip() not in ("[ ]:", "")
        assert "print(x * 21)" in new["text"] and new["out"].strip() == "42"
        for theme, light in (("JupyterLab Light", True), ("JupyterLab Dark", False)):
            set_theme(page, theme, light)
            output = page.query_selector(f"{HERE} .jp-Cell:nth-child(4) .jp-OutputArea-output")
            assert output is not None and output.is_visible(), theme
            fg, bg = output.evaluate(
                "(el) => [getComputedStyle(el).color, getComputedStyle(document.querySelector('.jp-Notebook')).backgroundColor]"
            )
            assert fg != bg, theme
            shots = Path(__file__).resolve().parents[1] / "docs" / "screenshots"
            page.screenshot(path=str(shots / f"agent-in-the-notebook-{'light' if light else 'dark'}.png"))
        page.keyboard.press("Control+s")
        page.wait_for_timeout(1500)
        browser.close()
    read = _read_result(root)
    assert "# Sales analysis" in read and "x = 2" in read and "not run" in read
    saved = _saved(path)
    assert [c.source for c in saved][2:4] == ["x = 2\nprint('x is', x)", "print(x * 21)"]
    assert saved[3].outputs[0]["text"] == "42\n" and saved[3].metadata["pseudoclaude"]["step"] == 4
    assert saved[2].outputs[0]["text"] == "x is 2\n"


def test_in_notebook_7_the_page_shows_the_agents_cells_live(tmp_path: Path) -> None:
    chromium = _browser_or_skip()
    if importlib.util.find_spec("notebook") is None:
        pytest.fail("Notebook 7 is not installed (the test extra installs it)")
    from playwright.sync_api import sync_playwright

    from tests.lab_support import notebook_server

    root = tmp_path / "nb7"
    root.mkdir()
    path = _workspace(root)
    with notebook_server(root, tmp_path) as (base, token), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1100})
        page.goto(f"{base}/notebooks/analysis.ipynb?token={token}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        page.wait_for_function(KERNEL_IDLE, timeout=90_000)
        page.evaluate("() => { window.__pc_no_reload = true; }")
        for index in (1, 3):
            page.evaluate(
                f"""() => {{ const app = window.jupyterapp; app.shell.currentWidget.content.activeCellIndex = {index};
                 return app.commands.execute('notebook:run-cell'); }}"""
            )
            page.wait_for_function(KERNEL_IDLE, timeout=120_000)
        page.wait_for_selector(".jp-Cell >> text=Done: the new cell printed 42.", timeout=60_000)
        cells = page.evaluate(CELLS_TEXT, ".jp-Notebook")
        assert page.evaluate("() => window.__pc_no_reload === true"), "the page reloaded"
        assert "print(x * 21)" in cells[3]["text"] and cells[3]["out"].strip() == "42", cells
        assert "x is 2" in cells[2]["out"]
        browser.close()
    assert "print(x * 21)" in [c.source for c in _saved(path)]


def test_the_teaching_notebook_changes_its_own_page_in_jupyterlab(tmp_path: Path) -> None:
    """notebooks/09 run as a learner runs it (Run All in Lab): the agent inserts the total below
    the prices and runs it, live; the stored outputs (nbclient's) are the fallback's."""
    chromium = _browser_or_skip()
    from playwright.sync_api import sync_playwright

    root = tmp_path / "lab"
    root.mkdir()
    name = "09_agent_in_the_open_notebook.ipynb"
    shutil.copy(Path(__file__).resolve().parents[1] / "notebooks" / name, root / name)
    with lab_server(root, tmp_path) as (base, token), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        page.goto(f"{base}/lab/tree/{name}?token={token}")
        page.wait_for_selector(f"{HERE} .jp-Cell", timeout=60_000)
        page.wait_for_function(KERNEL_IDLE, timeout=90_000)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        page.wait_for_selector(f"{HERE} .jp-Cell >> text=printed their total", timeout=120_000)
        page.wait_for_function(KERNEL_IDLE, timeout=60_000)
        cells = page.evaluate(CELLS_TEXT, HERE)
        browser.close()
    assert "live document: yes" in cells[1]["out"]
    assert "insert_cell" in cells[3]["out"]  # %agent --tools lists the change tools
    assert "print(sum(prices))" in cells[6]["text"] and cells[6]["out"].strip() == "9.75"
