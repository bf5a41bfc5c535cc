"""An MCP server for the edge cases real servers rarely show: the SDK's ``MCPServer``.

Run as ``python tests/fakes/mcp_server.py`` (stdio) or with ``--http PORT`` (streamable HTTP on
127.0.0.1). Tools: ``echo`` (read-only), ``write_note`` (side-effecting), ``huge`` (a result
of N characters), ``image`` (a PNG), ``slow`` (sleeps), ``fail`` (an error result), ``crash``
(the process exits mid-call), ``resource`` (an embedded text resource), ``pid`` (its pid).
``--crash-on-start`` exits before speaking, ``--start-file PATH`` records each start's pid,
``--linger S`` outlives its closed stdin by S seconds (only a terminate ends it sooner).
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
import time
from pathlib import Path

import mcp_types as types
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import ToolAnnotations

# A 1x1 red PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)

READ_ONLY = ToolAnnotations(read_only_hint=True)

server = MCPServer("edge")


@server.tool(annotations=READ_ONLY)
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def write_note(name: str, body: str = "") -> str:
    """Pretend to write a note (side-effecting: no read-only hint)."""
    return f"wrote {name} ({len(body)} chars)"


@server.tool(annotations=READ_ONLY)
def huge(size: int) -> str:
    """A result of `size` characters."""
    line = "0123456789" * 9 + "\n"
    return (line * (size // len(line) + 1))[:size]


@server.tool(annotations=READ_ONLY)
def image() -> Image:
    """A 1x1 PNG."""
    return Image(data=PNG, format="png")


@server.tool(annotations=READ_ONLY)
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return f"slept {seconds}"


@server.tool(annotations=READ_ONLY)
def fail(reason: str) -> str:
    """Always an error result."""
    raise ToolError(f"failed on purpose: {reason}")


@server.tool(annotations=READ_ONLY)
def crash() -> str:
    """The server process exits in the middle of this call."""
    sys.stderr.write("edge server: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool(annotations=READ_ONLY)
def resource() -> types.EmbeddedResource:
    """An embedded text resource."""
    return types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(
            uri="memo://notes/1", text="the memo's text", mime_type="text/plain"
        ),
    )


@server.tool(annotations=READ_ONLY)
def pid() -> str:
    """This server's process id."""
    return str(os.getpid())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=0, help="serve streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument("--crash-on-start", action="store_true")
    parser.add_argument("--start-file", default="", help="append one line per start to this file")
    parser.add_argument(
        "--linger", type=float, default=0, help="stay alive this long after stdin closes (a stubborn server)"
    )
    args = parser.parse_args()
    if args.start_file:
        with Path(args.start_file).open("a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
    if args.crash_on_start:
        sys.stderr.write("edge server: refusing to start (--crash-on-start)\n")
        sys.exit(2)
    if args.http:
        server.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        server.run()
        time.sleep(args.linger)  # only a terminate (or kill) ends it sooner


if __name__ == "__main__":
    main()
