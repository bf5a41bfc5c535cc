"""The SDK's stdio transport with a bounded, linear reader of the server's stdout.

``mcp.client.stdio.stdio_client`` joins every chunk onto the pending line (``buffer +
chunk``): one 100 MB line costs ~1,500 copies of up to 100 MB (276 s measured), past every
timeout, so a hostile or runaway server's answer was "did not answer" and lost. This is the
same transport, built from the SDK's own pieces (its process start in a new process group,
its stop: close stdin, grace period, SIGTERM then SIGKILL to the group), with one change:
the reader keeps a line's chunks in a list and keeps none past ``MAX_LINE`` bytes. The rest
of such a line is read and dropped, and the request it answered (its ``id``, read from the
line's head) gets an error of code ``TOO_BIG`` saying how big it was.

If the SDK's private helpers move, ``client`` falls back to the SDK's own ``stdio_client``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncGenerator
from contextlib import aclosing, asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
from mcp import StdioServerParameters

try:
    from mcp.client.stdio import (
        _WRITER_FLUSH_TIMEOUT,
        _aclose_all,
        _create_platform_compatible_process,
        _drain_stdout,
        _parse_line,
        _stop_server_process,
    )
    from mcp.shared.message import SessionMessage
    from mcp_types import ErrorData, JSONRPCError
except ImportError:  # another SDK: its own transport, unbounded
    _parse_line = None  # type: ignore[assignment]  # checked for None before the SDK's transport is used

# A result is capped at 8 MiB of text (tools.MAX_RESULT_BYTES); JSON escaping can make its
# line several times that, so the line cap is 4x: past it nothing can be a result we keep.
MAX_LINE = 32 << 20
TOO_BIG = -32099  # JSON-RPC's range for implementation-defined errors
_HEAD = 4096  # bytes of a dropped line searched for its id
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')


def too_big_message(size: int) -> str:
    return (
        f"the server's answer was {size:,} bytes, over the cap of {MAX_LINE:,}; it was dropped. "
        "Ask for less (a narrower query, a page, a limit argument)"
    )


@asynccontextmanager
async def client(server: StdioServerParameters, errlog: Any) -> AsyncGenerator[Any, None]:
    """Like ``mcp.client.stdio.stdio_client`` (same streams), with the bounded reader."""
    if _parse_line is None or sys.platform == "win32":
        from mcp import stdio_client

        async with stdio_client(server, errlog=errlog) as streams:
            yield streams
        return

    from mcp.client.stdio import get_default_environment

    process = await _create_platform_compatible_process(
        command=server.command,
        args=server.args,
        env=get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    # As in the SDK: no awaits until the task group is entered (a cancellation in the gap
    # would leak the live process).
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()

    async def stdout_reader() -> None:
        assert process.stdout
        try:
            async with read_stream_writer:
                try:
                    async with aclosing(_lines(process.stdout, server.encoding_error_handler)) as lines:
                        async for item in lines:
                            try:
                                await read_stream_writer.send(item)
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return
                finally:
                    await _drain_stdout(process)
        except anyio.ClosedResourceError:
            pass
        except (anyio.BrokenResourceError, ConnectionError):
            pass  # teardown, or a real failure: either way the session sees the stream end

    async def stdin_writer() -> None:
        assert process.stdin
        try:
            async with write_stream_reader:
                async for session_message in write_stream_reader:
                    json = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    data = (json + "\n").encode(server.encoding, errors=server.encoding_error_handler)
                    await process.stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_stream_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(_WRITER_FLUSH_TIMEOUT) as flush_scope:
            await writer_done.wait()
        if flush_scope.cancelled_caught:
            await anyio.lowlevel.cancel_shielded_checkpoint()
        await _stop_server_process(process)
        await _aclose_all(read_stream, write_stream, read_stream_writer, write_stream_reader)
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):  # the server must be stopped whatever happens
                await shutdown()
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()


async def _lines(stdout: Any, errors: str) -> AsyncGenerator[Any, None]:
    """Each line of ``stdout`` parsed (or the error for a line over ``MAX_LINE``); linear time."""
    pending: list[bytes] = []
    size = 0
    head = b""
    async for chunk in stdout:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if len(head) < _HEAD:
                head += piece[: _HEAD - len(head)]
            size += len(piece)
            if size <= MAX_LINE:
                pending.append(piece)
            elif pending:
                pending = []  # over the cap: what was kept goes, the rest is only counted
            if end < 0:
                break
            if size > MAX_LINE:
                item = _too_big(head, size)
            else:
                line = b"".join(pending).decode("utf-8", errors=errors)
                item = _parse_line(line) if line.strip() else None
            pending, size, head = [], 0, b""
            if item is not None:
                yield item
            start = end + 1


def _too_big(head: bytes, size: int) -> Any:
    found = _ID.search(head)
    if found is None:
        return None  # nothing to answer: the call runs into its timeout
    raw = found.group(1)
    request_id: int | str = int(raw) if raw[:1] != b'"' else raw[1:-1].decode("utf-8", "replace")
    error = JSONRPCError(
        jsonrpc="2.0", id=request_id, error=ErrorData(code=TOO_BIG, message=too_big_message(size))
    )
    return SessionMessage(error)
