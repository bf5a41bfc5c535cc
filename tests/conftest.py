"""Test isolation: no network beyond loopback, no writes to the real home directory.

Every test gets its own PSEUDOCLAUDE_HOME and runs with the request validator in strict
mode (a pairing violation is a bug, so tests raise instead of repairing).
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings

# CI must not fail on an example no one has seen before a submission: there, the property
# tests replay the same examples every run (locally they keep exploring).
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

# Before IPython or Jupyter is imported anywhere: nothing may write to the real home
# directory (IPython's profile, Jupyter's runtime files of the kernels the tests start).
_HOME = tempfile.mkdtemp(prefix="pc-test-home-")
os.environ["HOME"] = _HOME
os.environ["IPYTHONDIR"] = os.path.join(_HOME, ".ipython")
os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(_HOME, "jupyter-runtime")
os.environ["PSEUDOCLAUDE_DEMO_PACE"] = "0"
os.environ["PSEUDOCLAUDE_STRICT"] = "1"

_real_connect = socket.socket.connect


def _loopback_only(self: socket.socket, address: object) -> object:
    host = address[0] if isinstance(address, tuple) else address
    if self.family in (socket.AF_INET, socket.AF_INET6) and host not in (
        "127.0.0.1",
        "::1",
        "localhost",
    ):
        raise OSError(f"tests may only connect to 127.0.0.1, not {host!r}")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("pc-home")
    monkeypatch.setenv("PSEUDOCLAUDE_HOME", str(home))
    monkeypatch.setattr(socket.socket, "connect", _loopback_only)
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh workspace that is also the working directory."""
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.chdir(ws)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    return ws


@pytest.fixture
def ip(workspace: Path):
    """The in-process IPython shell with the extension loaded, working in ``workspace``."""
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    from pseudoclaude_nb.magics import current_agent

    shell = start_ipython() or get_ipython()  # the global shell starts only once
    shell.config.pop("PseudoClaude", None)  # %config in one test must not leak into the next
    shell.run_line_magic("load_ext", "pseudoclaude_nb")
    current_agent(shell).settings.workspace = str(workspace)
    yield shell
    shell.run_line_magic("unload_ext", "pseudoclaude_nb")
    shell.config.pop("PseudoClaude", None)


@pytest.fixture
def agents():
    """Agents made by a test are closed after it (their writer locks released)."""
    made: list = []
    yield made
    for agent in made:
        agent.close()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``live`` (a real llama-server, issue 32) run only with PSEUDOCLAUDE_LIVE=1."""
    if os.environ.get("PSEUDOCLAUDE_LIVE") == "1":
        return
    live = [item for item in items if item.get_closest_marker("live")]
    if live:
        config.hook.pytest_deselected(items=live)
        items[:] = [item for item in items if not item.get_closest_marker("live")]
