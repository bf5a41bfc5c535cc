"""The host tools a strategy may declare (``Strategy.tools``), built by name.

``new_context`` hands its declared hand-off to ``declare`` (the host's: it logs the intent
and commits it at the next boundary); ``search_history`` looks up the session's full history.
A dry plan (``%context``, ``%agent --tools``) lists them with a ``declare`` that refuses: its
tools are shown, never run, and must not reach the live session.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ToolError
from ..strategies import HOST_TOOLS

if TYPE_CHECKING:
    from ..history import HistoryIndex
    from ..tools.registry import Tool
    from .handoff import Intent  # rollover's models: imported with its tools (tools.rollover)

Declare = Callable[["Intent"], str]


def not_in_a_run(intent: Intent) -> str:
    """The ``declare`` of a dry plan's ``new_context``: only listed, never run."""
    raise ToolError("new_context works only in a run; keep working in this window")


def host_tools(
    names: tuple[str, ...],
    *,
    workspace: Path,
    session_id: str | None,
    history: HistoryIndex,
    declare: Declare = not_in_a_run,
) -> list[Tool]:
    """The tools ``names`` (each one of ``HOST_TOOLS``; the registry checked them at load)."""
    if not names:
        return []  # compact's: no hand-off models, no history search to import
    from ..tools.rollover import new_context_tool, search_history_tool

    made: dict[str, Callable[[], Tool]] = {
        "new_context": lambda: new_context_tool(workspace, declare),
        "search_history": lambda: search_history_tool(history, lambda: session_id),
    }
    assert set(made) == set(HOST_TOOLS)
    return [made[name]() for name in names]
