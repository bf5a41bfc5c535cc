"""Issue 30 "Start fast" in a real Jupyter kernel: ``%load_ext`` there is as lean as in a shell.

A kernel imports more than a terminal shell before any extension (ipykernel, comm, zmq), so
this is checked where users load the extension: the cell ``%load_ext pseudoclaude_nb`` adds
none of the heavy libraries, and the first ``%agent`` (no key: the offline explainer) still
answers, with its gauge (no widget: ipywidgets is loaded when a widget is first shown). A
kernel left idle after ``%load_ext`` imports the first run's world then (``magics.warm``),
and a run started while it does waits for it and imports nothing itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.kernel_wire import Wire
from tests.test_startup import HEAVY

pytest.importorskip("jupyter_client")


def test_load_ext_in_a_kernel_imports_no_heavy_library(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with Wire(ws, env={"PSEUDOCLAUDE_HOME": str(tmp_path / "home")}) as wire:
        wire.run("import sys\n_before = set(sys.modules)")
        wire.run("%load_ext pseudoclaude_nb")
        added = wire.run("print(' '.join(sorted(set(sys.modules) - _before)))").streamed
        wire.run("count = 0\n1 / count")
        answer = wire.run("%agent why did my last cell fail?")
        after = wire.run("print(' '.join(sorted(m for m in sys.modules if '.' not in m)))").streamed
    loaded = "".join(added).split()
    assert loaded and all(m.split(".")[0] in ("pseudoclaude_nb", "IPython", "base64") for m in loaded), loaded
    assert not {m.split(".")[0] for m in loaded} & set(HEAVY)
    shown = " ".join(str(o.get("data", o.get("text", ""))) for o in answer.outputs)
    assert "ZeroDivisionError" in shown
    # The run's live gauge is an output updated in place, no widget: ipywidgets is imported when
    # a widget is first shown, not by a run (issue 47: the first request's path).
    assert "ipywidgets" not in "".join(after).split()


def test_an_idle_kernel_imports_the_first_runs_world_before_the_run(tmp_path: Path) -> None:
    import time

    ws = tmp_path / "ws"
    ws.mkdir()
    env = {"PSEUDOCLAUDE_HOME": str(tmp_path / "home"), "OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""}
    with Wire(ws, env=env) as wire:
        wire.run("%load_ext pseudoclaude_nb")
        wire.run("import sys\n_before = set(sys.modules)")
        time.sleep(3)  # idle: a person reading, typing the prompt
        warmed = wire.run("print(' '.join(sorted(set(sys.modules) - _before)))").streamed
        wire.run("count = 0\n1 / count")
        wire.run("_before = set(sys.modules)")
        answer = wire.run("%agent why did my last cell fail?")
        added = wire.run("print(' '.join(sorted(set(sys.modules) - _before)))").streamed
    warmed_modules = "".join(warmed).split()
    assert {"pseudoclaude_nb.agent.core", "pseudoclaude_nb.magics.agent", "pydantic"} <= set(warmed_modules)
    shown = " ".join(str(o.get("data", o.get("text", ""))) for o in answer.outputs)
    assert "ZeroDivisionError" in shown
    assert "pseudoclaude_nb.agent.core" not in "".join(added).split()  # the run found it imported
