"""One live connection to one MCP server, on the hub's event loop (async; the SDK's world).

``serve`` opens the transport (a stdio subprocess or streamable HTTP), initializes the
session, lists the tools, reports them through ``ready`` (a thread-safe future), then holds
the connection until asked to stop or until the server goes away. Leaving ``serve`` always
closes what it opened: the stdio transport (``stdio``: the SDK's own stop) closes stdin,
then terminates and kills the process group, so a stopped connection leaves no process
behind. On Linux a stdio server is started through ``tether``, so it also ends when the
kernel dies without its exit running.

The server's stderr goes to a pipe drained into a bounded ring (``StderrRing``: the last
``STDERR_KEPT`` bytes; a server spamming stderr costs a thread's reading, never disk or
memory) whose last line becomes the cause of a failure. A message the SDK cannot parse
because it holds a lone surrogate (``"\\ud800"``: valid JSON, invalid Unicode) is parsed
again here, leniently, so the call gets its result (escaped in ``tools``) instead of waiting
for its timeout.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import threading
from contextlib import AsyncExitStack
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import CONNECTION_CLOSED

from .. import __version__
from ..errors import ServerGone
from . import stdio, tether
from .config import ServerConfig
from .tools import RemoteTool

STDERR_TAIL = 600  # bytes of the server's stderr quoted in a failure
STDERR_KEPT = 64 << 10  # bytes of the server's stderr kept (the rest is read and dropped)


class StderrRing:
    """A server's stderr: the write end of a pipe goes to the process; a thread keeps the last
    ``limit`` bytes of what comes out of the read end, and closes it at end of file."""

    def __init__(self, limit: int = STDERR_KEPT) -> None:
        self.limit = limit
        self.total = 0  # bytes read in all
        self._kept = bytearray()
        self._lock = threading.Lock()
        read, write = os.pipe()
        self.writer = os.fdopen(write, "wb", buffering=0)
        threading.Thread(
            target=self._drain, args=(read,), name="pseudoclaude-mcp-stderr", daemon=True
        ).start()

    def _drain(self, fd: int) -> None:
        try:
            while chunk := os.read(fd, 1 << 16):
                with self._lock:
                    self.total += len(chunk)
                    self._kept += chunk
                    if len(self._kept) > self.limit:
                        del self._kept[: len(self._kept) - self.limit]
        except OSError:
            pass
        finally:
            os.close(fd)

    def tail(self, size: int) -> bytes:
        with self._lock:
            return bytes(self._kept[-size:])

    def kept(self) -> int:
        with self._lock:
            return len(self._kept)

    def release(self) -> None:
        """Close this process's copy of the write end (the server holds its own)."""
        if not self.writer.closed:
            self.writer.close()


class Connection:
    def __init__(self, config: ServerConfig, workspace: str) -> None:
        self.config = config
        self.workspace = workspace
        self.ready: concurrent.futures.Future[list[RemoteTool]] = concurrent.futures.Future()
        self.session: ClientSession | None = None
        self.gone = False
        self.closed = threading.Event()  # set when serve has closed everything it opened
        self._stop: anyio.Event | None = None
        # Released by close_files(), when the hub is done with the connection.
        self._stderr = StderrRing() if config.type == "stdio" else None

    def stop_soon(self) -> None:
        """Ask ``serve`` to close (call on the loop)."""
        if self._stop is not None:
            self._stop.set()

    def stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        data = self._stderr.tail(STDERR_TAIL)
        lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1] if lines else ""

    async def serve(self) -> None:
        self._stop = anyio.Event()
        gone = anyio.Event()
        try:
            async with AsyncExitStack() as stack:
                read, write = await self._open(stack)
                # A relay between transport and session: the end of the server's stream is
                # how a dead server shows itself (the SDK keeps the session object open).
                send, relayed = anyio.create_memory_object_stream[Any](0)
                group = await stack.enter_async_context(anyio.create_task_group())
                stack.callback(group.cancel_scope.cancel)

                async def relay() -> None:
                    try:
                        async with send:
                            async for item in read:
                                await send.send(_reparsed(item) if isinstance(item, Exception) else item)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        pass
                    finally:
                        self.gone = True
                        gone.set()

                group.start_soon(relay)
                session = await stack.enter_async_context(
                    ClientSession(relayed, write, client_info=_client_info())
                )
                await session.initialize()
                tools = await _list_tools(session, self.config.name)
                self.session = session
                self.ready.set_result(tools)
                async with anyio.create_task_group() as wait:

                    async def until(event: anyio.Event) -> None:
                        await event.wait()
                        wait.cancel_scope.cancel()

                    wait.start_soon(until, self._stop)
                    wait.start_soon(until, gone)
        except BaseException as exc:
            if not self.ready.done():
                self.ready.set_exception(ServerGone(self.describe(exc)))
            if not isinstance(exc, Exception):
                raise
        finally:
            self.session = None
            self.gone = True
            if not self.ready.done():
                self.ready.set_exception(ServerGone(self.describe(None)))
            self.closed.set()

    async def _open(self, stack: AsyncExitStack) -> Any:
        c = self.config
        if c.type == "stdio":
            cwd = c.cwd or self.workspace
            # The environment the SDK would give the server (its defaults plus the configured
            # one), built here so the tether looks the command up in that very PATH.
            env = get_default_environment() | dict(c.env)
            command, args = tether.command(c.command, list(c.args), env, cwd)
            # "replace": one undecodable byte from a server must not end its connection.
            params = StdioServerParameters(
                command=command, args=args, env=env, cwd=cwd, encoding_error_handler="replace"
            )
            assert self._stderr is not None
            opened = await stack.enter_async_context(stdio.client(params, errlog=self._stderr.writer))
            self._stderr.release()  # the server has its copy; ours would keep the pipe open
            return opened
        client = await stack.enter_async_context(create_mcp_http_client(headers=dict(c.headers) or None))
        return await stack.enter_async_context(streamable_http_client(c.url, http_client=client))

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        session = self.session
        if session is None or self.gone:
            raise ServerGone(self.describe(None))
        try:
            return await session.call_tool(name, arguments)
        except Exception as exc:
            if self.gone or getattr(exc, "code", None) == CONNECTION_CLOSED:
                await anyio.sleep(0.05)  # let the relay see the end, so the status says so
                raise ServerGone(self.describe(exc)) from None
            raise

    def describe(self, exc: BaseException | None) -> str:
        """Why the server is not there: the exception's innermost cause, and its last stderr line."""
        cause = _innermost(exc) if exc is not None else None
        text = f"{type(cause).__name__}: {cause}" if cause is not None and str(cause) else ""
        if cause is not None and not text:
            text = type(cause).__name__
        tail = self.stderr_tail()
        if tail:
            text = f"{text}; its stderr ends: {tail}" if text else f"its stderr ends: {tail}"
        return text or "the server closed the connection"

    def close_files(self) -> None:
        if self._stderr is not None:
            self._stderr.release()


async def _list_tools(session: ClientSession, server: str) -> list[RemoteTool]:
    tools: list[RemoteTool] = []
    cursor: str | None = None
    for _ in range(100):  # a server whose pages never end cannot hang the start
        listing = await session.list_tools(params=_page(cursor))
        for tool in listing.tools:
            hints = tool.annotations
            tools.append(
                RemoteTool(
                    server=server,
                    name=tool.name,
                    description=tool.description or tool.title or "",
                    input_schema=dict(tool.input_schema or {}),
                    read_only_hint=hints.read_only_hint if hints else None,
                    destructive_hint=hints.destructive_hint if hints else None,
                )
            )
        cursor = listing.next_cursor
        if not cursor:
            break
    return tools


def _reparsed(exc: Exception) -> Any:
    """A message the SDK refused, parsed again leniently when lone surrogates were the cause.

    pydantic's JSON parser rejects ``"\\ud800"``; Python's ``json`` accepts it, and the
    strings then carry the surrogates, which ``tools`` escapes and notes. Anything else stays
    the exception it was (the SDK's session reports it).
    """
    from mcp.shared.message import SessionMessage
    from mcp_types import jsonrpc_message_adapter

    errors = getattr(exc, "errors", None)
    try:
        line = errors()[0].get("input") if callable(errors) else None
        if not isinstance(line, str) or "\\u" not in line:
            return exc
        message = jsonrpc_message_adapter.validate_python(json.loads(line), by_name=False)
    except Exception:  # noqa: BLE001 - not ours to repair: the SDK's own report stands
        return exc
    return SessionMessage(message)


def _page(cursor: str | None) -> Any:
    if cursor is None:
        return None
    from mcp_types import PaginatedRequestParams

    return PaginatedRequestParams(cursor=cursor)


def _client_info() -> Any:
    from mcp_types import Implementation

    return Implementation(name="pseudoclaude_nb", version=__version__)


def _innermost(exc: BaseException) -> BaseException:
    """The first real leaf of an exception group (anyio wraps transport failures in them)."""
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # type: ignore
        inner = list(exc.exceptions)  # type: ignore
        leaves = [e for e in inner if not isinstance(e, asyncio.CancelledError)]
        exc = (leaves or inner)[0]
    return exc
