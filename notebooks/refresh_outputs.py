"""Re-run the teaching notebooks and store their outputs (for nbval's comparison).

    python notebooks/refresh_outputs.py            # all notebooks
    python notebooks/refresh_outputs.py 02         # those whose name contains "02"

The convention every teaching notebook follows (06 and later too): ``NN_name.ipynb`` works
in a folder of its own, ``work/NN_name/`` next to it. Its first code cell loads the
extension, creates that folder, moves the kernel there and sets
``%config PseudoClaude.workspace = "."`` (copy the cell of 01 and change the name). So the
agent's files, sessions and memory of one notebook are never seen by another, and all of
them can run in one folder in any order — which is what a learner does.

The outputs are recorded the same way: every notebook runs with nbclient in ONE shared
folder (``CANONICAL``, the one the tests use), in order, so paths and the token counts that
depend on them match. The build folder is then written out of the outputs (it is the
reader's own folder, not ours), and widget state is not stored: it belongs to a kernel that
is gone, and every widget output carries a ``text/plain`` (and ``text/html``) form of its
final state. ``%agent`` and ``%compact`` cells get the ``nbval-ignore-output`` tag: they
update their output in place (the streaming answer, "compacting…"), which nbval does not
follow. Everything else is compared, with the sanitizers of ``tests/nbval_sanitize.cfg``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no lock
    fcntl = None  # type: ignore[assignment]

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).parent
CANONICAL = Path(tempfile.gettempdir()) / "pseudoclaude-notebooks"
WORK = "work"  # each notebook NN_name works in WORK/NN_name/
STREAMING = ("%agent", "%%agent", "%compact")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@contextlib.contextmanager
def canonical_lock() -> Iterator[None]:
    """One run at a time in the shared folder, across processes (other test runs, a refresh)."""
    CANONICAL.mkdir(parents=True, exist_ok=True)
    with open(CANONICAL.with_name(CANONICAL.name + ".lock"), "a+b") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_UN)


def workspace_of(notebook: Path, folder: Path = CANONICAL) -> Path:
    """The folder a notebook works in when it is opened in ``folder``."""
    return folder / WORK / notebook.stem


def canonical_dir(notebook: Path) -> Path:
    """The shared folder, holding a copy of ``notebook`` and a fresh workspace for it."""
    CANONICAL.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(workspace_of(notebook), ignore_errors=True)
    shutil.copy(notebook, CANONICAL / notebook.name)
    return CANONICAL


def tag_streaming_cells(nb: nbformat.NotebookNode) -> None:
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = cell.metadata.setdefault("tags", [])
        streams = any(
            line.lstrip().startswith(STREAMING) and "--status" not in line for line in cell.source.splitlines()
        )
        if streams and "nbval-ignore-output" not in tags:
            tags.append("nbval-ignore-output")
        if not tags:
            del cell.metadata["tags"]


def _scrub(value: object, folder: str) -> object:
    if isinstance(value, str):
        return value.replace(folder + os.sep, "").replace(folder, ".")
    if isinstance(value, list):
        return [_scrub(v, folder) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v, folder) for k, v in value.items()}
    return value


def _join_streams(outputs: list) -> list:
    """One stream output where a print reached the kernel in two flushes ("torn tail:" and
    " True …" apart), as JupyterLab stores it: the committed text does not depend on timing."""
    joined: list = []
    for output in outputs:
        last = joined[-1] if joined else None
        if (
            output.get("output_type") == "stream"
            and last is not None
            and last.get("output_type") == "stream"
            and last.get("name") == output.get("name")
        ):
            last["text"] += output["text"]
        else:
            joined.append(output)
    return joined


def clean_outputs(nb: nbformat.NotebookNode, workspace: Path) -> None:
    """No build paths, no widget state: what is stored reads right without a kernel."""
    nb.metadata.pop("widgets", None)
    folder = str(workspace.resolve())
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs = _join_streams(cell.outputs)
        for output in cell.outputs:
            data = output.get("data")
            if data is not None:
                data.pop(WIDGET_VIEW, None)
                output["data"] = nbformat.from_dict(_scrub(dict(data), folder))
            if "text" in output:
                output["text"] = _scrub(output["text"], folder)


def refresh(notebook: Path) -> None:
    nb = nbformat.read(notebook, as_version=4)
    tag_streaming_cells(nb)
    with canonical_lock():
        folder = canonical_dir(notebook)
        NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
        ).execute()
        clean_outputs(nb, workspace_of(notebook, folder))
    nbformat.write(nb, notebook)
    print(f"refreshed {notebook.name}")


def main(argv: list[str]) -> int:
    os.environ["PSEUDOCLAUDE_DEMO_PACE"] = "0"
    os.environ.setdefault("PSEUDOCLAUDE_HOME", str(CANONICAL / "home"))
    for notebook in sorted(HERE.glob("*.ipynb")):
        if not argv or any(part in notebook.name for part in argv):
            refresh(notebook)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
