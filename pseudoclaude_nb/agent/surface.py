"""What a run offers the model: its tools (built-in, notebook, ``@tool``, the strategy's, MCP)
and its system prompt's sections; ``%agent --tools`` lists the same tools.

``RunSurface`` is one part of the agent: the plan of a run and of ``%context`` build their
tool list here, so what ``%context`` shows is what the model gets. The strategy declares the
host tools and the sections it adds (``Strategy.tools``, ``.sections``). Two tools of one name (a
``@tool`` named like a built-in or an MCP tool) never break a run: the first is kept and the
clash is a notice.

Project MCP servers (the workspace's ``.mcp.json``) are asked about here, before a run
starts them (SPEC §19); without stdin they stay off and a notice says how to approve them.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import PseudoClaude
from ..context.host_tools import host_tools
from ..context.layer1 import Emit
from ..context.pins import Pins
from ..events import Notice, RunEvent
from ..history import HistoryIndex
from ..mcp.config import load_config
from ..notebook import NotebookHost
from ..notebook.host import DocumentAccess
from ..prompt import project_sections, with_memory, with_pins
from ..strategies import Strategy
from ..tools import MemoryReader, PythonExecutor, ToolRegistry, build_tools
from ..tools.compact_set import compact
from ..tools.document import NotebookTools
from ..tools.notebook import notebook_tools
from ..tools.registry import Tool
from ..tools.user import user_tools
from .memory import RunMemory

if TYPE_CHECKING:
    from ..context.host import ContextHost
    from ..mcp.hub import McpHub


class RunSurface:
    """The tools and system sections of a run, and the MCP servers that add tools."""

    def __init__(
        self,
        settings: PseudoClaude,
        *,
        workspace: Callable[[], Path],
        history: Callable[[], HistoryIndex],
        memory: RunMemory,
        pins: Pins,
        notebook: NotebookHost | None = None,
        python_executor: PythonExecutor | None = None,
        ask: Callable[[str], str] | None = None,
        stamp: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.settings = settings
        self._workspace, self._history = workspace, history  # the agent's: they follow the workspace
        self.memory = memory
        self.pins = pins
        self.notebook = notebook
        self.python_executor = python_executor
        self.ask = ask
        self.stamp = stamp or dict  # metadata.pseudoclaude of the cells the agent changes: session, step
        self.document: DocumentAccess | None = None  # the notebook document the last tool set was made for
        self._mcp: McpHub | None = None  # MCP servers: up from the first run to close()

    def tools(
        self,
        strategy: Strategy,
        memory_index: str | None = None,
        emit: Emit | None = None,
        *,
        host: ContextHost | None = None,
    ) -> ToolRegistry:
        """The run's tools; ``host``: the session's context, which the strategy's host tools
        declare to (None: a dry plan's, only listed)."""
        # read_memory only when memory is on and holds something: else it is noise.
        reader = MemoryReader(self.memory.memory) if memory_index else None
        tools = build_tools(self._workspace(), python_executor=self.python_executor, memory=reader)
        origin = dict.fromkeys(tools.names(), "built-in")
        extra: list[tuple[Tool, str]] = []
        if self.notebook is not None:
            extra += [(tool, "notebook") for tool in notebook_tools(self.notebook)]
            access = self.document = self.notebook.document(live=self.settings.notebook_document)
            if access.document is not None:
                document = NotebookTools(access.document, access.cells, self.stamp)
                extra += [(tool, "notebook") for tool in document.tools()]
            if access.news:
                (emit or _ignore)(Notice(access.news))
        extra += [(user_tool.as_tool(), "@tool") for user_tool in user_tools()]
        if host is not None:
            declared = host.tools(self._history(), emit or _ignore)
        else:
            declared = host_tools(
                tuple(strategy.tools), workspace=self._workspace(), session_id=None, history=self._history()
            )
        extra += [(tool, f"{strategy.name} strategy") for tool in declared]
        extra += [(tool, f"MCP server {tool.server!r}") for tool in (self._mcp.tools() if self._mcp else ())]
        for tool, source in extra:
            if tool.name in tools:
                # issue: a @tool named like an MCP tool made every run raise; the first one stays.
                first = origin.get(tool.name, "another tool")
                (emit or _ignore)(
                    Notice(
                        f"two tools are named {tool.name!r}: the {first} one and the {source} one; the "
                        f"{source} one is left out of this run. Rename one of them",
                        "warning",
                    )
                )
                continue
            tools.add(tool)
            origin[tool.name] = source
        if self.settings.compact_tools:
            tools = compact(tools)  # issue 32: a small window's set
        return tools

    # --- MCP servers -------------------------------------------------------------------------

    @property
    def mcp(self) -> McpHub:
        """The kernel's MCP servers (``%mcp``); nothing runs until a run or ``%mcp`` starts them."""
        if self._mcp is None:
            from ..mcp.hub import McpHub  # its event loop's imports: only once servers are asked for

            self._mcp = McpHub()
        return self._mcp

    def close(self) -> None:
        """Stop the MCP servers (the agent's end)."""
        if self._mcp is not None:
            self._mcp.close()

    def prepare_mcp(self, *, start: bool = True) -> list[str]:
        """Match the servers to the configuration now, starting new ones; problems as lines."""
        config = load_config(self._workspace(), self.settings.mcp_servers)
        if self._mcp is None and not config.servers:
            # No server, none ever started: no hub (a run without MCP never imports its loop).
            return [f"MCP configuration: {text}" for text in config.errors]
        hub = self.mcp
        hub.start_timeout, hub.call_timeout = self.settings.mcp_start_timeout, self.settings.mcp_timeout
        problems = hub.configure(config, self._workspace(), start=False)
        if start:
            problems += self._ask_mcp_approvals(hub)
            problems += hub.configure(config, self._workspace(), start=True)[len(config.errors) :]
        return problems

    def _ask_mcp_approvals(self, hub: McpHub) -> list[str]:
        """Ask about each unapproved project server; a line for each that stays off."""
        from ..mcp.approval import not_approved, question

        out = []
        for state in hub.unapproved():
            key = (state.name, state.config.digest)
            if key in hub.declined:
                out.append(not_approved(state.name))
                continue
            ask = self.ask or builtins.input
            try:
                answer = ask(question(state.config))
            except (EOFError, NotImplementedError, OSError, RuntimeError):
                # No stdin (NotImplementedError is IPython's StdinNotImplementedError): never start.
                out.append(not_approved(state.name))
                continue
            if (answer or "").strip().lower() in ("y", "yes"):
                hub.approvals.approve(hub.workspace, state.config)
            else:
                hub.declined.add(key)
                out.append(not_approved(state.name))
        return out

    def describe_tools(self, strategy: Strategy) -> str:
        """``%agent --tools`` as text: every tool the next run offers, the user's own marked."""
        head, rows, notes = self.tool_listing(strategy)
        lines = [head, *(f"  {name:<18} {kind} — {summary}" for name, kind, summary in rows)]
        return "\n".join(lines + [f"  {note}" for note in notes])

    def tool_listing(self, strategy: Strategy) -> tuple[str, list[tuple[str, str, str]], list[str]]:
        """The tools the next run offers with ``strategy``: a heading, a row per tool (name, what
        it may do and whose it is, the first sentence of its description) and the notes under them."""
        clashes: list[RunEvent] = []
        tools = self.tools(strategy, self.memory.index(self.settings.memory_policy != "off"), clashes.append)
        mine = {t.name: t for t in user_tools()}
        rows = []
        for tool in tools:
            kind = "changes things" if tool.side_effect else "read-only"
            origin = " · yours (@tool)" if tool.name in mine and mine[tool.name].args is tool.args else ""
            summary = tool.description.split(". ")[0].strip().rstrip(".")
            rows.append((tool.name, kind + origin, summary if len(summary) <= 90 else summary[:89] + "…"))
        notes = [] if mine else ["(no @tool functions registered: from pseudoclaude_nb import tool)"]
        notes += [f"note: {event.text}" for event in clashes if isinstance(event, Notice)]
        access = self.document
        if access is not None and access.why and not any(access.why in note for note in notes):
            what = "read from the saved file only" if access.document is not None else "not reachable"
            notes.append(f"note: the notebook's cells are {what} here ({access.why})")
        return f"{len(tools)} tools (permission mode {self.settings.permission_mode}):", rows, notes

    def sections(
        self, strategy: Strategy, memory_index: str | None, project: str | None
    ) -> list[tuple[str, str]]:
        """``project``: ``PSEUDOCLAUDE.md``'s head (``prompt.read_project_file``), read by the plan."""
        sections = project_sections(self._workspace(), project) + [
            (title, text) for title, text in strategy.sections
        ]
        # Pins are system text, not messages: no summary or handoff can drop or reword them.
        return with_memory(with_pins(sections, self.pins.texts()), memory_index)


def _ignore(event: RunEvent) -> None:
    """Nobody listens (``%agent --tools``, a dry plan): a clash is only listed."""
