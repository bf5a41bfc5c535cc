"""The kernel's MCP servers: started on demand, kept up, restarted once, stopped for good.

The SDK is async and the kernel already runs an event loop, so the hub runs the client
sessions on an event loop of its own in a background thread and offers a synchronous face:
``configure`` (start what the configuration names, in parallel, with a timeout), ``tools``
(the ``Tool`` objects of the servers that are up), ``call`` (one call, with a timeout, that
Ctrl-C cancels), ``restart`` and ``close``. ``close`` is also registered with ``atexit``, so
a kernel that shuts down leaves no server process behind.

A server that dies is restarted once, on the next call that needs it; a call that was in
flight when it died is an error result saying its effects are unknown. After that one
restart, its tools answer with an error until ``%mcp restart NAME``.

A project server (from the workspace's ``.mcp.json``) is never started unless
``approval.Approvals`` says the person approved it as it is: every way in (``configure``,
``restart``, ``start_all``, the restart after a crash) goes through ``_start``, which checks.
Its status is then "needs approval"; asking is the agent's job, not the hub's.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import ServerGone, ToolError
from ..tools.registry import ToolOutput
from .approval import Approvals
from .config import McpConfig, ServerConfig, Trust
from .tools import McpTool, RemoteTool, make_tools, result_output, screen

Status = Literal["not started", "needs approval", "starting", "running", "crashed", "failed", "stopped"]
MAX_RESTARTS = 1
STOP_SECONDS = 8.0  # the SDK's own shutdown of a stdio server takes up to ~6 s (2 s per stage)


@dataclass
class ServerState:
    """One configured server as ``%mcp`` shows it."""

    config: ServerConfig
    status: Status = "not started"
    tools: list[RemoteTool] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # tools refused at listing, with why
    last_error: str | None = None
    restarts: int = 0
    connection: Any = None  # the live Connection, if any
    task: concurrent.futures.Future | None = None

    @property
    def name(self) -> str:
        return self.config.name


class McpHub:
    def __init__(
        self, *, start_timeout: float = 30.0, call_timeout: float = 120.0, approvals: Approvals | None = None
    ) -> None:
        self.approvals = approvals or Approvals()
        # (name, digest) the person said no to in this kernel: not asked again until it changes.
        self.declined: set[tuple[str, str]] = set()
        self.start_timeout = start_timeout
        self.call_timeout = call_timeout
        self.workspace = ""
        self.config = McpConfig()
        self.servers: dict[str, ServerState] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.RLock()

    # --- configuration and start -----------------------------------------------------------

    def configure(self, config: McpConfig, workspace: Path, *, start: bool = True) -> list[str]:
        """Match the running servers to ``config``; with ``start``, start those never started.

        Returns one line per problem: each configuration error, each server that failed to
        start now (named, with its cause).
        """
        with self._lock:
            self._notice_deaths()
            moved = str(workspace) != self.workspace  # stdio servers run in the workspace
            self.config, self.workspace = config, str(workspace)
            stale = [s for n, s in self.servers.items() if moved or config.servers.get(n) != s.config]
            self._stop(stale)
            for state in stale:
                del self.servers[state.name]
            for name, server in config.servers.items():
                self.servers.setdefault(name, ServerState(server))
            self._check_approvals()
            problems = [f"MCP configuration: {text}" for text in config.errors]
            if start:
                fresh = [s for s in self.servers.values() if s.status == "not started"]
                problems += self._start(fresh)
            return problems

    def approved(self, state: ServerState) -> bool:
        return self.approvals.is_approved(self.workspace, state.config)

    def unapproved(self) -> list[ServerState]:
        with self._lock:
            self._check_approvals()
            return [s for s in self.servers.values() if s.status == "needs approval"]

    def _check_approvals(self) -> None:
        """Approval gone (revoked, file edited): stopped; approval given: startable."""
        for state in self.servers.values():
            if not self.approved(state):
                if state.connection is not None:
                    self._stop([state])
                state.status, state.tools = "needs approval", []
            elif state.status == "needs approval":
                state.status = "not started"

    def _start(self, states: list[ServerState]) -> list[str]:
        self._check_approvals()
        states = [s for s in states if s.status != "needs approval"]  # never started unapproved
        if not states:
            return []
        from .connection import Connection

        loop = self._ensure_loop()
        for state in states:
            state.connection = Connection(state.config, self.workspace)
            state.task = asyncio.run_coroutine_threadsafe(state.connection.serve(), loop)
            state.status, state.tools = "starting", []
        deadline = time.monotonic() + self.start_timeout
        failed: list[ServerState] = []
        try:
            for state in states:
                try:
                    listed = state.connection.ready.result(timeout=max(0.0, deadline - time.monotonic()))
                    state.tools, state.left_out = screen(listed)
                    state.status, state.last_error = "running", None
                except concurrent.futures.TimeoutError:
                    state.last_error = (
                        f"did not start within {self.start_timeout:g} s (setting mcp_start_timeout)"
                    )
                    failed.append(state)
                except Exception as exc:  # noqa: BLE001 - any start failure is reported, never raised
                    state.last_error = self.config.scrub(str(exc) or type(exc).__name__)
                    failed.append(state)
        except KeyboardInterrupt:
            self._stop([s for s in states if s.status != "running"])
            for state in states:
                if state.status != "running":
                    state.status, state.last_error = "failed", "start interrupted by the user"
            raise
        self._stop(failed)
        for state in failed:
            state.status = "failed"
        left_out = [
            f"MCP server {s.name!r}: {why}" for s in states if s.status == "running" for why in s.left_out
        ]
        return left_out + [
            f"MCP server {s.name!r} did not start: {s.last_error}; this run goes on without its tools"
            for s in failed
        ]

    def _notice_deaths(self) -> None:
        """A server that died while idle shows as crashed (its next call restarts it)."""
        for state in self.servers.values():
            connection = state.connection
            if state.status == "running" and connection is not None and connection.gone:
                state.status, state.last_error = "crashed", self.config.scrub(connection.describe(None))

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="pseudoclaude-mcp", daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
            atexit.register(self.close)
            # The SDK validates structured results with jsonschema, whose first import can take
            # seconds (its format checkers): import it now, beside the servers' start, not
            # inside the first call's timeout.
            threading.Thread(target=_import_jsonschema, name="pseudoclaude-mcp-warm", daemon=True).start()
        return self._loop

    # --- what the agent uses -----------------------------------------------------------------

    def tools(self) -> list[McpTool]:
        """The tools of every server that is up (or will be restarted on its next call)."""
        with self._lock:
            remote = [t for s in self.servers.values() if s.status in ("running", "crashed") for t in s.tools]
            return make_tools(remote, self._trust, self.call)

    def preapproved(self) -> set[str]:
        """Names of side-effecting tools that mode ``ask`` runs without asking (trust "auto")."""
        return {t.name for t in self.tools() if t.preapproved}

    def _trust(self, server: str) -> Trust:
        state = self.servers.get(server)
        return state.config.trust if state else "ask"

    def call(self, tool: RemoteTool, arguments: dict[str, Any]) -> str | ToolOutput:
        """One tool call, synchronously; every failure is a ``ToolError`` for the model."""
        from mcp.shared.exceptions import MCPError

        from .stdio import TOO_BIG  # the SDK with it: a kernel without MCP servers never loads it

        state = self._usable(tool.server)
        loop = self._ensure_loop()
        future = asyncio.run_coroutine_threadsafe(state.connection.call(tool.name, arguments), loop)
        try:
            result = future.result(timeout=self.call_timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ToolError(
                f"the MCP tool {tool.name} (server {tool.server!r}) did not answer within "
                f"{self.call_timeout:g} s (setting mcp_timeout); it was cancelled"
            ) from None
        except KeyboardInterrupt:
            future.cancel()  # the SDK tells the server the request is cancelled
            raise
        except ServerGone as exc:
            with self._lock:
                state.status, state.last_error = "crashed", self.config.scrub(str(exc))
            after = (
                "it is restarted for the next call"
                if state.restarts < MAX_RESTARTS
                else "it was already restarted once, so its tools stay unavailable until "
                f"%mcp restart {tool.server}"
            )
            raise ToolError(
                f"MCP server {tool.server!r} went away during this call ({state.last_error}); "
                f"the call's effects are unknown; {after}"
            ) from None
        except MCPError as exc:
            if exc.code == TOO_BIG:
                raise ToolError(f"the MCP tool {tool.name}: {exc.message}") from None
            raise ToolError(
                f"MCP server {tool.server!r} refused the call: {self.config.scrub(str(exc))}"
            ) from None
        return result_output(result)

    def _usable(self, name: str) -> ServerState:
        """The server, restarted once if it died; else a ``ToolError`` that says why not."""
        with self._lock:
            state = self.servers.get(name)
            if state is None:
                raise ToolError(f"MCP server {name!r} is no longer configured; its tools are gone")
            connection = state.connection
            if state.status == "running" and connection is not None and not connection.gone:
                return state
            self._notice_deaths()
            if state.status == "crashed":
                if state.restarts >= MAX_RESTARTS:
                    self._stop([state])
                    state.status = "failed"
                    raise ToolError(
                        f"MCP server {name!r} stopped again after a restart ({state.last_error}); its tools "
                        f"are unavailable until %mcp restart {name}"
                    )
                state.restarts += 1
                self._stop([state])
                self._start([state])
                if state.status == "running":
                    return state
            raise ToolError(
                f"MCP server {name!r} is not available ({state.status}: {state.last_error}); "
                f"%mcp shows it, %mcp restart {name} tries again"
            )

    # --- restart and stop ----------------------------------------------------------------------

    def restart(self, name: str) -> ServerState:
        """Stop and start one server now (``%mcp restart``); its restart allowance starts afresh."""
        with self._lock:
            state = self.servers.get(name)
            if state is None:
                known = ", ".join(self.servers) or "(none)"
                raise KeyError(f"no MCP server named {name!r}; configured: {known}")
            if not self.approved(state):
                raise PermissionError(
                    f"MCP server {name!r} comes from the workspace's .mcp.json and is not approved; "
                    f"review it with %mcp and run %mcp approve {name}"
                )
            self._stop([state])
            state.restarts = 0
            self._start([state])
            return state

    def start_all(self) -> list[str]:
        with self._lock:
            return self._start([s for s in self.servers.values() if s.status in ("not started", "stopped")])

    def _stop(self, states: list[ServerState]) -> None:
        """Close the connections of ``states`` (in parallel) and wait for their processes."""
        live = [s for s in states if s.connection is not None]
        loop = self._loop
        for state in live:
            if loop is None:
                break
            if state.connection.ready.done():
                loop.call_soon_threadsafe(state.connection.stop_soon)
            elif state.task is not None:
                state.task.cancel()  # still starting: cancelling unwinds the transport too
        deadline = time.monotonic() + STOP_SECONDS
        for state in live:
            if (
                not state.connection.closed.wait(max(0.0, deadline - time.monotonic()))
                and state.task is not None
            ):
                state.task.cancel()
                state.connection.closed.wait(2.0)
            state.connection.close_files()
            state.connection, state.task = None, None
            if state.status in ("running", "starting", "crashed"):
                state.status = "stopped"

    def close(self) -> None:
        """Stop every server and the loop; nothing of the hub stays behind (safe to call twice)."""
        with self._lock:
            self._stop(list(self.servers.values()))
            self.servers.clear()
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            if loop is not None:
                atexit.unregister(self.close)
                loop.call_soon_threadsafe(loop.stop)
                if thread is not None:
                    thread.join(5.0)
                if not loop.is_running():
                    loop.close()


def _import_jsonschema() -> None:
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        pass
