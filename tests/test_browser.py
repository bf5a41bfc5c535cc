"""A real browser: JupyterLab on 127.0.0.1, Debian's chromium driven by Playwright.

The quickstart notebook is run from the page, the way a user runs it; the gauge is read
from the DOM while the agent works and after it, and a screenshot is saved. Playwright's
own browser download is not available here, so chromium comes from apt (``.ci/run``
installs it) and is launched through ``executable_path``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


# The notebook's kernel has started and is idle: running cells now cannot be lost.
KERNEL_IDLE = """() => {
  const app = window.jupyterapp;
  const widget = app && app.shell.currentWidget;
  const kernel = widget && widget.sessionContext && widget.sessionContext.session
    && widget.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle';
}"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "lab"
    root.mkdir()
    shutil.copy(ROOT / "notebooks" / "01_quickstart.ipynb", root)
    settings = tmp_path / "lab-settings" / "@jupyterlab"
    (settings / "apputils-extension").mkdir(parents=True)
    (settings / "notebook-extension").mkdir(parents=True)
    # No news or update checks: the machine has no network beyond loopback.
    (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    # Render every cell: by default Lab detaches cells scrolled out of view from the DOM.
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none"})
    )
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(
        os.environ,
        PSEUDOCLAUDE_DEMO_PACE="0.01",  # slow enough to watch the gauge move
        JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "lab-settings"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
    )
    log = (tmp_path / "lab.log").open("wb")  # noqa: SIM115 (closed in the finally below)
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
            f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--allow-root",
            # window.jupyterapp: run commands by id instead of clicking through menus.
            "--LabApp.expose_app_in_browser=True",
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((tmp_path / "lab.log").read_text()[-3000:]) from None
                time.sleep(0.2)
        yield f"{base}/lab/tree/01_quickstart.ipynb?token={token}", root
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_quickstart_in_jupyterlab_shows_a_live_gauge_and_the_timeline(lab, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is needed (apt-get install chromium; .ci/run does it)"
    url, root = lab
    shots = Path(os.environ.get("PSEUDOCLAUDE_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(url)
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        page.wait_for_function(KERNEL_IDLE, timeout=90_000)
        # Not awaited: the command's promise resolves only when every cell has run.
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

        # Watch the gauge while the agent runs: it must move during the one %agent call.
        seen: list[str] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            values = page.eval_on_selector_all(".pc-gauge", "els => els.map(e => e.dataset.estimated)")
            if values and values[0] not in seen:
                seen.append(values[0])
            if page.query_selector("text=✓ done ·"):
                break
            time.sleep(0.05)
        page.wait_for_selector("text=✓ done ·", state="attached", timeout=30_000)
        page.wait_for_selector(".pc-timeline svg", state="attached", timeout=60_000)

        gauge = page.query_selector(".pc-gauge")
        assert gauge is not None
        data = gauge.evaluate("e => ({...e.dataset})")
        assert data["window"] == "50000"
        assert data["spills"] == "1" and data["compactions"] == "1"
        assert 5_000 < int(data["estimated"]) < 17_000  # under the Layer 2 line after the summary
        assert len(seen) >= 2, f"the gauge should update during the run; saw {seen}"

        timeline = page.query_selector(".pc-timeline svg")
        assert timeline is not None
        assert timeline.evaluate("e => e.querySelectorAll('.pc-replace').length") == 1
        assert timeline.evaluate("e => e.querySelectorAll('.pc-item.pc-spill').length") == 1

        gauge.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "jupyterlab-run.png"))
        gauge.screenshot(path=str(shots / "gauge.png"))
        page.query_selector(".pc-timeline").screenshot(path=str(shots / "timeline.png"))
        browser.close()
    assert (root / "work" / "01_quickstart" / "stats.py").is_file()
