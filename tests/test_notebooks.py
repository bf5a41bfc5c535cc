"""The teaching notebooks, executed in real kernels: nbval (as a user would) and nbclient.

Each run works on a copy in a temp folder, because the agent writes into the notebook's
folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


def _kernel_env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PSEUDOCLAUDE_DEMO_PACE="0",
        PSEUDOCLAUDE_HOME=str(tmp_path / "home"),
        IPYTHONDIR=str(tmp_path / "ipython"),
        JUPYTER_PLATFORM_DIRS="1",
    )
    env.pop("JPY_SESSION_NAME", None)
    return env


def test_there_are_notebooks() -> None:
    assert any(nb.name == "01_quickstart.ipynb" for nb in NOTEBOOKS)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_passes_nbval(notebook: Path, tmp_path: Path) -> None:
    copy = tmp_path / notebook.name
    shutil.copy(notebook, copy)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--nbval-lax", "-p", "no:cacheprovider", "-q", copy.name],
        cwd=tmp_path,
        env=_kernel_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout


def test_quickstart_runs_the_demo_in_the_notebook_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notebook = next(nb for nb in NOTEBOOKS if nb.name == "01_quickstart.ipynb")
    nb = nbformat.read(notebook, as_version=4)
    for key, value in _kernel_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()

    agent_cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%agent"))
    plain = [o.get("data", {}).get("text/plain", "") for o in agent_cell.outputs]
    markdown = [o["data"]["text/markdown"] for o in agent_cell.outputs if "text/markdown" in o.get("data", {})]
    html = [o["data"]["text/html"] for o in agent_cell.outputs if "text/html" in o.get("data", {})]
    assert markdown, "the answer streams as Markdown"
    assert any(p.startswith("→ bash(") for p in plain), "tool calls are shown compactly"
    assert any("<details" in h for h in html), "with their details expandable"
    assert any(p.startswith("✓ done · 11 steps") for p in plain)

    # The agent worked in the notebook's folder, and the log is next to it.
    assert (tmp_path / "stats.py").is_file() and (tmp_path / "sample_run.log").is_file()
    logs = list((tmp_path / ".pseudoclaude" / "sessions").glob("*/conversation.jsonl"))
    assert len(logs) == 1 and logs[0].stat().st_size > 50_000
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
