"""Re-run the teaching notebooks and store their outputs (for nbval's comparison).

    python notebooks/refresh_outputs.py            # all notebooks
    python notebooks/refresh_outputs.py 02         # those whose name contains "02"

Each notebook runs with nbclient in its canonical folder, the same one the tests use
(``CANONICAL``), so paths and the token counts that depend on them match. ``%agent``
and ``%compact`` cells get the ``nbval-ignore-output`` tag: they update their output in
place (the streaming answer, "compacting…"), which nbval does not follow. Everything else is compared, with the sanitizers
of ``tests/nbval_sanitize.cfg`` for ids, times, dates, sizes and addresses.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).parent
CANONICAL = Path(tempfile.gettempdir()) / "pseudoclaude-notebooks"
STREAMING = ("%agent", "%%agent", "%compact")


def canonical_dir(notebook: Path) -> Path:
    """A fresh, fixed folder for one notebook's run."""
    folder = CANONICAL / notebook.stem
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


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


def refresh(notebook: Path) -> None:
    nb = nbformat.read(notebook, as_version=4)
    tag_streaming_cells(nb)
    folder = canonical_dir(notebook)
    NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    ).execute()
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
