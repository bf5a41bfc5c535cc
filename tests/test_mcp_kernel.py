"""A real kernel: MCP servers stop when it shuts down, leaving no process behind: through the
hub's atexit stop, or (Linux) the tether's SIGTERM when the kernel dies before that finishes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from jupyter_client.manager import start_new_kernel

from tests.mcp_support import alive, approve_project, edge, listed, survivors, time_server


def run_code(kc, code: str) -> str:
    out: list[str] = []

    def collect(msg: dict) -> None:
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "display_data":  # %mcp's tables: their text beside the HTML
            out.append(msg["content"]["data"].get("text/plain", "") + "\n")
        elif msg["msg_type"] == "error":
            out.append("\n".join(msg["content"]["traceback"]))

    reply = kc.execute_interactive(code, output_hook=collect, timeout=120)
    assert reply["content"]["status"] == "ok", "".join(out)
    return "".join(out)


def kernel_with_servers(workspace: Path, tmp_path: Path):
    """A kernel running the edge server (it outlives a closed stdin by a minute) and
    mcp-server-time; returns the manager, the client and the servers' pids."""
    (workspace / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"edge": edge("--linger", "60"), "time": time_server()}}), encoding="utf-8"
    )
    approve_project(workspace)
    env = dict(os.environ, IPYTHONDIR=str(tmp_path / "ipython"), JUPYTER_PLATFORM_DIRS="1")
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(workspace))
    run_code(kc, f"%load_ext pseudoclaude_nb\n%config PseudoClaude.workspace = {str(workspace)!r}")
    listing = run_code(kc, "%mcp start")
    assert listed(listing, "edge", "stdio", "running")
    assert listed(listing, "time", "stdio", "running")
    pids = json.loads(
        run_code(
            kc,
            "import json, psutil\n"
            "print(json.dumps([p.pid for p in psutil.Process().children(recursive=True)]))",
        )
    )
    assert len(alive(set(pids))) >= 2
    return km, kc, set(pids)


def test_kernel_shutdown_stops_the_servers(workspace: Path, tmp_path: Path) -> None:
    km, kc, pids = kernel_with_servers(workspace, tmp_path)
    kc.stop_channels()
    # Jupyter's own shutdown: SIGTERM 2.5 s in, which can land while the hub is still giving
    # the edge server its grace period; the tether ends the server then.
    km.shutdown_kernel(now=False)
    assert not survivors(pids, within=10)


def test_a_killed_kernel_leaves_no_server(workspace: Path, tmp_path: Path) -> None:
    km, kc, pids = kernel_with_servers(workspace, tmp_path)
    kc.stop_channels()
    try:
        os.kill(km.provisioner.pid, signal.SIGKILL)  # no exit handler runs
        assert not survivors(pids, within=10), "a server outlived its killed kernel"
    finally:
        km.shutdown_kernel(now=True)


def test_interpreter_exit_stops_the_servers(workspace: Path) -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from pseudoclaude_nb.mcp import McpHub, load_config\n"
        "ws = Path(sys.argv[1])\n"
        f"config = load_config(ws, {{'edge': {edge('--linger', '60')!r}}})\n"
        "hub = McpHub()\n"
        "assert hub.configure(config, ws) == []\n"
        "(tool,) = [t for t in hub.tools() if t.remote_name == 'pid']\n"
        "print(tool.handler(tool.args()))\n"
        # no hub.close(): the interpreter's exit must do it
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(workspace)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    pid = int(proc.stdout.strip())
    assert not alive({pid})
