"""The shipped notebooks opened as a clone opens them: untrusted, in JupyterLab, light and dark.

JupyterLab's sanitizer strips inline ``<svg>`` from an untrusted notebook's HTML and leaves
its text nodes run together ("effective window: what the model sees next (15 messages) user
assistant tool call … step usage: 2,343 tokens …"). The saved pictures are images (issue 44):
each notebook is opened with nothing run, and in both themes every picture has loaded, no
SVG is left in any output, and no label that only a picture holds shows up as text.
Screenshots go to ``docs/screenshots/untrusted-*.png``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.lab_support import CHROMIUM_FLAGS, lab_server, set_theme
from tests.test_browser import _browser_or_skip

ROOT = Path(__file__).parent.parent
SHOTS = ROOT / "docs" / "screenshots"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# Its outputs are recorded on the lead's branch, which is changing it (issue 42): until they are
# recorded again it still holds inline SVG. strict: this fails once it no longer does.
RECORDED_ELSEWHERE: set[str] = set()
# Text that only the pictures hold (axis labels, tooltips, a gauge's line labels, a legend):
# seen in an output's text, a picture was flattened into its labels.
PICTURE_ONLY = re.compile(
    r"tokens/step|step usage:|effective window: what the model sees|user assistant tool call"
    r"|\b(?:Layer 2|remind|base|hard) \d[\d,]{2,}|: [\d,]+ total\b"
)

OUTPUTS_TRUSTED = """() => {
  const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.type === 'code' && cell.outputs.length) return cell.trusted;
  }
  return null;
}"""

PICTURES = """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output img')]
  .map(img => ({cls: img.className, loaded: img.complete && img.naturalWidth > 0, alt: img.alt}))"""


@pytest.fixture(scope="module")
def opened(tmp_path_factory: pytest.TempPathFactory):
    chromium = _browser_or_skip()
    from playwright.sync_api import sync_playwright

    tmp = tmp_path_factory.mktemp("untrusted")
    root = tmp / "lab"
    root.mkdir()
    for notebook in NOTEBOOKS:
        shutil.copy(notebook, root / notebook.name)  # unsigned: Lab opens it untrusted
    _pictures_made_now(root / TODAY)
    with lab_server(root, tmp) as (base, token), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        yield page, base, token
        browser.close()


# A notebook of pictures as the package makes them now (the shipped ones are recorded elsewhere):
# a saved gauge past its line (red), and a drawing whose label holds every character the
# picture's data URL escapes, and some it keeps as they are.
TODAY = "pictures-now.ipynb"
AWKWARD = 'it\'s 5% → #1 &amp; "q" &lt;x&gt; 100%'  # as the drawings escape text


LABEL = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="300" height="40">'
    f'<text x="4" y="24" font-size="14" style="fill:var(--jp-ui-font-color1, currentColor)">{AWKWARD}</text>'
    "</svg>"
)


def _hot_gauge():
    from pseudoclaude_nb.widgets.gauge import GaugeState

    return GaugeState(
        estimated_tokens=30_000,
        anchor_tokens=20_000,
        context_window=50_000,
        marks=(("Layer 2", 17_000),),
        peak_tokens=41_000,
    )


def _pictures_made_now(path: Path) -> None:
    import nbformat

    from pseudoclaude_nb.widgets.gauge import gauge_html
    from pseudoclaude_nb.widgets.picture import picture

    outputs = [
        nbformat.v4.new_output("display_data", {"text/html": html, "text/plain": "x"})
        for html in (gauge_html(_hot_gauge(), saved=True), picture(LABEL, "an awkward label"))
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", outputs=outputs)])
    # A kernel named: without one Lab asks for it in a dialog that dims the page.
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_pictures_as_made_now_load_untrusted_and_draw_what_they_hold(opened) -> None:
    """The percent-encoded ``data:`` URL of a picture (issue 47) survives Lab's sanitizer: in
    both themes every picture loads, the browser reads back exactly the SVG the package drew,
    and the hot gauge's bar is drawn red."""
    import io

    from PIL import Image

    from pseudoclaude_nb.widgets.gauge import gauge_svg
    from pseudoclaude_nb.widgets.picture import drawn

    page, base, token = opened
    page.goto(f"{base}/lab/workspaces/untrusted-now/tree/{TODAY}?token={token}")
    here = ".jp-NotebookPanel:not(.lm-mod-hidden)"
    page.wait_for_selector(f"{here} .jp-OutputArea-output img", timeout=60_000)
    page.wait_for_timeout(800)
    assert page.evaluate(OUTPUTS_TRUSTED) is False
    for theme, light in (("JupyterLab Light", True), ("JupyterLab Dark", False)):
        set_theme(page, theme, light)
        pictures = page.evaluate(PICTURES)
        assert len(pictures) == 2 and all(p["loaded"] for p in pictures), (theme, pictures)
        read = page.evaluate(
            f"() => Promise.all([...document.querySelectorAll('{here} .jp-OutputArea-output img')]"
            ".map(img => fetch(img.src).then(r => r.text())))"
        )
        assert read == [drawn(gauge_svg(_hot_gauge(), head=False)), drawn(LABEL)], read
        assert f">{AWKWARD}</text>" in read[1] and 'fill="#d32f2f"' in read[0] and "var(" not in read[0]
        gauge = page.query_selector(f"{here} img.pc-gauge-picture")
        rgb = Image.open(io.BytesIO(gauge.screenshot())).convert("RGB").tobytes()
        red = sum(
            1
            for r, g, b in zip(rgb[0::3], rgb[1::3], rgb[2::3], strict=True)
            if r > 180 and g < 80 and b < 80
        )
        assert red > 500, (theme, red)  # the measured part of the bar: ~215 x 18 px


def _mark(notebook: Path):
    if notebook.name in RECORDED_ELSEWHERE:
        return pytest.param(
            notebook, marks=pytest.mark.xfail(strict=True, reason="recorded on the lead's branch")
        )
    return notebook


@pytest.mark.parametrize("notebook", [_mark(n) for n in NOTEBOOKS], ids=lambda p: p.name)
def test_a_shipped_notebook_reads_well_untrusted(opened, notebook: Path) -> None:
    page, base, token = opened
    # A workspace of its own: the default one would reopen every notebook opened before it, and
    # ten notebooks' outputs rendered at once outlast the wait on a loaded machine.
    page.goto(f"{base}/lab/workspaces/untrusted-{notebook.stem[:2]}/tree/{notebook.name}?token={token}")
    here = ".jp-NotebookPanel:not(.lm-mod-hidden)"
    page.wait_for_function(
        f"() => window.jupyterapp?.shell?.currentWidget?.context?.path === {json.dumps(notebook.name)}",
        timeout=60_000,
    )
    page.wait_for_selector(f"{here} .jp-OutputArea-output", timeout=60_000)
    page.wait_for_timeout(800)
    saved = json.loads(notebook.read_text(encoding="utf-8"))
    html = [
        "".join(o.get("data", {}).get("text/html", ""))
        for cell in saved["cells"]
        for o in cell.get("outputs", [])
    ]
    assert not [h for h in html if "<svg" in h], "a saved output holds inline SVG"
    assert page.evaluate(OUTPUTS_TRUSTED) is False  # opened as a clone opens it
    for theme, light in (("JupyterLab Light", True), ("JupyterLab Dark", False)):
        set_theme(page, theme, light)
        page.wait_for_timeout(400)
        assert page.eval_on_selector_all(f"{here} .jp-OutputArea-output svg", "els => els.length") == 0, theme
        pictures = page.evaluate(PICTURES)
        assert all(p["loaded"] for p in pictures), (theme, [p for p in pictures if not p["loaded"]])
        text = "\n".join(
            page.eval_on_selector_all(f"{here} .jp-OutputArea-output", "els => els.map(e => e.innerText)")
        )
        flattened = PICTURE_ONLY.findall(text)
        assert not flattened, (theme, flattened)
        assert "Error displaying widget" not in text, theme
        # Two dollar figures in one line ("$0.122 … $0.160") were typeset as a formula.
        typeset = page.eval_on_selector_all(
            f"{here} .jp-OutputArea-output mjx-container", "els => els.length"
        )
        assert typeset == 0, (theme, "an output's text was typeset as math")
        shown = page.query_selector(f"{here} .jp-OutputArea-output:has(img, .pc-lab-table)")
        if shown is not None and notebook.name.startswith(("01", "05", "08")):
            SHOTS.mkdir(exist_ok=True)
            shown.scroll_into_view_if_needed()
            shown.screenshot(
                path=str(SHOTS / f"untrusted-{notebook.stem[:2]}-{'light' if light else 'dark'}.png")
            )
    if notebook.name.startswith(("01", "02", "03", "05")):
        assert any("pc-picture" in p["cls"] for p in pictures), "the gauge or timeline is a picture"
