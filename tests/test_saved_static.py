"""A notebook run through nbclient and saved holds no widget views: it reopens readable (issue 30).

The run's gauge, answers and tool lines are static when it ends; ``%compact --status`` shows
HTML and text; a timeline or spill browser stays interactive until the next cell runs, then
leaves its HTML and text behind. Every output reads as text (``text/plain``), line by line.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from nbclient import NotebookClient

WIDGET = "application/vnd.jupyter.widget-view+json"

SCRIPT = {
    "model": "teaching-model",
    "turns": [
        {"text": "Let me look.", "tool_calls": [{"name": "bash", "arguments": {"command": "seq 1 3000"}}]},
        {"text": "The numbers run from **1** to `3000`."},
    ],
}


def run_and_save(workspace: Path, cells: list[str]) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(workspace)}}
    ).execute()
    path = workspace / "saved.ipynb"
    nbformat.write(nb, path)
    return nbformat.read(path, as_version=4)


def _plain(output: dict) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    return output.get("data", {}).get("text/plain", "")


def test_a_saved_run_and_its_browsers_hold_html_and_text_not_widgets(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "s.json").write_text(json.dumps(SCRIPT))
    saved = run_and_save(
        workspace,
        [
            "%load_ext pseudoclaude_nb",
            '%agent --new --provider scripted --script s.json --mode auto "count"',
            "%compact --status",
            "%sessions show",
            "from pseudoclaude_nb.magics import current_agent\n"
            "from pseudoclaude_nb.widgets import SpillBrowser\n"
            "SpillBrowser(current_agent(get_ipython()).session.dir)",
            "1 + 1",  # the next cell: the browsers above settle into HTML and text
            "import ipywidgets\nprint(sorted(type(w).__name__ for w in ipywidgets.Widget.widgets.values()))",
        ],
    )
    outputs = [o for cell in saved.cells for o in cell.outputs]
    assert not [o for o in outputs if WIDGET in o.get("data", {})]
    assert _plain(saved.cells[-1].outputs[0]) == "[]\n"  # every widget model was closed
    run, status, show, spills = (saved.cells[i].outputs for i in (1, 2, 3, 4))
    # The run: the gauge headline, the answer, the tool line with its colour, the end line.
    text = "\n".join(_plain(o) for o in run)
    assert text.splitlines()[0].startswith("context ▕") and "→ bash('seq 1 3000') ✓ 3,000 lines" in text
    assert "The numbers run from **1** to `3000`." in text and "✓ done · 2 steps" in text
    html = "".join(
        o.get("data", {}).get("text/html", "") + o.get("data", {}).get("text/markdown", "") for o in run
    )
    # The ✓'s colour: a plain one inline, which a sanitizer keeps, and the theme's, said once for
    # the run (in its gauge's output) rather than on every line.
    assert "class='pc-ok' style='color:#2e7d32'" in html
    assert html.count(".pc-tool .pc-ok{color:var(--jp-success-color1") == 1
    # %compact --status: the gauge as HTML and text, and the same headline percentage as its table.
    gauge = next(o for o in status if "pc-gauge" in o.get("data", {}).get("text/html", ""))
    assert gauge["data"]["text/plain"].startswith("context ▕")
    # The timeline and the spill browser settled into their text and HTML.
    assert any("pc-timeline-static" in o.get("data", {}).get("text/html", "") for o in show)
    assert any("spill" in _plain(o).lower() for o in spills)
