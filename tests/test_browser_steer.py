"""The step scrubber in a real browser: JupyterLab on 127.0.0.1 and Debian's chromium.

A notebook runs two scripted turns and ``%sessions show``; the test moves the timeline's step
slider with the keyboard, as a person would, and reads the request shown for the step it
lands on: step 1 holds the first prompt and not the second, the last step holds both, and
the view's text is readable (contrast of at least 4.5:1, computed in the page) in the light
and the dark Lab theme. Uses ``tests/test_browser.py``'s server, browser and helpers.
"""

from __future__ import annotations

import json

import nbformat

from tests.test_browser import (
    CHROMIUM_FLAGS,
    KERNEL_IDLE,
    _browser_or_skip,
    _contrast,
    _set_theme,
    lab,  # noqa: F401 (the fixture)
)

FIRST, SECOND = "read notes.txt please", "and now the second question"
# The notebook on screen: Lab may restore another tab (the quickstart, whose saved outputs
# hold a step view too) from the workspace of an earlier test.
HERE = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def _scripts() -> str:
    one = {
        "model": "scripted-test",
        "context_window": 200_000,
        "turns": [
            {"text": "", "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
            {"text": "The notes list three things.", "tool_calls": []},
        ],
    }
    two = dict(one, turns=[{"text": "Second answer.", "tool_calls": []}])
    return (
        "from pathlib import Path\n"
        "Path('notes.txt').write_text('one\\ntwo\\nthree\\n')\n"
        f"_ = Path('one.json').write_text({json.dumps(json.dumps(one))})\n"
        f"_ = Path('two.json').write_text({json.dumps(json.dumps(two))})"
    )


def test_the_step_slider_shows_the_request_of_the_step_it_lands_on(lab) -> None:
    chromium = _browser_or_skip()
    from playwright.sync_api import sync_playwright

    url, root = lab
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext pseudoclaude_nb"),
        nbformat.v4.new_code_cell(_scripts()),
        nbformat.v4.new_code_cell(
            f'%agent --new --provider scripted --script one.json --mode auto "{FIRST}"'
        ),
        nbformat.v4.new_code_cell(f'%agent --provider scripted --script two.json "{SECOND}"'),
        nbformat.v4.new_code_cell("%sessions show"),
    ]
    nbformat.write(nb, root / "steer.ipynb")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(url.replace("01_quickstart.ipynb", "steer.ipynb"))
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        page.wait_for_function(KERNEL_IDLE, timeout=90_000)
        _set_theme(page, "JupyterLab Light", True)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.wait_for_selector(f"{HERE} .pc-timeline svg", state="attached", timeout=120_000)
        page.wait_for_selector(f"{HERE} >> text=step 3 of 3", state="attached", timeout=60_000)
        page.wait_for_function(KERNEL_IDLE, timeout=30_000)
        view = page.query_selector(f"{HERE} .pc-context-step")
        assert view is not None and FIRST in view.inner_text() and SECOND in view.inner_text()

        handle = page.query_selector(f"{HERE} .pc-step-scrubber .noUi-handle")
        assert handle is not None, "the step slider is on the page"
        handle.scroll_into_view_if_needed()
        handle.focus()
        page.keyboard.press("Home")  # to step 1, as a person would with the keyboard
        page.wait_for_selector(f"{HERE} >> text=step 1 of 3", state="attached", timeout=30_000)
        page.wait_for_function(
            f"() => !document.querySelector({json.dumps(HERE + ' .pc-context-step')}).innerText"
            f".includes({json.dumps(SECOND)})",
            timeout=30_000,
        )
        text = page.query_selector(f"{HERE} .pc-context-step").inner_text()
        assert FIRST in text and SECOND not in text, text
        page.keyboard.press("ArrowRight")  # step 2: the tool result came back
        page.wait_for_selector(f"{HERE} >> text=step 2 of 3", state="attached", timeout=30_000)
        page.wait_for_function(
            f"() => document.querySelector({json.dumps(HERE + ' .pc-context-step')}).innerText.includes('tool result')",
            timeout=30_000,
        )
        for theme, light in (("JupyterLab Light", True), ("JupyterLab Dark", False)):
            _set_theme(page, theme, light)
            low = [
                c
                for c in _contrast(page, f"{HERE} .pc-context-step, {HERE} .pc-context-step *")
                if c["ratio"] < 4.5
            ]
            assert not low, (theme, low)
        browser.close()
