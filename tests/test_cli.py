"""``python -m pseudoclaude_nb demo``: the quickstart's main job, as a user runs it."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from pseudoclaude_nb.session import load_session
from tests.demo_support import run_demo


def test_demo_command_runs_the_demo_and_says_where_the_log_is(tmp_path: Path) -> None:
    env = dict(os.environ, IPYTHONDIR=str(tmp_path / "ipython"))
    # As the README runs it: .venv/bin/python with the venv not activated (its bin/ off PATH).
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != bindir)
    proc = run_demo(tmp_path, "--workspace", "demo-ws", env=env)
    out = proc.stdout
    assert "→ edit_file(" in out and "✓ done · 11 steps" in out
    assert "\033[" not in out, "piped output has no terminal escape codes"
    assert "%sessions resume --last" in out  # how to go on in a notebook
    # The JupyterLab command it names works as printed, though the venv is not activated.
    (start,) = [line for line in out.splitlines() if " lab " in line and "then, in a new notebook" in line]
    command = shlex.split(start.split(" with  ")[1].split("  then")[0])
    assert command[1:] == ["lab", str(tmp_path / "demo-ws")]
    version = subprocess.run(
        [command[0], "lab", "--version"], env=env, capture_output=True, text=True, timeout=60
    )
    assert version.returncode == 0 and version.stdout.strip()[:1].isdigit(), version.stderr[-2000:]
    log_line = next(line for line in out.splitlines() if line.startswith("session log: "))
    log = Path(log_line.removeprefix("session log: "))
    assert log.is_file() and log.is_relative_to(tmp_path / "demo-ws")
    loaded = load_session(log)
    assert loaded.problems() == [] and loaded.messages[-1].role == "assistant"
    # The bug was really fixed: the agent's final test run passed.
    final_tests = [
        m.tool_result.content
        for m in loaded.messages
        if m.tool_result and "Ran 4 tests" in m.tool_result.content
    ]
    assert final_tests and final_tests[-1].rstrip().endswith("OK")


def test_the_demo_writes_nothing_in_the_home_folder(tmp_path: Path) -> None:
    """A user's first command: no IPython profile or history of its own left in ~ (the tests' HOME
    is a temporary folder, and IPYTHONDIR is not set here, as on a fresh machine)."""
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "IPYTHONDIR"}
    run_demo(tmp_path, "--workspace", "ws", "--quiet", env={**env, "HOME": str(home)})
    assert (tmp_path / "ws" / ".pseudoclaude").is_dir()
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == []


def test_demo_command_rejects_unknown_subcommands(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pseudoclaude_nb", "nonsense"], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_demo_help_names_every_strategy_it_takes(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pseudoclaude_nb", "demo", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    said = " ".join(proc.stdout.split())
    assert proc.returncode == 0 and "{compact,rollover,api}" in said
    assert "rollover (a handoff to a fresh window) or api (the provider's own compaction)" in said


def test_a_demo_workspace_that_cannot_be_a_folder_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "pseudoclaude_nb", "demo", "--workspace", "a-file"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "--workspace a-file: cannot make it a folder (File exists); name another" in proc.stderr
