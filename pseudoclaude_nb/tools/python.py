"""The ``run_python`` tool: code run by an executor the host supplies.

The core cannot run code in the notebook's namespace without IPython, so it does not try:
the magics pass an executor ``(code) -> output text`` and only then does the tool exist.
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field

from .registry import Tool, ToolArgs, ToolOutput

# Text, or text and the images the code displayed (issue-14).
PythonExecutor = Callable[[str], str | ToolOutput]


class RunPythonArgs(ToolArgs):
    code: str = Field(description="Python source to run as one notebook cell.")


def python_tool(executor: PythonExecutor) -> Tool:
    return Tool(
        name="run_python",
        description=(
            "Run Python code in the user's notebook kernel, in the notebook's namespace: "
            "variables, imports and data the user has loaded are available, and definitions "
            "persist for the user. Returns printed output, the value of the last expression "
            "and any traceback. Use it to inspect the user's data; use bash for shell commands."
        ),
        args=RunPythonArgs,
        handler=lambda a: executor(a.code),
        side_effect=True,
    )
