"""A real Jupyter server on 127.0.0.1 with (or without) the collaboration extension, for the
document bench and the live-document tests: started in a folder, its runtime folder its own.

``jupyter_server(root)`` serves ``root`` with ``jupyter_server`` (no page); ``app="jupyterlab"``
serves JupyterLab, its news and update checks off and every cell rendered (no windowing), with
``window.jupyterapp`` exposed for a browser to drive."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Server:
    url: str
    token: str
    root: Path
    runtime: Path
    pid: int

    def env(self) -> dict[str, str]:
        """What a kernel this server started would find in its environment."""
        return {"JPY_PARENT_PID": str(self.pid), "JUPYTER_RUNTIME_DIR": str(self.runtime)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def jupyter_server(
    root: Path, *, collaboration: bool = True, app: str = "jupyter_server"
) -> Iterator[Server]:
    runtime = root.parent / f"{root.name}-runtime"
    port, token = _free_port(), secrets.token_hex(16)
    args = [
        sys.executable,
        "-m",
        app,
        "--no-browser",
        "--ip=127.0.0.1",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--allow-root",
    ]
    if not collaboration:
        args.append("--ServerApp.jpserver_extensions=jupyter_server_ydoc=False")
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(runtime))
    if app == "jupyterlab":
        args.append("--LabApp.expose_app_in_browser=True")
        settings = root.parent / f"{root.name}-lab-settings"
        for extension, name, value in (
            ("apputils-extension", "notification", {"fetchNews": "false", "checkForUpdates": False}),
            ("notebook-extension", "tracker", {"windowingMode": "none"}),
        ):
            (settings / "@jupyterlab" / extension).mkdir(parents=True, exist_ok=True)
            (settings / "@jupyterlab" / extension / f"{name}.jupyterlab-settings").write_text(
                json.dumps(value)
            )
        env.update(
            JUPYTERLAB_SETTINGS_DIR=str(settings),
            JUPYTERLAB_WORKSPACES_DIR=str(root.parent / f"{root.name}-lab-workspaces"),
        )
    log = (root.parent / f"{root.name}-server.log").open("wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while not (runtime / f"jpserver-{proc.pid}.json").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((root.parent / f"{root.name}-server.log").read_text()[-3000:])
            time.sleep(0.1)
        while True:
            try:
                urllib.request.urlopen(f"{url}api/status?token={token}", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield Server(url, token, root, runtime, proc.pid)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
