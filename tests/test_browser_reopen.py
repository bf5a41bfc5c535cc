"""A saved notebook reopened in JupyterLab with no kernel state behind it (issue 30).

The shipped quickstart, saved with its outputs by nbclient (unsigned, so Lab opens it
untrusted, as a newcomer's first open is), is opened without running anything, in the
light and the dark theme: no output says "Error displaying widget", the gauge's headline
and the tool lines are on screen, a tool line's ✓ keeps a colour of its own, and the text
a sanitizer leaves of the gauge picture keeps its labels apart.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from tests.lab_support import CHROMIUM_FLAGS, lab_server, set_theme
from tests.test_browser import _browser_or_skip

ROOT = Path(__file__).parent.parent


def test_the_saved_quickstart_reopens_readable_in_both_themes(tmp_path: Path) -> None:
    chromium = _browser_or_skip()
    from playwright.sync_api import sync_playwright

    root = tmp_path / "lab"
    root.mkdir()
    saved = json.loads((ROOT / "notebooks" / "01_quickstart.ipynb").read_text(encoding="utf-8"))
    plain = [
        "".join(o.get("data", {}).get("text/plain", "")) for c in saved["cells"] for o in c.get("outputs", [])
    ]
    # The first run's gauge: "context ▕…▏ ~11,557 / 50,000 (23%) · …" -> "~11,557 / 50,000".
    headline = next(re.search(r"~[\d,]+ / [\d,]+", t).group(0) for t in plain if t.startswith("context ▕"))
    shutil.copy(ROOT / "notebooks" / "01_quickstart.ipynb", root / "01_quickstart.ipynb")
    with lab_server(root, tmp_path) as (base, token), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(f"{base}/lab/tree/01_quickstart.ipynb?token={token}")
        page.wait_for_selector(".jp-Notebook .jp-OutputArea-output", timeout=60_000)
        for theme, light in (("JupyterLab Light", True), ("JupyterLab Dark", False)):
            set_theme(page, theme, light)
            page.wait_for_timeout(500)
            text = page.inner_text(".jp-Notebook")
            assert "Error displaying widget" not in text, theme
            assert "model not found" not in text, theme
            assert f"{headline} tokens" in text, theme  # the saved gauge's headline, as text
            assert (
                "→ bash('python check_sample.py')" in page.inner_text(".jp-Notebook")
                or "check_sample.py" in text
            )
            assert "✓ done · 11 steps" in text, theme
            # Labels apart: the sanitized gauge reads "Layer 2 17,000 … tokens", not run together.
            assert "17,000~" not in text and "tokensLayer" not in text, theme
            colours = page.eval_on_selector_all(
                ".pc-tool summary span, .pc-tool > span",
                "els => els.filter(e => e.textContent.startsWith('✓')).map(e => getComputedStyle(e).color)",
            )
            body = page.evaluate("() => getComputedStyle(document.querySelector('.jp-Notebook')).color")
            assert colours and all(c != body for c in colours), (theme, colours[:3], body)
        browser.close()
