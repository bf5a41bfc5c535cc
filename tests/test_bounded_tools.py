"""Bounded tools: run_python output, SystemExit, grep and glob patterns, and nothing bash started survives."""

from __future__ import annotations

import os
import resource
import time
import tracemalloc
from pathlib import Path

import pytest

from pseudoclaude_nb.magics.python_exec import python_executor
from pseudoclaude_nb.messages import ToolCall, ToolResult
from pseudoclaude_nb.tools import Permissions, build_tools, shell


class FakeShell:
    def __init__(self) -> None:
        self.user_ns: dict = {}


@pytest.fixture
def run_python():
    return python_executor(FakeShell())


@pytest.fixture
def run(tmp_path: Path):
    registry = build_tools(tmp_path)

    def run(name: str, **arguments) -> ToolResult:
        return registry.run(ToolCall(id="c", name=name, arguments=arguments), Permissions("auto"))

    return run


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def _gone(pid: int, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


# --- run_python -------------------------------------------------------------------------------------


def test_a_print_flood_stays_bounded_in_memory(run_python, monkeypatch):
    monkeypatch.setattr(shell, "HEAD_BYTES", 1 << 20)
    monkeypatch.setattr(shell, "TAIL_BYTES", 1 << 20)
    tracemalloc.start()
    try:
        text = run_python("for i in range(200_000):\n    print('y' * 1000)")  # 200 MB printed
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 << 20, f"peak {peak:,} bytes"
    assert "bytes omitted" in text and len(text.encode()) < 3 << 20
    assert text.startswith("y" * 1000)


def test_one_huge_print_is_cut_too(run_python, monkeypatch):
    monkeypatch.setattr(shell, "HEAD_BYTES", 1 << 20)
    monkeypatch.setattr(shell, "TAIL_BYTES", 1 << 20)
    text = run_python("print('x' * 30_000_000)")
    assert len(text.encode()) < 3 << 20 and "bytes omitted" in text


def test_system_exit_and_keyboard_interrupt_from_code_become_results(run_python):
    assert "SystemExit" in run_python("print('before'); raise SystemExit(3)")
    assert "before" in run_python("print('before'); raise SystemExit(3)")
    assert "exit with 3" in run_python("import sys; sys.exit(3)")
    text = run_python("raise KeyboardInterrupt")
    assert "KeyboardInterrupt" in text and "not by an interrupt" in text


def test_a_real_interrupt_still_interrupts(run_python):
    import signal
    import threading

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("needs Python's default SIGINT handler")
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_python("import time\nwhile True:\n    time.sleep(0.01)")
    finally:
        timer.cancel()


def test_secret_split_by_the_cut_is_never_kept(run_python, monkeypatch):
    monkeypatch.setattr(shell, "HEAD_BYTES", 2000)
    monkeypatch.setattr(shell, "TAIL_BYTES", 2000)
    monkeypatch.setattr(shell, "REDACT_MARGIN", 200)
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    for at in range(1940, 2060, 7):
        code = f"print('a' * {at} + 'AWS_SECRET_ACCESS_KEY=' + {secret!r} + '\\n' + 'b' * 10000)"
        text = run_python(code)
        assert "bytes omitted" in text
        assert secret[:12] not in text and secret[-12:] not in text, at
        code = f"print('a' * 10000 + 'AWS_SECRET_ACCESS_KEY=' + {secret!r} + '\\n' + 'b' * {at})"
        text = run_python(code)
        assert secret[:12] not in text and secret[-12:] not in text, at


# --- bash: nothing survives ------------------------------------------------------------------------


def test_background_and_setsid_children_do_not_survive(run, tmp_path):
    result = run(
        "bash",
        command="sleep 60 & echo $! > bg.pid; setsid sleep 60 & echo $! > sid.pid; "
        "(setsid bash -c 'sleep 60 & echo $! > grand.pid; wait' &) ; sleep 0.3; echo started",
        timeout=30,
    )
    assert "started" in result.content
    for name in ("bg.pid", "sid.pid", "grand.pid"):
        pid = int((tmp_path / name).read_text())
        assert _gone(pid), f"{name} ({pid}) survived the call"


def test_setsid_child_is_killed_on_timeout(run, tmp_path):
    result = run("bash", command="setsid sleep 60 & echo $! > sid.pid; sleep 30", timeout=1)
    assert result.is_error and "timed out" in result.content
    assert _gone(int((tmp_path / "sid.pid").read_text()))


def test_a_flood_from_bash_keeps_the_kernel_bounded(run, monkeypatch):
    monkeypatch.setattr(shell, "HEAD_BYTES", 1 << 20)
    monkeypatch.setattr(shell, "TAIL_BYTES", 1 << 20)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = run("bash", command="yes | head -c 300000000", timeout=60)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before  # KiB
    assert "bytes omitted" in result.content
    assert grown < 64 * 1024, f"the kernel grew {grown} KiB"


# --- grep and glob ---------------------------------------------------------------------------------


def test_catastrophic_grep_pattern_stops_with_advice(run, tmp_path):
    (tmp_path / "a.txt").write_text("a" * 5000 + "!\n")
    started = time.monotonic()
    result = run("grep", pattern=r"(\w+\s?)+$", path=".")
    assert time.monotonic() - started < 30
    assert result.is_error and "took too long" in result.content


def test_pathological_glob_is_bounded(run, tmp_path):
    (tmp_path / ("a" * 200)).write_text("x")
    started = time.monotonic()
    result = run("list_files", pattern="*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b")
    assert time.monotonic() - started < 10
    assert result.is_error or "no files" in result.content
