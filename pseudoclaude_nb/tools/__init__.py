"""The tools the agent can call, bounded to one workspace and gated by a permission mode.

``build_tools`` assembles the standard set; ``ToolRegistry.run`` turns a ``ToolCall`` into a
``ToolResult`` and never raises for model mistakes. Layout: ``registry`` (Tool, Permissions,
ToolRegistry), ``workspace`` (the path boundary), ``files`` (read/write/edit), ``search``
(list_files, grep), ``shell`` (bash), ``python`` (run_python), ``memory`` (read_memory).
"""

from __future__ import annotations

from pathlib import Path

from .files import file_tools
from .memory import MemoryReader, read_memory_tool
from .python import PythonExecutor, python_tool
from .registry import PermissionMode, Permissions, Tool, ToolArgs, ToolRegistry
from .search import search_tools
from .shell import shell_tools
from .workspace import resolve_in_workspace

__all__ = [
    "MemoryReader",
    "PermissionMode",
    "Permissions",
    "PythonExecutor",
    "Tool",
    "ToolArgs",
    "ToolRegistry",
    "build_tools",
    "file_tools",
    "python_tool",
    "read_memory_tool",
    "resolve_in_workspace",
    "search_tools",
    "shell_tools",
]


def build_tools(
    workspace: Path,
    python_executor: PythonExecutor | None = None,
    memory: MemoryReader | None = None,
) -> ToolRegistry:
    """The standard tools for ``workspace``; ``run_python`` only when an executor is given,
    ``read_memory`` only with a memory reader (memory on, and something in it)."""
    workspace = Path(workspace)
    tools = [*file_tools(workspace), *search_tools(workspace), *shell_tools(workspace)]
    if python_executor is not None:
        tools.append(python_tool(python_executor))
    if memory is not None:
        tools.append(read_memory_tool(memory))
    return ToolRegistry(tools)
