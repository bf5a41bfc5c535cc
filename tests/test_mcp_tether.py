"""The tether: a stdio server started through it becomes the server (same pid, its own argv[0])
and gets SIGTERM when the process that started it dies, however it dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pseudoclaude_nb.mcp import tether
from tests.mcp_support import alive, survivors

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the tether is Linux's PR_SET_PDEATHSIG")

ENV = dict(os.environ)


def test_the_server_is_exec_d_with_its_own_argv0(tmp_path: Path) -> None:
    command, args = tether.command("sh", ["-c", 'echo "$0 $$ $PPID"'], ENV, str(tmp_path))
    assert command == sys.executable and args[:3] == ["-I", "-S", tether.__file__]
    proc = subprocess.Popen([command, *args], stdout=subprocess.PIPE, text=True)
    out, _ = proc.communicate(timeout=30)
    # argv[0] is what the configuration said; the pid is the one the SDK started; the parent us.
    assert out.split() == ["sh", str(proc.pid), str(os.getpid())]


def test_a_relative_command_resolves_against_the_server_s_cwd(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "serve"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\necho ran\n", encoding="utf-8")
    script.chmod(0o755)
    command, args = tether.command("bin/serve", [], ENV, str(tmp_path))
    assert args[4:] == [str(script), "bin/serve"]
    done = subprocess.run([command, *args], capture_output=True, text=True, timeout=30)
    assert done.stdout == "ran\n"


def test_a_missing_or_unrunnable_command_fails_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no-such-mcp-server-xyz"):
        tether.command("no-such-mcp-server-xyz", [], ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="nothing/here"):
        tether.command("./nothing/here", [], ENV, str(tmp_path))
    (tmp_path / "plain").write_text("not a program\n", encoding="utf-8")
    with pytest.raises(PermissionError, match="plain"):
        tether.command("./plain", [], ENV, str(tmp_path))
    # The server's PATH decides, not the kernel's.
    with pytest.raises(FileNotFoundError, match="'sh'"):
        tether.command("sh", [], {"PATH": str(tmp_path)}, str(tmp_path))


def test_a_server_started_by_a_process_that_is_killed_gets_sigterm(tmp_path: Path) -> None:
    # The starter is a process of its own, so the test can SIGKILL it: no exit handler runs.
    starter = (
        "import subprocess, sys, time\n"
        "from pseudoclaude_nb.mcp import tether\n"
        "command, args = tether.command(sys.executable, ['-c', 'import time; time.sleep(120)'], "
        "dict(__import__('os').environ), '.')\n"
        "server = subprocess.Popen([command, *args], start_new_session=True)\n"
        "print(server.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", starter], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        assert parent.stdout is not None
        server = int(parent.stdout.readline())
        deadline = time.monotonic() + 30
        while psutil.Process(server).cmdline()[:2] != [sys.executable, "-c"]:  # exec'd: armed
            assert time.monotonic() < deadline, "the tether never became the server"
            time.sleep(0.02)
        assert alive({server})
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
        assert not survivors({server}, within=10), "the server outlived the process that started it"
    finally:
        parent.kill()
        parent.wait(30)


def test_a_tether_whose_parent_is_already_gone_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    command, args = tether.command("touch", [str(marker)], ENV, str(tmp_path))
    args[3] = str(1 if os.getpid() != 1 else 2)  # a parent pid that is not ours
    done = subprocess.run([command, *args], capture_output=True, timeout=30)
    assert done.returncode == 1 and not marker.exists()
