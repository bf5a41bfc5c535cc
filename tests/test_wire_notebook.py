"""What the browser receives and the saved notebook keeps, in real kernels (issue 30).

Every iopub message is counted (``bench.kernel_wire``, the bench's own harness): a long
answer goes over the wire once as it streams (each character in one ``stream`` message)
and once more as its final Markdown; a tool loop's lines share outputs; what a finished run
leaves in the notebook is Markdown, HTML and text, never a widget view.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from bench.kernel_wire import Wire, saved_bytes

WIDGET = "application/vnd.jupyter.widget-view+json"

STREAM = """
import time
from pseudoclaude_nb.events import AssistantDelta, RunFinished, RunSummary, StepFinished, StepStarted
from pseudoclaude_nb.magics.render import NotebookRenderer
from pseudoclaude_nb.messages import Message, Usage

renderer = NotebookRenderer()
renderer(StepStarted(1))
text = ""
for i in range(1500):
    chunk = f"word{i} and **more** `text`" + ("\\n\\n" if i % 40 == 39 else " ")
    text += chunk
    renderer(AssistantDelta(chunk))
    if i % 5 == 0:
        time.sleep(0.01)
renderer(StepFinished(1, Usage(), Message(role="assistant", content=text)))
renderer(RunFinished(RunSummary(status="done", steps=1, final_text=text)))
open("answer.txt", "w").write(text)
"""


def test_a_long_answer_goes_over_the_wire_once_then_stays_as_markdown(tmp_path: Path) -> None:
    with Wire(tmp_path) as wire:
        wire.run("import pseudoclaude_nb.magics.render")
        cell = wire.run(STREAM)
    answer = (tmp_path / "answer.txt").read_text()
    # O(n): iopub carries the text about four times (streamed once, Markdown and plain once),
    # not once per update (the whole text re-sent ~7 times a second was 71x-490x).
    assert cell.bytes <= 5 * len(answer.encode()), (cell.bytes, len(answer))
    assert cell.types.count("update_display_data") <= 3  # the answer's and the gauge's final states
    assert cell.types.count("stream") >= 5  # it was live while it streamed
    streamed = "".join(cell.streamed)  # each character sent once while it streamed (the last
    assert answer.startswith(streamed) and len(streamed) > len(answer) // 2  # few go with the Markdown)
    # The saved cell: the answer as Markdown once, with its text; no widget view anywhere.
    assert not [o for o in cell.outputs if WIDGET in o.get("data", {})]
    (shown,) = [o for o in cell.outputs if "text/markdown" in o.get("data", {})]
    assert shown["data"]["text/markdown"] == answer == shown["data"]["text/plain"]
    assert not [o for o in cell.outputs if o["output_type"] == "stream"]  # the live text was replaced
    gauge = [o for o in cell.outputs if "pc-gauge" in o.get("data", {}).get("text/html", "")]
    assert gauge and gauge[0]["data"]["text/plain"].startswith("context")  # static HTML and text


def _loop_notebook(workspace: Path, steps: int) -> nbformat.NotebookNode:
    turns = [
        {
            "text": f"Step {i}: checking `part {i}`.",
            "tool_calls": [{"name": "bash", "arguments": {"command": f"echo step {i}; seq 1 50"}}],
        }
        for i in range(steps)
    ]
    turns.append({"text": "All **done**."})
    (workspace / "loop.json").write_text(json.dumps({"model": "m", "turns": turns}))
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext pseudoclaude_nb"),
        nbformat.v4.new_code_cell(
            f'%agent --new --provider scripted --script loop.json --mode auto --max-steps {steps + 5} "loop"'
        ),
    ]
    return nb


def test_a_tool_loop_saves_a_few_static_outputs_that_read_as_text(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    steps = 40
    nb = _loop_notebook(workspace, steps)
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(workspace)}}
    ).execute()
    path = workspace / "loop.ipynb"
    nbformat.write(nb, path)
    saved = nbformat.read(path, as_version=4)
    outputs = saved.cells[-1].outputs
    assert not [o for o in outputs if WIDGET in o.get("data", {})]
    assert "widgets" not in saved.metadata  # no widget state to find on reopening
    assert len(outputs) < steps / 2  # lines batched: not one output per answer and per call
    assert saved_bytes([dict(o) for o in outputs]) <= 1_000 * steps
    plain = "\n".join(o.get("data", {}).get("text/plain", "") for o in outputs)
    for i in (0, steps // 2, steps - 1):
        line = f"→ bash('echo step {i}; seq 1 50') ✓ 51 lines, {147 + len(str(i)) - 1} bytes"
        assert f"Step {i}: checking `part {i}`.\n{line}" in plain
    assert plain.splitlines()[-1].startswith("✓ done · 41 steps")
    # The saved line keeps a preview; the whole output stays in the session log.
    markup = "".join(o.get("data", {}).get("text/markdown", "") for o in outputs)
    assert "step 7&#10;1&#10;2" in markup and "&#10;50</pre>" not in markup
    assert "51 lines in all (the session log keeps them)" in markup
