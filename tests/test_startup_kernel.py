"""Issue 30 "Start fast" in a real Jupyter kernel: ``%load_ext`` there is as lean as in a shell.

A kernel imports more than a terminal shell before any extension (ipykernel, comm, zmq), so
this is checked where users load the extension: the cell ``%load_ext pseudoclaude_nb`` adds
none of the heavy libraries, and the first ``%agent`` (no key: the offline explainer) still
answers, with its gauge — ipywidgets is loaded when that widget is shown.
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
    assert "ipywidgets" in "".join(after).split()  # the run's gauge: a widget shown in a notebook
