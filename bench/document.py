"""The agent in the open notebook (issue 42), through a real Jupyter server with jupyter-collaboration.

- ``document_read``: ``read_notebook`` of a 1,000-cell notebook, as the tool runs it over the
  live document (the first page, the page at the end, and all 20 pages), median of repeats
  (target ≤ 0.2 s for a call);
- ``document_visible``: a cell the tool inserts, seen in JupyterLab in chromium: from the
  moment the tool is called to the moment the page's DOM holds the new cell (a
  ``MutationObserver``'s ``Date.now()`` against ``time.time()``: one machine, one clock),
  median of repeats (target ≤ 0.5 s). Needs Debian's chromium and Playwright (the test
  extra); without them the row says so.

``python -m bench.document`` prints the rows; ``python -m bench`` runs them as its
``document`` section.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from .common import Row, median_time
from .jupyter import jupyter_server

CELLS = 1_000
INSERTS = 7
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
# Notes (in window.__pcSeen) the time the page first holds a cell whose text contains the marker.
WATCH = """(marker) => {
  window.__pcSeen = window.__pcSeen || {};
  const seen = () => [...document.querySelectorAll('.jp-Cell')].some(c => c.innerText.includes(marker));
  const observer = new MutationObserver(() => {
    if (seen()) { observer.disconnect(); window.__pcSeen[marker] = Date.now(); }
  });
  observer.observe(document.body, {childList: true, subtree: true, characterData: true});
}"""


def _notebook(path: Path, cells: int) -> None:
    """A realistic long notebook: code cells of a few lines with a printed line, a title every 10."""
    nb = nbformat.v4.new_notebook()
    for i in range(cells):
        if i % 10 == 0:
            nb.cells.append(nbformat.v4.new_markdown_cell(f"## Part {i // 10}\nWhat this part does."))
        else:
            source = (
                f"values_{i} = [x * {i} for x in range(10)]\ntotal_{i} = sum(values_{i})\nprint(total_{i})"
            )
            output = nbformat.v4.new_output("stream", name="stdout", text=f"{45 * i}\n")
            nb.cells.append(nbformat.v4.new_code_cell(source, execution_count=i, outputs=[output]))
    nbformat.write(nb, path)


def document_rows(scratch: Path, *, quick: bool = False, repeat: int = 5) -> list[Row]:
    from pseudoclaude_nb.notebook.live import LiveNotebook
    from pseudoclaude_nb.notebook.route import Route, find_route
    from pseudoclaude_nb.tools.document import NotebookTools

    root = scratch / "document"
    root.mkdir(parents=True, exist_ok=True)
    path = root / "long.ipynb"
    _notebook(path, CELLS)
    rows: list[Row] = []
    with jupyter_server(root, app="jupyterlab") as server:
        route = find_route(str(path), server.env())
        assert isinstance(route, Route), route
        live = LiveNotebook(route)
        joined = time.perf_counter()
        live.open()
        joined = time.perf_counter() - joined
        try:
            tools = NotebookTools(live, None, dict)
            first = median_time(lambda: tools.read(None, None), repeat)
            last = median_time(lambda: tools.read(CELLS - 20, None), repeat)

            def every_page() -> None:
                start = 0
                while start < CELLS:
                    tools.read(start, None)
                    start += 50

            whole = median_time(every_page, max(1, repeat // 2))
            worst = max(first, last)
            rows.append(
                Row(
                    "document_read",
                    f"read_notebook of a {CELLS:,}-cell notebook over the live document (the slower of the first "
                    "and the last page; median of repeats)",
                    "≤ 0.2 s",
                    round(worst, 4),
                    "s",
                    worst <= 0.2,
                    {
                        "first_page_s": round(first, 4),
                        "last_page_s": round(last, 4),
                        "all_20_pages_s": round(whole, 3),
                        "join_s": round(joined, 3),
                        "repeat": repeat,
                    },
                )
            )
            rows.append(_visible(server, live, tools, quick=quick))
        finally:
            live.close()
    return rows


def _visible(server, live, tools, *, quick: bool) -> Row:
    what = "a cell insert_cell makes, seen in JupyterLab's page (chromium): tool call to the DOM (median)"
    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        chromium = None
    if chromium is None:
        return Row(
            "document_visible",
            what,
            "≤ 0.5 s",
            None,
            "s",
            None,
            note="not measured: no chromium or Playwright",
        )
    delays: list[float] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{server.url}lab/tree/long.ipynb?token={server.token}")
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
        page.wait_for_timeout(3000)  # the page has synced the document
        tools.read(0, 2)
        for n in range(3 if quick else INSERTS):
            marker = f"inserted_{n}_{time.time_ns()}"
            page.evaluate(WATCH, marker)  # the observer is in place before the call
            called = time.time()
            tools.insert(1, f"{marker} = {n}", "code")
            seen_ms = page.wait_for_function(
                "(m) => window.__pcSeen[m]", arg=marker, timeout=30_000
            ).json_value()
            delays.append(seen_ms / 1000 - called)
        browser.close()
    median = statistics.median(delays)
    return Row(
        "document_visible",
        what,
        "≤ 0.5 s",
        round(median, 4),
        "s",
        median <= 0.5,
        {"delays_s": [round(d, 4) for d in delays]},
    )


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    with tempfile.TemporaryDirectory(prefix="pseudoclaude-document-") as scratch:
        for row in document_rows(Path(scratch), quick=quick, repeat=3 if quick else 5):
            print(f"{row.key}: {row.value} {row.unit} (target {row.target}) {row.detail} {row.note}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
