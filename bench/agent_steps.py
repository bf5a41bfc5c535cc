"""Per-step overhead through ``%agent`` (issue 18, SPEC §15): 10,000 messages vs 100, ≤ 1.2×.

The path a user runs: a real IPython ``InteractiveShell`` with the extension loaded, the
``%agent`` magic with the terminal renderer (printing to a buffer), the scripted provider
supplying usage the way a real one does (it estimates the request it is sent: anchor +
delta), fsync on, the history index on (the background indexer: a run opens the index and
leaves the catch-up of its appends to the indexer), every tool call run for real (``read_file`` of a small file). No compaction:
the window is far above the conversation, as large windows are now normal.

A session of N messages (realistic content, written by the product's writer) is resumed
with ``%sessions resume`` and warmed by one untimed ``%agent`` run, which also indexes it;
then each timed ``%agent`` run plays ``steps`` model steps. The figure is the run's wall
time divided by its steps: everything ``%agent`` does per run (setup, opening
the index, the end line) is in it, spread over the steps. Sizes are interleaved and each
timed run starts from a fresh copy of the warmed workspace, so the small end stays small.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import Usage
from pseudoclaude_nb.session.entries import UsageEntry
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir

from .common import Row, Sizes
from .workload import Workload

WINDOW = 1_000_000_000  # far above any conversation here: nothing compacts
TARGET = 1.2


def _session(ws: Path, count: int) -> str:
    """A stored session of ``count`` messages ending with a usage anchor; its id."""
    folder = new_session_dir(ws)
    work = Workload(41, big_every=0)
    conversation = Conversation()
    with SessionWriter(folder, model="bench-scripted", fsync=False) as writer:
        writer.attach(conversation)
        for m in list(work.messages(count))[:count]:
            conversation.append(m)
        if conversation.messages()[-1].tool_result is not None:
            conversation.add_assistant("Done for now.")
        writer.record(
            UsageEntry.new(
                Usage(input_tokens=count * 500, output_tokens=100), messages=len(conversation), model=None
            )
        )
    return folder.name


def _script(path: Path, steps: int) -> Path:
    turns: list[dict[str, Any]] = [
        {
            "text": f"Step {i}: reading the module again.",
            "tool_calls": [{"name": "read_file", "arguments": {"path": "src/small.py", "limit": 40}}],
        }
        for i in range(steps - 1)
    ]
    turns.append({"text": "Finished."})
    path.write_text(json.dumps({"model": "bench-scripted", "context_window": WINDOW, "turns": turns}))
    return path


class _Shell:
    """One InteractiveShell with the extension loaded, output to a buffer."""

    def __init__(self) -> None:
        from IPython.core.interactiveshell import InteractiveShell

        from pseudoclaude_nb.magics import current_agent

        # The process's shell, or one made for the bench and cleared at close (a test process
        # that later starts IPython's own test shell must not find a plain one in its place).
        self.made = not InteractiveShell.initialized()
        self.shell = InteractiveShell.instance()
        self.shell.run_line_magic("load_ext", "pseudoclaude_nb")
        self.agent = current_agent(self.shell)
        self.out = io.StringIO()

    def magic(self, name: str, line: str) -> None:
        self.out.seek(0)
        self.out.truncate()
        with contextlib.redirect_stdout(self.out), contextlib.redirect_stderr(self.out):
            self.shell.run_line_magic(name, line)

    def use(self, ws: Path) -> None:
        self.agent.close()
        settings = self.agent.settings
        settings.workspace, settings.provider, settings.fsync = str(ws), "scripted", True

    def close(self) -> None:
        self.agent.close()
        self.shell.run_line_magic("unload_ext", "pseudoclaude_nb")
        if self.made:
            from IPython.core.interactiveshell import InteractiveShell

            InteractiveShell.clear_instance()


def _agent_line(script: Path) -> str:
    return f'--mode auto --context-window {WINDOW} --script {script} "go on"'


def _prepare(root: Path, shell: _Shell, count: int, warm: Path) -> tuple[Path, str]:
    ws = Path(tempfile.mkdtemp(dir=root, prefix=f"steps-{count}-"))
    (ws / "src").mkdir()
    (ws / "src" / "small.py").write_text("".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(30)))
    sid = _session(ws, count)
    shell.use(ws)
    shell.magic("sessions", f"resume {sid}")
    shell.magic("agent", _agent_line(warm))  # resumes the log, indexes it, anchors the estimate
    shell.agent.close()
    return ws, sid


def _timed_run(
    root: Path, shell: _Shell, template: Path, sid: str, script: Path, steps: int, profile: Path | None = None
) -> float:
    ws = Path(tempfile.mkdtemp(dir=root, prefix="steps-run-"))
    shutil.rmtree(ws)
    shutil.copytree(template, ws)
    shell.use(ws)
    shell.magic("sessions", f"resume {sid}")
    shell.magic("agent", _agent_line(_script(ws / "warm.json", 2)))  # as in a kernel: not the first run
    if profile is not None:
        import cProfile

        with cProfile.Profile() as p:
            shell.magic("agent", _agent_line(script))
        p.dump_stats(profile)
        seconds = 0.0
    else:
        # GC on, as a user runs it (issue 34: this row used to time with it off).
        started = time.perf_counter()
        shell.magic("agent", _agent_line(script))
        seconds = time.perf_counter() - started
    shell.agent.close()
    shutil.rmtree(ws, ignore_errors=True)
    return seconds / steps


def per_step_through_magic(root: Path, sizes: Sizes, *, profile: Path | None = None) -> list[Row]:
    small, big = sizes.overhead_small, sizes.magic_big
    steps = sizes.magic_steps
    scripts = Path(tempfile.mkdtemp(dir=root, prefix="steps-scripts-"))
    warm, script = _script(scripts / "warm.json", 2), _script(scripts / "steps.json", steps)
    shell = _Shell()
    try:
        ws_small, sid_small = _prepare(root, shell, small, warm)
        ws_big, sid_big = _prepare(root, shell, big, warm)
        at_small, at_big = [], []
        # Interleaved, ten runs of 60 steps each: a step is ~3 ms, most of it fsyncs whose
        # latency varies 2x from run to run here, and five runs of 20 steps gave medians
        # from 1.06x to 1.41x for the same code.
        for _ in range(max(2, 2 * sizes.repeat)):
            at_small.append(_timed_run(root, shell, ws_small, sid_small, script, steps))
            at_big.append(_timed_run(root, shell, ws_big, sid_big, script, steps))
        if profile is not None:  # what a step costs at the large end (``--profile``)
            _timed_run(root, shell, ws_big, sid_big, script, steps, profile)
    finally:
        shell.close()
    s, b = statistics.median(at_small), statistics.median(at_big)
    ratio = b / s
    return [
        Row(
            key="overhead_magic",
            what=f"per-step overhead through %agent (fsync on, index on, terminal renderer) at {big:,} "
            f"messages vs {small:,}",
            target=f"≤ {TARGET}×",
            value=round(ratio, 3),
            unit="×",
            ok=ratio <= TARGET if big >= 10_000 else None,
            detail={
                f"ms_per_step_at_{small}": round(s * 1e3, 2),
                f"ms_per_step_at_{big}": round(b * 1e3, 2),
                "steps_per_run": steps,
                "runs_timed_each": len(at_small),
                "method": "wall time of one %agent run / its steps (median of fresh copies, interleaved, GC on), scripted provider "
                "estimating usage, read_file tool, history index and fsync on; the index's catch-up of the run's appends "
                "is the background indexer's once the cell is over (its cost is the append_caught_up row's)",
            },
            note="" if big >= 10_000 else f"quick mode: {big:,} messages, no verdict",
        )
    ]
