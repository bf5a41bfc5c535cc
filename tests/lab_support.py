"""JupyterLab (or Notebook 7) on 127.0.0.1 and Debian's chromium, for the browser tests and the
screenshot script: ``bench.jupyter``'s server (no news or update checks, every cell rendered,
``window.jupyterapp`` exposed) and ``tests/test_browser.py``'s chromium flags.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.jupyter import jupyter_server
from tests.test_browser import CHROMIUM_FLAGS

__all__ = ["CHROMIUM_FLAGS", "lab_server", "notebook_server", "set_theme"]


def notebook_server(root: Path, scratch: Path, env: dict[str, str] | None = None) -> Any:
    """``lab_server``, but Notebook 7 (``jupyter notebook``)."""
    return lab_server(root, scratch, env, app="notebook")


@contextlib.contextmanager
def lab_server(
    root: Path, scratch: Path, env: dict[str, str] | None = None, app: str = "jupyterlab"
) -> Iterator[tuple[str, str]]:
    """Yields (base URL, token) of a Lab (or Notebook 7) serving ``root``; stopped on exit;
    its own files (settings, runtime folder, log) in ``scratch``."""
    with jupyter_server(root, app=app, env=env, scratch=scratch) as server:
        yield server.url.rstrip("/"), server.token


def set_theme(page, name: str, light: bool) -> None:
    page.evaluate(f"() => window.jupyterapp.commands.execute('apputils:change-theme', {{theme: '{name}'}})")
    page.wait_for_function(
        f"() => document.body.dataset.jpThemeLight === '{str(light).lower()}'", timeout=30_000
    )
    page.wait_for_timeout(300)
