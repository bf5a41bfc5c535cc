"""Which MCP servers to run: the ecosystem's ``mcpServers`` format, from three places.

Sources, later ones overriding a server of the same name: ``$PSEUDOCLAUDE_HOME/mcp.json``
(the user's), ``<workspace>/.mcp.json`` (the project's, the file Claude Code reads) and
``%config PseudoClaude.mcp_servers``. A server is ``{"command", "args", "env"}`` (stdio) or
``{"type": "http", "url", "headers"}`` (streamable HTTP), plus an optional ``"trust"``.
``${VAR}`` and ``${VAR:-default}`` in any string expand from the environment.

A project server (from ``.mcp.json``: the workspace is untrusted input, SPEC §19) is marked
``project`` and carries the digest of its entry as written and the variables it names, so
that ``approval`` can tell whether the person approved exactly this server; it never starts
otherwise. A secret-looking variable (``*KEY*``, ``*TOKEN*``, …) in a project server's
``command`` or ``args`` refuses that server: argv is visible to every user in ``ps``.

It parses and validates and nothing else. A bad entry is one error naming its file and key
and leaves that server out; values are never put into an error (they may be secrets), and
the values of ``env``, ``headers`` and expanded variables are collected so that whatever
the package says about a server can be scrubbed of them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from .. import safeio
from ..memory.store import pseudoclaude_home

Trust = Literal["hints", "read-only", "ask", "auto"]
TRUST_VALUES = ("read-only", "ask", "auto")
PROJECT_FILE = ".mcp.json"
USER_FILE = "mcp.json"
CONFIG_SOURCE = "%config PseudoClaude.mcp_servers"

_STDIO_KEYS = {"type", "command", "args", "env", "cwd", "trust"}
_HTTP_KEYS = {"type", "url", "headers", "trust"}
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
# Shorter values ("1", "on") would shred ordinary text when scrubbed.
_MIN_SECRET = 4
# A variable whose name holds one of these is treated as a secret (SPEC §19).
SECRET_WORDS = (
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "SESSION",
    "PRIVATE",
)


def secret_looking(variable: str) -> bool:
    """Whether an environment variable's name says it holds a secret (``ANTHROPIC_API_KEY``)."""
    upper = variable.upper()
    return any(word in upper for word in SECRET_WORDS)


@dataclass(frozen=True)
class ServerConfig:
    """One server, validated and with its variables expanded."""

    name: str
    source: str  # the file (or %config) it came from, for messages
    type: Literal["stdio", "http"]
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str = ""
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    # "hints": each tool's readOnlyHint decides; the others override it for the whole server.
    trust: Trust = "hints"
    # From the workspace's .mcp.json: starts only once approved (mcp/approval.py).
    project: bool = False
    # The entry as written (canonical JSON, before ${VAR} expansion) and its sha256: what an
    # approval is of, and what the approval prompt shows.
    written: str = ""
    digest: str = ""
    # The ${VAR} names the entry takes from the environment, in order of first use.
    variables: tuple[str, ...] = ()


@dataclass
class McpConfig:
    """What all sources say: the servers, the problems, and the values never to show."""

    servers: dict[str, ServerConfig] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)
    sources: list[str] = field(default_factory=list)

    def scrub(self, text: str) -> str:
        """``text`` without any configured secret value (longest first, so none is left half)."""
        for value in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(value, "[hidden]")
        return text


class _Invalid(Exception):
    """One problem in one entry: ``key`` is its path below the source, ``problem`` the words."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")


def load_config(workspace: Path, configured: Mapping[str, Any] | None = None) -> McpConfig:
    """The servers of ``workspace`` from every source, in precedence order."""
    out = McpConfig()
    for path, project in ((pseudoclaude_home() / USER_FILE, False), (Path(workspace) / PROJECT_FILE, True)):
        if path.is_file():
            _read_file(path, out, project=project)
    if configured:
        out.sources.append(CONFIG_SOURCE)
        _add_servers(dict(configured), CONFIG_SOURCE, "", out)
    return out


def _read_file(path: Path, out: McpConfig, *, project: bool = False) -> None:
    source = str(path)
    try:
        # No link followed, regular files only, 1 MiB at most (safeio.py, issue 19).
        data = json.loads(safeio.read_text(path, limit=1 << 20))
    except (OSError, UnicodeDecodeError) as exc:
        out.errors.append(f"{source}: cannot be read ({type(exc).__name__}); its servers are not started")
        return
    except json.JSONDecodeError as exc:
        out.errors.append(
            f"{source}: not valid JSON (line {exc.lineno}, column {exc.colno}); its servers are not started"
        )
        return
    except RecursionError:  # a clone's "[[[[…": the parser's depth, not a crash of every run
        out.errors.append(f"{source}: nested too deep to read as JSON; its servers are not started")
        return
    out.sources.append(source)
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        out.errors.append(f'{source}: mcpServers: must be an object {{"NAME": {{...}}}}; nothing started')
        return
    _add_servers(data.get("mcpServers", {}), source, "mcpServers.", out, project=project)


def _add_servers(
    servers: dict[str, Any], source: str, prefix: str, out: McpConfig, *, project: bool = False
) -> None:
    for name, entry in servers.items():
        key = f"{prefix}{name}"
        try:
            if not isinstance(name, str) or not name.strip():
                raise _Invalid(key, "a server needs a non-empty name")
            secrets: set[str] = set()
            if project and isinstance(entry, dict):
                _refuse_secret_argv(entry, key)  # before expansion: refused whether set or not
            server = _server(name, source, key, entry, secrets)
            if project:
                server = _as_project(server, entry)
        except _Invalid as exc:
            out.errors.append(f"{source}: {exc}; server {name!r} is not started")
            continue
        out.servers[name] = server  # a later source overrides an earlier one
        out.secrets |= {s for s in secrets if len(s) >= _MIN_SECRET}


def _as_project(server: ServerConfig, entry: dict[str, Any]) -> ServerConfig:
    written = json.dumps(entry, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    names: dict[str, None] = {}
    for text in _all_strings(entry):
        names.update((m.group(1), None) for m in _VAR.finditer(text))
    return replace(
        server,
        project=True,
        written=written,
        digest=hashlib.sha256(written.encode()).hexdigest(),
        variables=tuple(names),
    )


def _all_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _all_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _all_strings(v)]
    return []


def _refuse_secret_argv(entry: dict[str, Any], key: str) -> None:
    """A project server may not put a secret-looking variable on its command line (``ps``)."""
    args = entry.get("args")
    places = [("command", entry.get("command"))] + [
        (f"args[{i}]", a) for i, a in enumerate(args if isinstance(args, list) else [])
    ]
    for place, text in places:
        for match in _VAR.finditer(text if isinstance(text, str) else ""):
            if secret_looking(match.group(1)):
                raise _Invalid(
                    f"{key}.{place}",
                    f"${{{match.group(1)}}} looks like a secret and a command line is visible to every "
                    'user of this machine (ps); refused: pass it through "env" instead',
                )


def _server(name: str, source: str, key: str, entry: Any, secrets: set[str]) -> ServerConfig:
    if not isinstance(entry, dict):
        raise _Invalid(key, 'must be an object with "command" (stdio) or "type": "http" and "url"')
    kind = entry.get("type", "http" if "url" in entry and "command" not in entry else "stdio")
    if kind in ("streamable-http", "streamableHttp"):
        kind = "http"
    if kind not in ("stdio", "http"):
        raise _Invalid(f"{key}.type", 'must be "stdio" or "http" (SSE servers are not supported)')
    allowed = _STDIO_KEYS if kind == "stdio" else _HTTP_KEYS
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise _Invalid(
            f"{key}.{unknown[0]}", f"unknown key for a {kind} server; use {', '.join(sorted(allowed))}"
        )
    trust = entry.get("trust", "hints")
    if trust != "hints" and trust not in TRUST_VALUES:
        raise _Invalid(f"{key}.trust", f"must be one of {', '.join(TRUST_VALUES)}")
    if kind == "stdio":
        return ServerConfig(
            name=name,
            source=source,
            type="stdio",
            command=_string(entry, "command", key, secrets, required=True),
            args=tuple(
                _expand(a, f"{key}.args[{i}]", secrets) for i, a in enumerate(_strings(entry, "args", key))
            ),
            env=_mapping(entry, "env", key, secrets),
            cwd=_string(entry, "cwd", key, secrets),
            trust=trust,
        )
    return ServerConfig(
        name=name,
        source=source,
        type="http",
        url=_string(entry, "url", key, secrets, required=True),
        headers=_mapping(entry, "headers", key, secrets),
        trust=trust,
    )


def _string(entry: dict[str, Any], name: str, key: str, secrets: set[str], *, required: bool = False) -> str:
    value = entry.get(name, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise _Invalid(f"{key}.{name}", "must be a non-empty string" if required else "must be a string")
    return _expand(value, f"{key}.{name}", secrets)


def _strings(entry: dict[str, Any], name: str, key: str) -> list[str]:
    value = entry.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _Invalid(f"{key}.{name}", "must be a list of strings")
    return value


def _mapping(entry: dict[str, Any], name: str, key: str, secrets: set[str]) -> tuple[tuple[str, str], ...]:
    """``env`` or ``headers``: every value is a secret (and a "Bearer <token>"'s token alone)."""
    value = entry.get(name, {})
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise _Invalid(f"{key}.{name}", "must be an object of strings")
    out = []
    for k, v in value.items():
        expanded = _expand(v, f"{key}.{name}.{k}", secrets)
        secrets.add(expanded)
        secrets.update(expanded.split())
        out.append((k, expanded))
    return tuple(out)


def _expand(value: str, key: str, secrets: set[str]) -> str:
    """``${VAR}`` / ``${VAR:-default}`` from the environment; an unset variable is an error.

    An expanded value is someone's configuration kept outside the file: it joins ``secrets``.
    """

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = os.environ.get(name)
        if found is None:
            if default is None:
                raise _Invalid(
                    key,
                    f"${{{name}}} is not set in your environment (a workspace .env's values go to "
                    "the package's providers only)",
                )
            return default
        secrets.add(found)
        return found

    return _VAR.sub(one, value)
