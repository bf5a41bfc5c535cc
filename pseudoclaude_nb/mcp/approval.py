"""Which project MCP servers the person approved: ``$PSEUDOCLAUDE_HOME/mcp-approvals.json``.

A workspace's ``.mcp.json`` is untrusted input (a cloned repository), so its servers start
only once the person approved that exact server (SPEC §19). An approval is keyed by the
resolved workspace and the server's name, and holds the digest of the entry as written
(before ``${VAR}`` expansion) and the variable names it may take from the environment: a
changed entry, another workspace or a new variable is not approved and is asked again.

It reads and writes that one file (``safeio``: temp + rename, no link followed) and
words the question; it starts nothing and never asks (the agent asks, the hub checks).
A file that cannot be read or has the wrong shape approves nothing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from .. import safeio
from ..errors import UnsafePathError
from ..memory.store import pseudoclaude_home
from ..textsafe import printable
from .config import PROJECT_FILE, ServerConfig, secret_looking

FILE = "mcp-approvals.json"
VERSION = 1
_LIMIT = 4 << 20  # bytes: thousands of approvals; a bigger file is not ours


def workspace_key(workspace: str | Path) -> str:
    return str(Path(workspace).resolve())


class Approvals:
    """The approvals file (its place read on every call: tests move ``$PSEUDOCLAUDE_HOME``)."""

    @property
    def path(self) -> Path:
        return pseudoclaude_home() / FILE

    def is_approved(self, workspace: str | Path, server: ServerConfig) -> bool:
        """True for a server that needs no approval (the user's own) or is approved as it is."""
        if not server.project:
            return True
        record = self.get(workspace, server.name)
        return (
            record is not None
            and record.get("digest") == server.digest
            and set(server.variables) <= set(record.get("variables", ()))
        )

    def get(self, workspace: str | Path, name: str) -> dict[str, Any] | None:
        record = self._load().get(workspace_key(workspace), {}).get(name)
        return record if isinstance(record, dict) else None

    def approve(self, workspace: str | Path, server: ServerConfig) -> None:
        data = self._load()
        data.setdefault(workspace_key(workspace), {})[server.name] = {
            "digest": server.digest,
            "variables": list(server.variables),
            "definition": json.loads(server.written or "{}"),
            "approved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        self._save(data)

    def revoke(self, workspace: str | Path, name: str) -> bool:
        """Remove the approval of ``name`` in ``workspace``; whether there was one."""
        data = self._load()
        servers = data.get(workspace_key(workspace), {})
        if name not in servers:
            return False
        del servers[name]
        if not servers:
            del data[workspace_key(workspace)]
        self._save(data)
        return True

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            raw = json.loads(safeio.read_text(self.path, limit=_LIMIT))
        except FileNotFoundError:
            return {}
        except (OSError, UnicodeDecodeError, ValueError, UnsafePathError):
            return {}  # unreadable approves nothing; the next approval rewrites it
        approvals = raw.get("approvals") if isinstance(raw, dict) and raw.get("version") == VERSION else None
        if not isinstance(approvals, dict):
            return {}
        return {k: v for k, v in approvals.items() if isinstance(k, str) and isinstance(v, dict)}

    def _save(self, data: dict[str, dict[str, Any]]) -> None:
        text = json.dumps({"version": VERSION, "approvals": data}, indent=2, sort_keys=True)
        safeio.write_atomic(self.path, text + "\n", create_dirs=True)


def describe(server: ServerConfig) -> list[str]:
    """The server as written, line by line: what an approval lets run (values of env are not shown)."""
    entry = json.loads(server.written or "{}")
    lines = []
    if server.type == "stdio":
        lines.append(f"  command: {json.dumps(entry.get('command', ''))}")
        lines.append(f"  args:    {json.dumps(entry.get('args', []))}")
        lines.append(f"  cwd:     {json.dumps(entry['cwd']) if entry.get('cwd') else '(the workspace)'}")
        names = list(entry.get("env") or {})
        lines.append(f"  env:     {_names(names)}")
    else:
        lines.append(f"  url:     {json.dumps(entry.get('url', ''))}")
        names = list(entry.get("headers") or {})
        lines.append(f"  headers: {_names(names)}")
    if server.trust != "hints":
        effect = {
            "auto": "its side-effecting tools run without asking in mode ask",
            "read-only": "all its tools count as read-only, allowed in mode read-only",
            "ask": "every tool of it is asked about",
        }[server.trust]
        lines.append(f"  trust:   {server.trust} ({effect})")
    if server.variables:
        lines.append(
            f"  expands from your environment: {', '.join('${' + v + '}' for v in server.variables)}"
        )
    secret = [v for v in server.variables if secret_looking(v)]
    if secret:
        lines.append(
            f"  WARNING: {', '.join(secret)} look{'s' if len(secret) == 1 else ''} like a secret: approving "
            "hands its value to this server"
        )
    return lines


def _names(names: list[str]) -> str:
    return ", ".join(printable(n, one_line=True) for n in names) if names else "(none)"


def question(server: ServerConfig) -> str:
    """What the person is asked before a project server first runs."""
    return "\n".join(
        [
            f"The workspace's {PROJECT_FILE} asks to start MCP server "
            f"{printable(repr(server.name), one_line=True)} ({server.type}):",
            *describe(server),
            "Start it now and whenever this exact definition is used in this workspace? [y/N]: ",
        ]
    )


def not_approved(name: str) -> str:
    name = printable(name, one_line=True)
    return (
        f"project MCP server {name} (from {PROJECT_FILE}) is not approved; review with %mcp and run "
        f"%mcp approve {name}"
    )
