"""MCP servers as tools: configuration (``config``), naming/schemas/results (``tools``), one
live connection on the hub's loop (``connection``, over ``stdio`` or HTTP) and the kernel's
set of servers (``hub``). A workspace's own servers start only once approved (``approval``).

The core only: no IPython here (``%mcp`` is ``magics/mcp.py``). The SDK is imported when a
server first starts, so a kernel without MCP servers never pays for it; the names below are
imported on first use (``lazy.exports``), so the hub and its event loop (``asyncio``) are not
imported by a run that has no server either (issue 47: the first ``%agent`` of a kernel).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
    from .config import McpConfig, ServerConfig, load_config
    from .hub import McpHub, ServerState
    from .tools import McpTool, RemoteTool, is_mcp_tool

__all__ = [
    "McpConfig",
    "McpHub",
    "McpTool",
    "RemoteTool",
    "ServerConfig",
    "ServerState",
    "is_mcp_tool",
    "load_config",
]

__getattr__, __dir__ = exports(
    __name__,
    {
        ".config": ("McpConfig", "ServerConfig", "load_config"),
        ".hub": ("McpHub", "ServerState"),
        ".tools": ("McpTool", "RemoteTool", "is_mcp_tool"),
    },
)
