"""Screenshots of the notebook in JupyterLab's light and dark themes (issue 30).

    PYTHONPATH=. python docs/screenshots/take.py        # writes docs/screenshots/*.png

The same setup as the browser tests (Debian's chromium through Playwright, JupyterLab on
127.0.0.1, ``tests/lab_support.py``). Three pictures, each in both themes:

- ``reopened-{light,dark}.png``: the shipped ``01_quickstart.ipynb`` opened as saved,
  untrusted, nothing run: the static outputs a newcomer sees first;
- ``long-answer-{light,dark}.png``: a long answer streamed, then rendered as Markdown;
- ``tool-loop-{light,dark}.png``: a 40-step tool loop (scripted model, real bash tool).

Not a test: it checks nothing, it draws.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from tests.lab_support import CHROMIUM_FLAGS, lab_server, set_theme  # noqa: E402

THEMES = (("light", "JupyterLab Light", True), ("dark", "JupyterLab Dark", False))
KERNEL_IDLE = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle';
}"""

LONG_ANSWER = '''import time
from pseudoclaude_nb.events import (
    AssistantDelta, ContextState, RunFinished, RunSummary, StepFinished, StepStarted,
)
from pseudoclaude_nb.magics.render import NotebookRenderer
from pseudoclaude_nb.messages import Message, Usage

answer = """## Why the mean was wrong

`mean([1, 2, 3, 4])` returned **3.333…**: the divisor was `len(values) - 1`, the sample
size of a *variance*, not of a mean.

- The fix divides by `len(values)`.
- An empty list now raises `ValueError("mean of an empty list")` instead of `ZeroDivisionError`.

```python
def mean(values):
    if not values:
        raise ValueError("mean of an empty list")
    return sum(values) / len(values)
```

| input | before | after |
|---|---|---|
| `[1, 2, 3, 4]` | 3.333 | 2.5 |
| `[7.5]` | ZeroDivisionError | 7.5 |
"""
renderer = NotebookRenderer()
renderer(ContextState(estimated_tokens=14_210, anchor_tokens=13_900, context_window=200_000,
                      threshold=167_000, breaker_open=False, spills=0, compactions=0))
renderer(StepStarted(1))
for word in answer.split(" "):
    renderer(AssistantDelta(word + " "))
    time.sleep(0.01)
renderer(StepFinished(1, Usage(), Message(role="assistant", content=answer)))
renderer(RunFinished(RunSummary(status="done", steps=1, final_text=answer, session_id="screenshot")))
'''


def _loop_script(steps: int) -> dict:
    turns = [
        {
            "text": f"Checking part {i}.",
            "tool_calls": [{"name": "bash", "arguments": {"command": f"echo part {i}; seq 1 20"}}],
        }
        for i in range(steps)
    ]
    turns[7]["tool_calls"] = [{"name": "bash", "arguments": {"command": "python -c 'import sys; sys.exit(1)'"}}]
    turns.append({"text": "All parts checked; part 7 **fails** (exit code 1)."})
    return {"model": "teaching-model", "turns": turns}


def _notebook(path: Path, cells: list[str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, path)


def _shoot(page, url: str, name: str, run: bool) -> None:
    page.goto(url)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function(KERNEL_IDLE, timeout=90_000)
    if run:
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.wait_for_selector("text=✓ done ·", state="attached", timeout=120_000)
        page.wait_for_function(KERNEL_IDLE, timeout=60_000)
        page.wait_for_timeout(1_000)
        outputs = page.query_selector_all(".jp-Notebook .jp-OutputArea")
        if outputs:
            outputs[-1].evaluate("e => e.scrollIntoView({block: 'start'})")
    for theme, label, light in THEMES:
        set_theme(page, label, light)
        page.wait_for_timeout(600)
        page.screenshot(path=str(HERE / f"{name}-{theme}.png"))
        print(f"wrote docs/screenshots/{name}-{theme}.png")


def main() -> int:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if not chromium:
        print("Debian's chromium is needed (sh tests/install_chromium.sh)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="pseudoclaude-shots-") as tmp:
        scratch = Path(tmp)
        root = scratch / "lab"
        root.mkdir()
        shutil.copy(ROOT / "notebooks" / "01_quickstart.ipynb", root / "01_quickstart.ipynb")
        (root / "loop.json").write_text(json.dumps(_loop_script(40)))
        (root / "long_answer_demo.py").write_text(LONG_ANSWER)
        _notebook(root / "long_answer.ipynb", ["%run long_answer_demo.py"])
        _notebook(
            root / "tool_loop.ipynb",
            [
                "%load_ext pseudoclaude_nb\n%config PseudoClaude.workspace = '.'",
                '%agent --new --provider scripted --script loop.json --mode auto "check every part"',
            ],
        )
        env = {"PSEUDOCLAUDE_HOME": str(scratch / "home"), "PSEUDOCLAUDE_DEMO_PACE": "0"}
        with lab_server(root, scratch, env) as (base, token), sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
            for notebook, name, run in (
                ("01_quickstart.ipynb", "reopened", False),
                ("long_answer.ipynb", "long-answer", True),
                ("tool_loop.ipynb", "tool-loop", True),
            ):
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                _shoot(page, f"{base}/lab/tree/{notebook}?reset&token={token}", name, run)  # one tab
                page.close()
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
