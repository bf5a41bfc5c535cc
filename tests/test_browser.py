"""A real browser: JupyterLab on 127.0.0.1, Debian's chromium driven by Playwright.

The quickstart notebook is run from the page, the way a user runs it, with one more cell at
the end: a scripted run whose tool sleeps 3 seconds. The test reads the DOM while the agent
works and after it: the gauge moves; the running tool's line is on screen while it runs;
the finished gauge's headline (text) has a contrast of at least 4.5:1 computed in the page
(WCAG relative luminance of getComputedStyle colours), and its picture's grey text 4.2:1 and
red peak tick 3:1 against what is behind the picture, in the light and the dark Lab theme; the demo's summary keeps the gauge at "compacting…" long enough for the polling
page to see it, and after it the gauge's peak tick and "peak ~N" label stay on screen with
enough contrast in both themes (3:1 for the tick, a non-text mark; 4.5:1 for its label);
the notebook, saved from the page, keeps the gauge's final state as text.
Playwright's own browser download is not available here, so chromium comes from apt
(``tests/install_chromium.sh``) and is launched through ``executable_path``. Without it the
test is skipped with the reason, except in CI, where it fails.
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


# Contrast of each element matching the selector against what is behind it, as WCAG
# defines it: relative luminance of the computed colours, translucent layers composited.
CONTRAST = """(selector) => {
  const parse = (c) => {
    const m = c && c.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const over = (top, bottom) => ({
    r: top.r * top.a + bottom.r * (1 - top.a), g: top.g * top.a + bottom.g * (1 - top.a),
    b: top.b * top.a + bottom.b * (1 - top.a), a: 1,
  });
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
    }
    let bg = {r: 255, g: 255, b: 255, a: 1};
    for (const layer of layers.reverse()) bg = over(layer, bg);
    return bg;
  };
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
  };
  return [...document.querySelectorAll(selector)].map((el) => {
    const style = getComputedStyle(el);
    const bg = background(el);
    const fg = over(parse(el instanceof SVGElement ? style.fill : style.color), bg);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    return {text: el.textContent, ratio: (hi + 0.05) / (lo + 0.05), fg: style.fill || style.color};
  });
}"""

# The colour of a picture's text (widgets/picture.py) and of its error marks (theme.ERROR's fallback).
PICTURE_GREY, PICTURE_RED = (0x79, 0x79, 0x79), (0xD3, 0x2F, 0x2F)

# What is behind the element: its ancestors' background colours, composited (as CONTRAST does).
BEHIND = """(selector) => {
  const parse = (c) => {
    const m = c && c.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const layers = [];
  for (let e = document.querySelector(selector); e; e = e.parentElement) {
    const c = parse(getComputedStyle(e).backgroundColor);
    if (c && c.a > 0) { layers.push(c); if (c.a >= 1) break; }
  }
  let bg = {r: 255, g: 255, b: 255};
  for (const l of layers.reverse()) bg = {r: l.r * l.a + bg.r * (1 - l.a), g: l.g * l.a + bg.g * (1 - l.a), b: l.b * l.a + bg.b * (1 - l.a)};
  return [bg.r, bg.g, bg.b];
}"""


def _ratio(a: tuple[int, ...] | list[float], b: tuple[int, ...] | list[float]) -> float:
    """WCAG contrast of two sRGB colours."""

    def lum(c: tuple[int, ...] | list[float]) -> float:
        f = [v / 255 for v in c]
        f = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in f]
        return 0.2126 * f[0] + 0.7152 * f[1] + 0.0722 * f[2]

    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _drawing(img) -> str:
    """The SVG a saved picture (an ``<img>`` with a data URI) draws."""
    from tests.picture_support import drawing

    assert img is not None, "a picture"
    return drawing(img.get_attribute("src"))


SLOW_SCRIPT = {
    "model": "teaching-model",
    "turns": [
        {
            "text": "Waiting three seconds.",
            "tool_calls": [{"name": "bash", "arguments": {"command": "sleep 3"}}],
        },
        {"text": "Done waiting."},
    ],
}


RUN_LAST_CELL = """() => {
  const app = window.jupyterapp;
  const notebook = app.shell.currentWidget.content;
  notebook.activeCellIndex = notebook.widgets.length - 1;
  app.commands.execute('notebook:run-cell');
}"""


def _browser_or_skip() -> str:
    """Debian's chromium and Playwright, or a skip with the reason (a failure in CI)."""
    chromium = shutil.which("chromium")
    why = None
    if not chromium:
        why = "Debian's chromium is not installed (sh tests/install_chromium.sh installs it as root)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            why = "playwright is not installed (pip install -e '.[test]')"
    if why is None:
        return str(chromium)
    if os.environ.get("CI"):
        pytest.fail(f"the browser test must run in CI: {why}")
    pytest.skip(why)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "lab"
    root.mkdir()
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / "01_quickstart.ipynb", as_version=4)
    nb.cells.append(
        nbformat.v4.new_code_cell(f"_ = Path('slow.json').write_text({json.dumps(json.dumps(SLOW_SCRIPT))})")
    )
    nb.cells.append(
        nbformat.v4.new_code_cell(
            '%agent --new --provider scripted --script slow.json --mode auto "wait a bit"'
        )
    )
    nbformat.write(nb, root / "01_quickstart.ipynb")
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
        # Each server its own workspace: a shared one (under HOME) reopens an earlier test's
        # tabs, and "run all cells" may then run another notebook than the one under test.
        JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "lab-workspaces"),
        JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
    )
    log = (tmp_path / "lab.log").open("wb")  # noqa: SIM115 (closed in the finally below)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--allow-root",
            # window.jupyterapp: run commands by id instead of clicking through menus.
            "--LabApp.expose_app_in_browser=True",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=root,
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


def _contrast(page, selector: str) -> list[dict]:
    found = page.evaluate(CONTRAST, selector)
    assert found, f"nothing matches {selector}"
    return found


def _set_theme(page, name: str, light: bool) -> None:
    page.evaluate(f"() => window.jupyterapp.commands.execute('apputils:change-theme', {{theme: '{name}'}})")
    page.wait_for_function(
        f"() => document.body.dataset.jpThemeLight === '{str(light).lower()}'", timeout=30_000
    )
    page.wait_for_timeout(300)  # the theme's stylesheet applies after the attribute changes


def test_quickstart_in_jupyterlab_shows_a_live_gauge_and_the_timeline(lab, tmp_path: Path) -> None:
    chromium = _browser_or_skip()
    from playwright.sync_api import sync_playwright

    url, root = lab
    shots = Path(os.environ.get("PSEUDOCLAUDE_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(url)
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        page.wait_for_function(KERNEL_IDLE, timeout=90_000)
        _set_theme(page, "JupyterLab Light", True)
        # Not awaited: the command's promise resolves only when every cell has run.
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")

        # Watch the gauge while the agent runs: it must move during the one %agent call.
        seen: list[str] = []
        statuses: set[str] = set()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            values = page.eval_on_selector_all(
                ".pc-gauge", "els => els.map(e => [e.dataset.estimated, e.dataset.status])"
            )
            if values and values[0][0] not in seen:
                seen.append(values[0][0])
            if values:
                statuses.add(values[0][1])
            if page.query_selector("text=✓ done ·"):
                break
            time.sleep(0.05)
        page.wait_for_selector("text=✓ done ·", state="attached", timeout=30_000)
        page.wait_for_selector("text=Done waiting.", state="attached", timeout=60_000)
        page.wait_for_function(KERNEL_IDLE, timeout=30_000)

        # The last cell's tool sleeps 3 s: its line is on screen, marked running, meanwhile.
        # (Run again on its own: during run-all the page may still be drawing earlier outputs.)
        page.evaluate(RUN_LAST_CELL)
        running = page.wait_for_selector(".pc-tool-running", state="attached", timeout=60_000)
        running.scroll_into_view_if_needed()
        assert running.is_visible()
        assert "bash('sleep 3')" in running.inner_text() and "running" in running.inner_text()
        first = time.monotonic()
        page.wait_for_selector(".pc-tool-running", state="detached", timeout=30_000)
        shown = time.monotonic() - first
        assert shown > 1.5, f"the running line should be there while the tool runs; it was for {shown:.1f} s"
        page.wait_for_selector("text=Done waiting.", state="attached", timeout=30_000)
        assert page.query_selector(".pc-tool-running") is None  # replaced in place by the outcome
        page.wait_for_function(KERNEL_IDLE, timeout=30_000)
        page.wait_for_selector(".pc-timeline", state="attached", timeout=60_000)

        gauge = page.query_selector(".pc-gauge")
        assert gauge is not None
        data = gauge.evaluate("e => ({...e.dataset})")
        assert data["window"] == "50000"
        assert data["spills"] == "1" and data["compactions"] == "1"
        assert 5_000 < int(data["estimated"]) < 17_000  # under the Layer 2 line after the summary
        assert len(seen) >= 2, f"the gauge should update during the run; saw {seen}"
        # The demo's summary takes over a second: a page polling every 50 ms sees it.
        assert "compacting…" in statuses, statuses
        # After the drop, the gauge still marks how high the run went: over the line. A finished
        # gauge is its saved form: the headline as text, the bar as a picture (issue 44).
        assert int(data["peak"]) > 17_000 > int(data["estimated"]), data
        drawn = _drawing(gauge.query_selector("img.pc-gauge-picture"))
        assert 'class="pc-gauge-peak"' in drawn and f">peak ~{int(data['peak']):,}</text>" in drawn
        assert (
            'fill="#d32f2f"' in drawn.split('class="pc-gauge-peak"')[1].split("/>")[0]
        )  # red (the error colour's own value: no theme reaches an image): it crossed
        assert gauge.query_selector("img.pc-gauge-picture").is_visible()

        timeline = _drawing(page.query_selector(".pc-timeline img.pc-picture"))
        assert timeline.count('class="pc-replace"') == 1
        assert timeline.count("pc-item pc-spill") == 1

        # The live gauge stays in view while the end of its long output is on screen.
        page.query_selector("text=✓ done · 11 steps").scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        place = gauge.evaluate(
            """e => { const r = e.getBoundingClientRect();
                      const area = e.closest('.jp-OutputArea').getBoundingClientRect();
                      return {top: r.top, bottom: r.bottom, area: area.height, view: window.innerHeight}; }"""
        )
        assert place["area"] > place["view"], place  # the output is taller than the window
        assert place["top"] >= 0 and place["bottom"] <= place["view"], place

        # Readable in both Lab themes: computed colours, not screenshots. The headline is text in
        # the theme's colour; a picture's text is its own grey and its peak tick red, measured
        # against the page behind the picture (an image cannot follow the theme: 4.3:1 on
        # Lab's white and dark backgrounds is the most one grey can have on both).
        for theme, light in (("JupyterLab Light", True), ("JupyterLab Dark", False)):
            _set_theme(page, theme, light)
            low = [c for c in _contrast(page, ".pc-gauge-head") if c["ratio"] < 4.5]
            assert not low, (theme, low)
            behind = page.evaluate(BEHIND, ".pc-gauge-picture")
            assert _ratio(PICTURE_GREY, behind) >= 4.2, (theme, behind)
            assert _ratio(PICTURE_RED, behind) >= 3, (theme, behind)
            if not light:
                gauge.scroll_into_view_if_needed()
                page.screenshot(path=str(shots / "jupyterlab-dark.png"))
        _set_theme(page, "JupyterLab Light", True)

        gauge.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "jupyterlab-run.png"))
        gauge.screenshot(path=str(shots / "gauge.png"))
        page.query_selector(".pc-timeline").screenshot(path=str(shots / "timeline.png"))

        # Saved from the page, the notebook keeps the gauge's final state as text/plain.
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function(
            "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000
        )
        browser.close()
    saved = json.loads((root / "01_quickstart.ipynb").read_text())
    agent_cell = next(c for c in saved["cells"] if "".join(c["source"]).startswith("%agent --provider demo"))
    texts = ["".join(o.get("data", {}).get("text/plain", "")) for o in agent_cell["outputs"]]
    (gauge_text,) = [t for t in texts if t.startswith("context ")]
    assert (
        f"~{int(data['estimated']):,} / 50,000" in gauge_text and f"peak ~{int(data['peak']):,}" in gauge_text
    )
    assert "waiting for the first request" not in json.dumps(saved)
    assert (root / "work" / "01_quickstart" / "stats.py").is_file()
