"""JupyterLab on 127.0.0.1 and Debian's chromium, for the reopen test and the screenshot script.

The same setup as ``tests/test_browser.py`` (its flags and settings): no news or update
checks, every cell rendered (no windowing), ``window.jupyterapp`` exposed.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.test_browser import CHROMIUM_FLAGS, _free_port

__all__ = ["CHROMIUM_FLAGS", "lab_server", "notebook_server", "set_theme"]


def notebook_server(root: Path, scratch: Path, env: dict[str, str] | None = None) -> Any:
    """``lab_server``, but Notebook 7 (``jupyter notebook``)."""
    return lab_server(root, scratch, env, app=("notebook", "JupyterNotebookApp"))


@contextlib.contextmanager
def lab_server(
    root: Path,
    scratch: Path,
    env: dict[str, str] | None = None,
    app: tuple[str, str] = ("jupyterlab", "LabApp"),
) -> Iterator[tuple[str, str]]:
    """Yields (base URL, token) of a Lab (or ``app``'s module and class) serving ``root``; stopped on exit."""
    settings = scratch / "lab-settings" / "@jupyterlab"
    (settings / "apputils-extension").mkdir(parents=True, exist_ok=True)
    (settings / "notebook-extension").mkdir(parents=True, exist_ok=True)
    (settings / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    (settings / "notebook-extension" / "tracker.jupyterlab-settings").write_text(
        json.dumps({"windowingMode": "none"})
    )
    port, token = _free_port(), secrets.token_hex(16)
    lab_env = dict(
        os.environ,
        JUPYTERLAB_SETTINGS_DIR=str(scratch / "lab-settings"),
        # Each server its own workspace: a shared one (under HOME) reopens an earlier test's
        # tabs, and "run all cells" may then run another notebook than the one under test.
        JUPYTERLAB_WORKSPACES_DIR=str(scratch / "lab-workspaces"),
        JUPYTER_RUNTIME_DIR=str(scratch / "runtime"),
        **(env or {}),
    )
    with (scratch / "lab.log").open("wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable, "-m", app[0], "--no-browser", "--ip=127.0.0.1", f"--port={port}",
                f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", "--allow-root",
                f"--{app[1]}.expose_app_in_browser=True",
            ],
            env=lab_env, stdout=log, stderr=subprocess.STDOUT, cwd=root,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2).read()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError((scratch / "lab.log").read_text()[-3000:]) from None
                    time.sleep(0.2)
            yield base, token
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def set_theme(page, name: str, light: bool) -> None:
    page.evaluate(f"() => window.jupyterapp.commands.execute('apputils:change-theme', {{theme: '{name}'}})")
    page.wait_for_function(
        f"() => document.body.dataset.jpThemeLight === '{str(light).lower()}'", timeout=30_000
    )
    page.wait_for_timeout(300)
