"""Real MCP servers for tests: the PyPI ones (time, git) and tests/fakes/mcp_server.py.

Helpers return ``mcpServers`` entries (what a user writes in ``.mcp.json``); ``http_edge``
runs the edge server over streamable HTTP on 127.0.0.1 for the length of a ``with``.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

EDGE = str(Path(__file__).parent / "fakes" / "mcp_server.py")


def approve_project(workspace: Path) -> None:
    """Approve every server of ``workspace``'s ``.mcp.json`` as written (what ``%mcp approve`` records)."""
    from pseudoclaude_nb.mcp import load_config
    from pseudoclaude_nb.mcp.approval import Approvals

    for server in load_config(workspace).servers.values():
        Approvals().approve(workspace, server)


def edge(*args: str, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [EDGE, *args], **extra}


def time_server(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"], **extra}


def git_server(repo: Path, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", str(repo)], **extra}


def git_repo(path: Path) -> Path:
    """A repository with one commit and one untracked file."""
    path.mkdir(parents=True, exist_ok=True)

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "Test")
    (path / "README.md").write_text("hello\n", encoding="utf-8")
    git("add", "README.md")
    git("commit", "-q", "-m", "first commit")
    (path / "notes.txt").write_text("draft\n", encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def http_edge() -> Iterator[str]:
    """The edge server on streamable HTTP; yields its URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, EDGE, "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the HTTP edge server did not come up") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def survivors(pids: set[int], *, within: float) -> set[int]:
    """Those of ``pids`` still alive after waiting up to ``within`` seconds for them to go."""
    deadline = time.monotonic() + within
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive(pids)


def children() -> set[int]:
    """Pids of this process's live descendants."""
    out = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                out.add(child.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.add(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def listed(listing: str, *cells: str) -> bool:
    """Whether ``%mcp``'s text holds a table row with these cells in order (columns padded by
    two spaces or more)."""
    return re.search(r"(^|\n) *" + r" {2,}".join(re.escape(c) for c in cells), listing) is not None
