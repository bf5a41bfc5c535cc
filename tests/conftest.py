"""Test isolation: no network beyond loopback, no writes to the real home directory.

Every test gets its own PSEUDOCLAUDE_HOME and runs with the request validator in strict
mode (a pairing violation is a bug, so tests raise instead of repairing).
"""

from __future__ import annotations

import functools
import os
import re
import socket
import tempfile
from collections.abc import Iterator
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

pytest_plugins = ("pytester",)  # test_scripted_provider runs a test session of its own

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
    from pseudoclaude_nb import envtrust

    envtrust.forget()  # what an earlier test's workspace .env gave the providers (never os.environ)


# Every scripted provider a test made, for the check after it (pytest_runtest_call below).
SCRIPTED = pytest.StashKey[list]()


@pytest.fixture(autouse=True)
def _scripted_providers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Collect the scripted providers a test makes (the provider's hook is None otherwise)."""
    from pseudoclaude_nb.providers import scripted

    request.node.stash[SCRIPTED] = made = []
    # Each test's scripted provider starts with a cold cache: the system prompt names only the
    # workspace folder (the same "ws" in every test), so one test's prompt would be another's
    # cache read.
    scripted.reset_cache()
    outer, scripted.on_created = scripted.on_created, made.append  # outer: a pytester run's host
    try:
        yield
    finally:
        scripted.on_created = outer


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Fail a passing test that left a scripted turn, summary or memory update unasked (a
    script that runs out fails by itself, with ``ScriptError``), as openai-agents'
    ``assert_complete`` does.

    Only providers that were asked something count: ``%context`` and ``%compact`` make one to
    read the window. A test that stops a run early on purpose (an interrupt, a refusal, a
    breaker) says so with ``@pytest.mark.script_may_remain``.
    """
    result = yield  # a failing test raises here, and its own error is the one reported
    if not item.get_closest_marker("script_may_remain"):
        assert_scripts_played(item.stash.get(SCRIPTED, []))
    return result


def assert_scripts_played(providers: list) -> None:
    """``pytest.fail`` naming each script that was asked something but not played to its end.

    A script is counted once however many providers played it: each run reads its script
    afresh, so a file played by five runs is five providers, and an entry is played if any
    of them asked for it. The demo's fixed script is the product's, not a test's: not counted.
    """
    played: dict[tuple[str, str], dict[str, int]] = {}
    for p in providers:
        if p.name == "demo" or not p.requests:  # never asked: made to read the window
            continue
        # A file is one script however many runs read it; each inline script is its own.
        key = (p.source, repr(p.script) if p.source != "<inline script>" else str(id(p)))
        left = played.setdefault(key, p.unplayed())
        for field in list(left):
            left[field] = min(left[field], p.unplayed().get(field, 0))
    lines = [
        f"  {source}: " + ", ".join(f"{n} {field}" for field, n in left.items() if n) + " left"
        for (source, _), left in played.items()
        if any(left.values())
    ]
    if lines:
        pytest.fail(
            "script not played to its end (trim it, or mark the test "
            "@pytest.mark.script_may_remain if it stops early on purpose):\n" + "\n".join(lines),
            pytrace=False,
        )


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


# Test tiers (docs/development.md): every test gets markers by its file, so a new test needs
# nothing by hand. `pytest -m "not slow and not browser"` is the quick tier.
KERNEL_IMPORT = re.compile(r"^\s*(?:from|import)\s+(?:nbclient|jupyter_client|nbval)\b", re.MULTILINE)
# The longest files (10 s or more on two cores), by --durations where measured (fault_injection
# 144 s, images_e2e 45 s, cli 36 s, demo_strategies 13 s; lifecycle 4 s, mcp_tether 3 s and
# disk_full 2 s are not) or by what they do: notebooks and kernels, the quick bench.
SLOW_FILES = frozenset(
    {
        "test_bench_quick.py",
        "test_cli.py",
        "test_demo_strategies.py",
        "test_fault_injection.py",
        "test_images_e2e.py",
        "test_mcp_kernel.py",
        "test_notebook_kernel.py",
        "test_notebooks.py",
        "test_responses_huge.py",  # issue 43: a 50 MB compaction item over loopback
        "test_saved_pictures.py",  # nbconvert over every shipped notebook
        "test_steer_cells.py",
    }
)


@functools.cache
def _tiers_of(path: Path) -> frozenset[str]:
    if path.name.startswith("test_browser"):
        return frozenset({"browser", "slow"})
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        text = ""
    starts_kernels = (
        path.stem.endswith("_kernel") or path.name == "test_notebooks.py" or KERNEL_IMPORT.search(text)
    )
    tiers = {"kernel" if starts_kernels else "unit"}
    if path.name in SLOW_FILES:
        tiers.add("slow")
    return frozenset(tiers)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for tier in sorted(_tiers_of(Path(str(item.path)))):
            item.add_marker(getattr(pytest.mark, tier))
    # Tests marked ``live`` (a real llama-server, issue 32) run only with PSEUDOCLAUDE_LIVE=1.
    if os.environ.get("PSEUDOCLAUDE_LIVE") == "1":
        return
    live = [item for item in items if item.get_closest_marker("live")]
    if live:
        config.hook.pytest_deselected(items=live)
        items[:] = [item for item in items if not item.get_closest_marker("live")]
