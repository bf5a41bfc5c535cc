"""What a run offers the model: its tools (built-in, notebook, ``@tool``, rollover, MCP) and
its system prompt's sections, both by strategy; ``%agent --tools`` lists the same tools.

A mixin of ``Agent``: ``%context`` and a run build their tool list here, so what
``%context`` shows is what the model gets.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .agent_session import ActiveSession
from .config import PseudoClaude
from .context import Emit
from .errors import ToolError
from .events import RunEvent
from .mcp import McpHub, load_config
from .memory import MemoryManager
from .notebook import NotebookHost
from .prompt import system_sections, with_memory
from .rollover.handoff import GUIDANCE, Intent
from .session.history import HistoryIndex
from .tools import MemoryReader, ToolRegistry, build_tools
from .tools.notebook import notebook_tools
from .tools.rollover import new_context_tool, search_history_tool
from .tools.user import user_tools


class RunSurface:
    """The tools and system sections of a run, and the MCP servers that add tools."""

    settings: PseudoClaude
    session: ActiveSession | None
    notebook: NotebookHost | None
    python_executor: Callable[[str], str] | None
    _mcp: McpHub | None

    # The agent's own, read here (annotations only: nothing here shadows the agent's).
    workspace: Path
    history: HistoryIndex
    memory: MemoryManager
    _strategy: Callable[[], str]
    _memory_index: Callable[[bool], str | None]

    def _tools(self, strategy: str, memory_index: str | None = None, emit: Emit | None = None) -> ToolRegistry:
        # read_memory only when memory is on and holds something: else it is noise.
        reader = MemoryReader(self.memory) if memory_index else None
        tools = build_tools(self.workspace, python_executor=self.python_executor, memory=reader)
        if self.notebook is not None:
            for tool in notebook_tools(self.notebook):
                tools.add(tool)
        for user_tool in user_tools():
            if user_tool.name not in tools:
                tools.add(user_tool.as_tool())
        if strategy == "rollover":
            tools.add(new_context_tool(self.workspace, lambda intent: self._declare_rollover(intent, emit)))
            tools.add(search_history_tool(self.history, lambda: self.session.id if self.session else None))
        for tool in self._mcp.tools() if self._mcp is not None else ():
            tools.add(tool)
        return tools

    # --- MCP servers -------------------------------------------------------------------------

    @property
    def mcp(self) -> McpHub:
        """The kernel's MCP servers (``%mcp``); nothing runs until a run or ``%mcp`` starts them."""
        if self._mcp is None:
            self._mcp = McpHub()
        return self._mcp

    def prepare_mcp(self, *, start: bool = True) -> list[str]:
        """Match the servers to the configuration now, starting new ones; problems as lines."""
        hub = self.mcp
        hub.start_timeout, hub.call_timeout = self.settings.mcp_start_timeout, self.settings.mcp_timeout
        config = load_config(self.workspace, self.settings.mcp_servers)
        return hub.configure(config, self.workspace, start=start)

    def describe_tools(self) -> str:
        """``%agent --tools``: every tool the next run offers, the user's own marked."""
        tools = self._tools(self._strategy(), self._memory_index(self.settings.memory_policy != "off"))
        mine = {t.name: t for t in user_tools()}
        lines = [f"{len(tools)} tools (permission mode {self.settings.permission_mode}):"]
        for tool in tools:
            kind = "changes things" if tool.side_effect else "read-only"
            origin = " · yours (@tool)" if tool.name in mine and mine[tool.name].args is tool.args else ""
            summary = tool.description.split(". ")[0].strip().rstrip(".")
            lines.append(f"  {tool.name:<18} {kind}{origin} — {summary[:90]}")
        if not mine:
            lines.append("  (no @tool functions registered: from pseudoclaude_nb import tool)")
        return "\n".join(lines)

    def _sections(self, strategy: str, memory_index: str | None = None) -> list[tuple[str, str]]:
        sections = system_sections(self.workspace)
        if strategy == "rollover":
            sections.append(("rollover", GUIDANCE))
        return with_memory(sections, memory_index)

    def _declare_rollover(self, intent: Intent, emit: Emit | None) -> str:
        if self.session is None:
            raise ToolError("new_context needs a session; keep working in this window")
        return self.session.context.declare(intent, emit or _ignore)


class Relay:
    """The events of one run, for what is built before its runner (the tools)."""

    def __init__(self) -> None:
        self.target: Emit = _ignore

    def __call__(self, event: RunEvent) -> None:
        self.target(event)


def _ignore(event: RunEvent) -> None:
    pass
