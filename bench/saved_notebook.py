"""What a notebook saved from the browser keeps per agent step (issue 47): a 05-like run in JupyterLab.

``notebooks/05_compaction_vs_rollover.ipynb`` (its outputs cleared) is run from the page in
JupyterLab, driven by Playwright with Debian's ``chromium`` — the setup of the browser tests
(``tests/lab_support.py``) — its ``%agent`` cells as a reader runs them (the scripted model,
compaction in one run and rollover in the other), then saved from the page
(``docmanager:save``) before any further cell runs (the last widgets unsettled, as a person
saves). ``saved_per_step`` is the bytes the ``%agent`` cells' outputs hold in the saved file
(nbformat's JSON of the outputs) over the model steps of the two runs (target ≤ 1,000 B a
step); the widget state the front end saved with the notebook, if any, is in the detail (it is
the other cells': a run leaves no widget).

Without chromium or Playwright the row says so and measures nothing. ``python -m
bench.saved_notebook [--against PATH]`` prints it; ``python -m bench --only saved`` runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from .common import Row

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "05_compaction_vs_rollover.ipynb"
TARGET = 1_000
_STEPS = re.compile(r"· (\d+) steps? ·")

_RUN_ALL = """() => window.jupyterapp.commands.execute('notebook:run-all-cells')"""
_DONE = """(n) => {
  const nb = window.jupyterapp.shell.currentWidget;
  const kernel = nb && nb.sessionContext.session && nb.sessionContext.session.kernel;
  if (!kernel || kernel.status !== 'idle') return false;
  const cells = nb.content.widgets;
  return cells.filter(c => c.model.type === 'code').every(c => c.model.executionCount !== null);
}"""


def _outputs_bytes(cell: dict) -> int:
    import nbformat

    with_outputs = nbformat.v4.new_code_cell(
        "x", outputs=[nbformat.from_dict(o) for o in cell.get("outputs", [])]
    )
    bare = nbformat.v4.new_code_cell("x")
    one = nbformat.v4.new_notebook(cells=[with_outputs])
    zero = nbformat.v4.new_notebook(cells=[bare])
    return len(nbformat.writes(one).encode()) - len(nbformat.writes(zero).encode())


def measure(scratch: Path, package: Path = ROOT, *, browser: bool = True) -> dict:
    """Run the notebook and save it: from JupyterLab in chromium, or (``browser=False``, the
    quick bench) with nbclient, whose saved outputs were the same bytes on this notebook."""
    import nbformat

    root = scratch / "lab"
    root.mkdir(parents=True)
    nb = nbformat.read(ROOT / "notebooks" / NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, root / NOTEBOOK)
    env = {
        "PYTHONPATH": str(package),
        "PSEUDOCLAUDE_HOME": str(scratch / "home"),
        "PSEUDOCLAUDE_DEMO_PACE": "0",
    }
    if browser:
        _run_in_lab(root, scratch, env)
    else:
        from nbclient import NotebookClient

        saved_env = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            NotebookClient(
                nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(root)}}
            ).execute()
        finally:
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        nbformat.write(nb, root / NOTEBOOK)
    return _figures(root)


def _run_in_lab(root: Path, scratch: Path, env: dict[str, str]) -> None:
    from playwright.sync_api import sync_playwright

    from tests.lab_support import CHROMIUM_FLAGS, lab_server

    with lab_server(root, scratch, env=env) as (base, token), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{base}/lab/tree/{NOTEBOOK}?token={token}")
        page.wait_for_function(
            "() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
            " return !!w && !!w.sessionContext && !!w.sessionContext.session"
            " && !!w.sessionContext.session.kernel && w.sessionContext.session.kernel.status === 'idle'; }",
            timeout=120_000,
        )
        page.evaluate(_RUN_ALL)
        page.wait_for_function(_DONE, arg=0, timeout=300_000, polling=500)
        page.wait_for_timeout(1_000)  # the last iopub messages rendered
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function(
            "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=60_000
        )
        browser.close()


def _figures(root: Path) -> dict:
    saved = json.loads((root / NOTEBOOK).read_text())
    agents = [c for c in saved["cells"] if "".join(c.get("source", "")).startswith("%agent")]
    steps = 0
    for cell in agents:
        for out in cell.get("outputs", []):
            text = "".join(out.get("data", {}).get("text/plain", ""))
            if (m := _STEPS.search(text)) and text.lstrip().startswith(("✓", "■", "✗")):
                steps += int(m.group(1))
    outputs = sum(_outputs_bytes(c) for c in agents)
    widgets = (
        len(json.dumps(saved.get("metadata", {}).get("widgets", {})).encode())
        if "widgets" in saved.get("metadata", {})
        else 0
    )
    mimes: dict[str, int] = {}
    for cell in agents:
        for out in cell.get("outputs", []):
            for mime, data in out.get("data", {}).items():
                mimes[mime] = mimes.get(mime, 0) + len("".join(data).encode())
    return {
        "steps": steps,
        "outputs_bytes": outputs,
        "widget_state_bytes": widgets,
        "file_bytes": (root / NOTEBOOK).stat().st_size,
        "outputs": sum(len(c.get("outputs", [])) for c in agents),
        "bytes_by_mime": mimes,
        "per_cell": [_outputs_bytes(c) for c in agents],
    }


def saved_rows(scratch: Path, *, package: Path = ROOT, browser: bool = True) -> list[Row]:
    """``browser=False`` (the quick bench): saved by nbclient instead, no verdict."""
    if browser and not shutil.which("chromium"):
        return [_unmeasured("Debian's chromium is not installed (sh tests/install_chromium.sh)")]
    if browser:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            return [_unmeasured("Playwright is not installed (pip install -e '.[test]')")]
    found = measure(Path(tempfile.mkdtemp(dir=scratch, prefix="saved-")), package, browser=browser)
    per_step = found["outputs_bytes"] / max(found["steps"], 1)
    return [
        Row(
            "saved_per_step",
            f"{NOTEBOOK} run in JupyterLab (chromium) and saved from the page: the %agent cells' bytes per model step",
            "≤ 1,000 B a step",
            round(per_step),
            "B/step",
            (per_step <= TARGET and found["steps"] > 0) if browser else None,
            {
                **found,
                "method": "the notebook's outputs cleared, run all from the page, saved from the page before any "
                "other cell runs; the %agent cells' outputs as nbformat writes them, over the steps their end "
                "lines report",
            },
            note=f"{found['outputs_bytes']:,} B for {found['steps']} steps"
            + ("" if browser else " (quick mode: saved by nbclient, no browser; no verdict)"),
        )
    ]


def _unmeasured(why: str) -> Row:
    return Row(
        "saved_per_step",
        "a 05-like notebook saved from the browser, per step",
        "≤ 1,000 B a step",
        None,
        "",
        None,
        note=why,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.saved_notebook", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--against", type=Path, help="another checkout of the package, measured after this one"
    )
    args = parser.parse_args(argv)
    packages = {"this": ROOT, **({"against": args.against.resolve()} if args.against else {})}
    for label, package in packages.items():
        with tempfile.TemporaryDirectory(prefix="pseudoclaude-saved-") as tmp:
            for row in saved_rows(Path(tmp), package=package):
                mark = {True: "met", False: "MISSED", None: ""}[row.ok]
                print(f"{label:<8} {row.key:<16} {row.value} {row.unit} ({row.target}) {mark}  {row.note}")
                print(f"{'':<8} {json.dumps(row.detail)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
