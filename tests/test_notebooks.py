"""The teaching notebooks, executed in real kernels: nbclient and nbval.

nbclient fails on any error output, a magic's UsageError included (nbval alone does not).
nbval compares every cell with the outputs committed in the notebook, after the
sanitizers of ``nbval_sanitize.cfg``; it runs the notebook in the same shared folder
that ``notebooks/refresh_outputs.py`` used to record them. ``%agent`` cells stream through
display updates that nbval does not follow, so they carry the ``nbval-ignore-output`` tag.

Each notebook works in ``work/<its name>/`` (the convention in refresh_outputs.py), so all
of them run in one folder, in order or reversed, and give the committed results.
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

ROOT = Path(__file__).parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SANITIZE = Path(__file__).parent / "nbval_sanitize.cfg"
sys.path.insert(0, str(ROOT / "notebooks"))
from refresh_outputs import CANONICAL, canonical_dir, canonical_lock, workspace_of  # noqa: E402  (where outputs were recorded)


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
    names = {nb.name for nb in NOTEBOOKS}
    assert {
        "01_quickstart.ipynb",
        "02_session_log_anatomy.ipynb",
        "03_compaction_live.ipynb",
        "05_compaction_vs_rollover.ipynb",
    } <= names


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_matches_its_committed_outputs_under_nbval(notebook: Path, tmp_path: Path) -> None:
    with canonical_lock():
        folder = canonical_dir(notebook)
        proc = _nbval([notebook.name], folder, tmp_path)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout


def _nbval(names: list[str], folder: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbval",
            f"--nbval-sanitize-with={SANITIZE}",
            "-p",
            "no:cacheprovider",
            "-q",
            *names,
        ],
        cwd=folder,
        env=_kernel_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_without_any_error(
    notebook: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nb = nbformat.read(notebook, as_version=4)
    for key, value in _kernel_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    # Raises CellExecutionError on any error output, a UsageError from a magic included.
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code)
    # Only a cell tagged raises-exception (a teaching notebook's failing cell) may show an error.
    expected = [c for c in code if "raises-exception" in c.metadata.get("tags", [])]
    assert not [o for c in code if c not in expected for o in c.outputs if o.output_type == "error"]
    assert all(o.output_type == "error" for c in expected for o in c.outputs[-1:])


def test_recorded_outputs_join_a_print_that_arrived_in_two_flushes(tmp_path: Path) -> None:
    from refresh_outputs import clean_outputs

    nb = nbformat.v4.new_notebook()
    out = nbformat.v4.new_output
    nb.cells.append(nbformat.v4.new_code_cell("print(...)"))
    nb.cells[0].outputs = [
        out("stream", name="stdout", text="torn tail:"),
        out("stream", name="stdout", text=" True\n"),
        out("stream", name="stderr", text="warn\n"),
        out("display_data", data={"text/plain": "x"}),
        out("stream", name="stdout", text="after\n"),
    ]
    clean_outputs(nb, tmp_path)
    assert [(o.output_type, o.get("text")) for o in nb.cells[0].outputs] == [
        ("stream", "torn tail: True\n"),
        ("stream", "warn\n"),
        ("display_data", None),
        ("stream", "after\n"),
    ]


def test_streaming_cells_are_tagged_for_nbval() -> None:
    for notebook in NOTEBOOKS:
        for cell in nbformat.read(notebook, as_version=4).cells:
            if cell.cell_type == "code" and ("%agent" in cell.source or "%compact\n" in cell.source + "\n"):
                assert "nbval-ignore-output" in cell.metadata.get("tags", []), (
                    notebook.name,
                    cell.source[:40],
                )


def test_quickstart_runs_the_demo_in_the_notebook_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notebook = next(nb for nb in NOTEBOOKS if nb.name == "01_quickstart.ipynb")
    nb = nbformat.read(notebook, as_version=4)
    for key, value in _kernel_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()

    agent_cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("%agent"))
    plain = [o.get("data", {}).get("text/plain", "") for o in agent_cell.outputs]
    markdown = [
        o["data"]["text/markdown"] for o in agent_cell.outputs if "text/markdown" in o.get("data", {})
    ]
    html = [o["data"]["text/html"] for o in agent_cell.outputs if "text/html" in o.get("data", {})]
    assert markdown, "the answer streams as Markdown"
    # Finished tool lines and short answers share outputs (issue 30): one line each in text.
    lines = "\n".join(plain).splitlines()
    assert any(p.startswith("→ bash(") for p in lines), "tool calls are shown compactly"
    assert any("<details" in h for h in html + markdown), "with their details expandable"
    assert any(p.startswith("✓ done · 11 steps") for p in plain)

    # The agent worked in the notebook's folder, and the log is next to it.
    work = workspace_of(notebook, tmp_path)
    assert (work / "stats.py").is_file() and (work / "sample_run.log").is_file()
    assert not (tmp_path / "stats.py").exists() and not (tmp_path / ".pseudoclaude").exists()
    logs = list((work / ".pseudoclaude" / "sessions").glob("*/conversation.jsonl"))
    assert len(logs) == 1 and logs[0].stat().st_size > 50_000
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors


def _plain(cell: nbformat.NotebookNode) -> str:
    parts = []
    for o in cell.outputs:
        parts.append(
            o.get("text", "") if o.output_type == "stream" else o.get("data", {}).get("text/plain", "")
        )
    return "\n".join(parts)


def test_all_notebooks_run_in_order_in_one_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a learner does: open notebooks/ and run 01, 02, … top to bottom, one kernel each."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for key, value in _kernel_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    ran: dict[str, nbformat.NotebookNode] = {}
    for notebook in NOTEBOOKS:
        shutil.copy(notebook, folder)
        nb = nbformat.read(folder / notebook.name, as_version=4)
        NotebookClient(
            nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
        ).execute()
        # Only a cell tagged raises-exception (a teaching notebook's failing cell) may show an error.
        checked = [c for c in nb.cells if "raises-exception" not in c.metadata.get("tags", [])]
        errors = [o for c in checked for o in c.get("outputs", []) if o.output_type == "error"]
        stderr = [o.text for c in checked for o in c.get("outputs", []) if o.get("name") == "stderr"]
        assert not errors and not stderr, (notebook.name, errors, stderr)
        ran[notebook.stem] = nb
    text = {name: "\n".join(_plain(c) for c in nb.cells if c.cell_type == "code") for name, nb in ran.items()}
    # Nothing of any notebook landed in the shared folder itself.
    assert not (folder / ".pseudoclaude").exists()
    assert sorted(p.name for p in (folder / "work").iterdir()) == sorted(ran)
    # 02 resumes its own session, the one with the simulated crash, not 01's.
    anatomy = text["02_session_log_anatomy"]
    assert "resumed session" in anatomy and "! a torn line from a crash was skipped" in anatomy
    assert "h ago" not in anatomy
    sessions = list((folder / "work" / "02_session_log_anatomy" / ".pseudoclaude" / "sessions").iterdir())
    assert len(sessions) == 1
    # 04's project memory stays in 04's folder: 05 runs to the end of both scripts.
    assert not (folder / "work" / "05_compaction_vs_rollover" / ".pseudoclaude" / "memory").exists()
    review = text["05_compaction_vs_rollover"]
    assert "ran out" not in review and review.count("✓ done · ") == 2
    assert "✓ done · 11 steps" in text["01_quickstart"]
    assert "same session: True · messages: True" in text["01_quickstart"]


def test_all_notebooks_in_one_folder_reversed_match_their_committed_outputs(tmp_path: Path) -> None:
    """Any order: the last notebook first, all in the shared folder, compared by nbval."""
    with canonical_lock():
        for notebook in NOTEBOOKS:
            canonical_dir(notebook)
        proc = _nbval([nb.name for nb in reversed(NOTEBOOKS)], CANONICAL, tmp_path)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout
