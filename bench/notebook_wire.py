"""What a notebook front end receives and keeps (issue 30), measured in real kernels.

Every iopub message is counted (``bench.kernel_wire``), as a browser would receive it:

- ``wire_stream``: a 4,000-token answer streamed through the notebook renderer at 200
  tokens/s, iopub bytes per byte of answer (target ≤ 5; re-sending the whole text on every
  update cost 71× at this size and grows with the length);
- ``wire_loop_rate``: a 100-step ``%agent`` tool loop (scripted model, real bash tool), the
  most iopub messages in any one second (target ≤ 60);
- ``wire_loop_saved``: the bytes that loop's cell adds to a saved notebook, per step
  (target ≤ 1,000);
- ``wire_recorder_tax``: the CPU of an output-heavy ordinary cell (40,000 prints) with the
  cell recorder on over the same cell with it off, in one kernel with the extension loaded,
  minus one (target ≤ 0.10; the median of eight turns, each on and off a few seconds
  apart, in ABBA order).

``python -m bench.notebook_wire`` prints the rows; ``python -m bench`` runs them as its
``wire`` section.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

from .common import Row
from .kernel_wire import Wire, saved_bytes

ANSWER_TOKENS = 4_000
TOKENS_PER_SECOND = 200
LOOP_STEPS = 100
PRINTS = 40_000

STREAM = """
import time
from pseudoclaude_nb.context.estimate import estimate_text
from pseudoclaude_nb.events import AssistantDelta, RunFinished, RunSummary, StepFinished, StepStarted
from pseudoclaude_nb.magics.render import NotebookRenderer
from pseudoclaude_nb.messages import Message, Usage

words = ("The estimate is **bytes / 3.5**, so a `stats.py` of 2,000 bytes counts as ~571 tokens; "
         "a list follows.\\n\\n- one item\\n- another item\\n\\n").split(" ")
renderer = NotebookRenderer()
renderer(StepStarted(1))
text, i = "", 0
while estimate_text(text) < {tokens}:
    chunk = " ".join(words[(4 * i + k) % len(words)] for k in range(4)) + " "  # ~4 words a delta
    i += 1
    text += chunk
    renderer(AssistantDelta(chunk))
    time.sleep(estimate_text(chunk) / {pace})
renderer(StepFinished(1, Usage(), Message(role="assistant", content=text)))
renderer(RunFinished(RunSummary(status="done", steps=1, final_text=text)))
_answer_bytes = len(text.encode())
"""


def stream_row(scratch: Path, tokens: int = ANSWER_TOKENS, pace: int = TOKENS_PER_SECOND) -> Row:
    with Wire(scratch, env={"PSEUDOCLAUDE_HOME": str(scratch / "home")}) as wire:
        wire.run("import pseudoclaude_nb.magics.render")
        cell = wire.run(STREAM.format(tokens=tokens, pace=pace))
        answer = int(wire.run("print(_answer_bytes)").outputs[-1]["text"])
    ratio = cell.bytes / answer
    widgets = [o for o in cell.outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    return Row(
        "wire_stream",
        f"a {tokens:,}-token answer streamed at {pace} tokens/s: iopub bytes per answer byte",
        "≤ 5",
        round(ratio, 2),
        "×",
        ratio <= 5 and not widgets,
        {
            "iopub_bytes": cell.bytes,
            "answer_bytes": answer,
            "messages": len(cell.sizes),
            "seconds": round(cell.seconds, 1),
            "saved_bytes": saved_bytes(cell.outputs),
            "widget_outputs_saved": len(widgets),
        },
    )


def loop_rows(scratch: Path, steps: int = LOOP_STEPS) -> list[Row]:
    turns = [
        {
            "text": f"Step {i}: running the check.",
            "tool_calls": [{"name": "bash", "arguments": {"command": f"echo step {i}; seq 1 40"}}],
        }
        for i in range(steps)
    ]
    turns.append({"text": "All checks ran."})
    (scratch / "loop.json").write_text(json.dumps({"model": "bench-model", "turns": turns}))
    env = {"PSEUDOCLAUDE_HOME": str(scratch / "home"), "PSEUDOCLAUDE_DEMO_PACE": "0"}
    with Wire(scratch, env=env) as wire:
        wire.run("%load_ext pseudoclaude_nb")
        cell = wire.run(
            f'%agent --new --provider scripted --script loop.json --mode auto --max-steps {steps + 5} "loop"'
        )
    rate = cell.max_per_second()
    per_step = saved_bytes(cell.outputs) / steps
    detail = {"messages": len(cell.sizes), "iopub_bytes": cell.bytes, "seconds": round(cell.seconds, 1)}
    return [
        Row(
            "wire_loop_rate",
            f"a {steps}-step tool loop: iopub messages in its busiest second",
            "≤ 60",
            rate,
            "msg/s",
            rate <= 60,
            detail,
        ),
        Row(
            "wire_loop_saved",
            f"a {steps}-step tool loop: saved notebook bytes per step",
            "≤ 1,000",
            round(per_step),
            "B/step",
            per_step <= 1_000,
            {"saved_bytes": saved_bytes(cell.outputs)},
        ),
    ]


def recorder_row(scratch: Path, repeat: int = 8, prints: int = PRINTS) -> Row:
    work = f"for i in range({prints}):\n    print(i, 'an ordinary line of output')"
    toggle = "from pseudoclaude_nb.magics import _RECORDERS\nfor _rec in _RECORDERS.values():\n    _rec.{}()"

    def cpu(wire: Wire) -> float:
        wire.run("import time as _t; _c0 = _t.process_time()")
        wire.run(work)
        return float(wire.run("print(_t.process_time() - _c0)").outputs[-1]["text"])

    # One kernel, the extension loaded, the recorder on and off in turns (ABBA): the same
    # process and heap, so what differs is the recorder (two kernels differ by more, here).
    with Wire(scratch, env={"PSEUDOCLAUDE_HOME": str(scratch / "home")}) as wire:
        wire.run("%load_ext pseudoclaude_nb")
        cpu(wire)  # warm
        on, off = [], []
        for n in range(repeat):
            for recording in (True, False) if n % 2 == 0 else (False, True):
                if not recording:
                    wire.run(toggle.format("uninstall"))
                (on if recording else off).append(cpu(wire))
                if not recording:
                    wire.run(toggle.format("install"))
    # Each turn's two runs are seconds apart: their ratio cancels most of what the other
    # work on the machine does to both; the median of the turns is the figure.
    tax = statistics.median(a / b for a, b in zip(on, off, strict=True)) - 1
    return Row(
        "wire_recorder_tax",
        f"an ordinary cell printing {prints:,} lines: extra kernel CPU with the cell recorder on",
        "≤ 0.10",
        round(tax, 3),
        "×",
        tax <= 0.10,
        {"cpu_recorder_off_s": [round(x, 3) for x in off], "cpu_recorder_on_s": [round(x, 3) for x in on]},
    )


def wire_rows(scratch: Path, quick: bool = False) -> list[Row]:
    """The four rows; ``quick`` (``python -m bench --quick``) runs each smaller and faster."""
    if quick:
        rows = [stream_row(scratch, tokens=2_000, pace=1_000)]
        rows.extend(loop_rows(scratch, steps=30))
        rows.append(recorder_row(scratch, repeat=2, prints=10_000))
        return rows
    rows = [stream_row(scratch)]
    rows.extend(loop_rows(scratch))
    rows.append(recorder_row(scratch))
    return rows


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="pseudoclaude-wire-") as tmp:
        for row in wire_rows(Path(tmp)):
            mark = {True: "met", False: "MISSED", None: ""}[row.ok]
            print(f"{row.key:<20} {row.value} {row.unit} (target {row.target}) {mark}  {row.what}")
            print(f"{'':<20} {json.dumps(row.detail)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
