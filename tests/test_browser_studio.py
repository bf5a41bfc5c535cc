"""``%studio`` in a real browser: docked in JupyterLab's side area, following the session.

JupyterLab on 127.0.0.1 with jupyterlab-sidecar (the ``lab`` extra), Debian's chromium through
Playwright. One cell docks the studio; another cell runs a scripted ``%agent`` whose context
crosses the Layer 2 line of a small window, so it is compacted. The panel beside the notebook
(not the cell's output) shows the run's session, and after the run its gauge counts the
compaction and says the drop, and its timeline holds the replace. A screenshot of the docked
studio goes to ``docs/screenshots/crossing.png`` (the README's picture) and
``studio-docked-dark.png``.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from tests.lab_support import CHROMIUM_FLAGS, lab_server, set_theme
from tests.test_browser import KERNEL_IDLE, _browser_or_skip

ROOT = Path(__file__).parent.parent
# Three logs of ~2.4 KB: read one by one, they carry a 6,000-token window (its Layer 2 line
# low, with the reserves below, as in notebooks/07) over the line before the last answer.
LOG = "".join(f"10:{i:02d} request {i:04d} served in {(i * 37) % 250} ms\n" for i in range(60))
READS = [
    {"text": f"Reading {n}.log.", "tool_calls": [{"name": "read_file", "arguments": {"path": f"{n}.log"}}]}
    for n in "abc"
]
SCRIPT = {
    "model": "scripted-test",
    "context_window": 6000,
    "turns": [*READS, {"text": "All three are read.", "tool_calls": []}],
    "summaries": ["## Confirmed requirements\n- read the three logs (user)\n"],
}

SETUP = (
    "%load_ext pseudoclaude_nb\n"
    "from pathlib import Path\n"
    f"for name in 'abc': _ = Path(name + '.log').write_text({LOG!r})\n"
    f"_ = Path('s.json').write_text({json.dumps(json.dumps(SCRIPT))})\n"
    '%config PseudoClaude.workspace = "."\n'
    "%config PseudoClaude.summary_reserve = 1000\n"
    "%config PseudoClaude.safety_margin = 1000\n"
    "%config PseudoClaude.recent_tokens = 600\n"
    "%config PseudoClaude.notebook_context = False\n"
    # The document tools' schemas would take a tenth of this small window (their own browser
    # test is test_browser_document.py): the crossing here is the studio's to show.
    "%config PseudoClaude.notebook_document = False"
)
RUN = '%agent --new --provider scripted --script s.json --context-window 6000 --mode auto "read the logs"'

# The studio's gauge in the side panel, not in the notebook: its counts.
PANEL_GAUGE = """() => {
  const gauges = [...document.querySelectorAll('.pc-studio .pc-gauge')]
    .filter(g => !g.closest('.jp-Notebook'));
  const g = gauges[0];
  return g ? {compactions: +g.dataset.compactions, estimated: +g.dataset.estimated,
              peak: +g.dataset.peak, text: g.innerText} : null;
}"""


def _run_cell(page, index: int) -> None:
    page.evaluate(
        f"""() => {{
      const app = window.jupyterapp;
      const notebook = app.shell.currentWidget.content;
      notebook.activeCellIndex = {index};
      app.commands.execute('notebook:run-cell');
    }}"""
    )


def test_the_docked_studio_follows_a_compaction_run_in_another_cell(tmp_path: Path) -> None:
    chromium = _browser_or_skip()
    from playwright.sync_api import sync_playwright

    root = tmp_path / "lab"
    root.mkdir()
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP),
        nbformat.v4.new_code_cell("%studio"),
        nbformat.v4.new_code_cell(RUN),
    ]
    nbformat.write(nb, root / "studio.ipynb")
    with (
        lab_server(root, tmp_path, env={"PSEUDOCLAUDE_DEMO_PACE": "0"}) as (base, token),
        sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(f"{base}/lab/tree/studio.ipynb?token={token}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        page.wait_for_function(KERNEL_IDLE, timeout=90_000)
        _run_cell(page, 0)
        page.wait_for_function(KERNEL_IDLE, timeout=60_000)
        _run_cell(page, 1)
        page.wait_for_function(f"() => ({PANEL_GAUGE})() !== null", timeout=60_000)
        before = page.evaluate(PANEL_GAUGE)
        assert before["compactions"] == 0, before
        # The cell's own output only says where the studio went.
        assert "docked on the right" in page.inner_text(".jp-Notebook")
        _run_cell(page, 2)
        try:
            page.wait_for_function(f"() => ({PANEL_GAUGE})()?.compactions === 1", timeout=60_000)
        except Exception:
            page.screenshot(path="/tmp/lrn/studio-fail.png")
            Path("/tmp/lrn/studio-fail.txt").write_text(page.inner_text("body"))
            raise
        page.wait_for_function(KERNEL_IDLE, timeout=60_000)
        page.wait_for_timeout(1000)  # the refresh after the cell
        after = page.evaluate(PANEL_GAUGE)
        assert after["compactions"] == 1 and after["estimated"] < after["peak"], after
        assert "compacted ~" in after["text"], after
        panel = page.inner_text(".pc-studio")
        assert "session 2" in panel  # the run's session (ids start with the year)
        assert (
            page.eval_on_selector_all(".pc-studio .pc-replace", "els => els.length") >= 1
        )  # in the timeline
        # The README's picture (light) and the same in the dark theme.
        for theme, light, name in (
            ("JupyterLab Light", True, "crossing"),
            ("JupyterLab Dark", False, "studio-docked-dark"),
        ):
            set_theme(page, theme, light)
            page.screenshot(path=str(ROOT / "docs" / "screenshots" / f"{name}.png"))
        browser.close()
