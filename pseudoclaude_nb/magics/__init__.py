"""The IPython face of the package: thin magics and renderers over the core."""

from __future__ import annotations

from typing import Any

from ..agent import Agent
from ..config import PseudoClaude
from .agent import AgentMagics
from .context import ContextMagics
from .mcp import McpMagics
from .memory import MemoryMagics
from .python_exec import python_executor
from .sessions import SessionMagics

_AGENTS: dict[int, Agent] = {}


def current_agent(shell: Any) -> Agent:
    """The agent of this shell (for tests and power users)."""
    return _AGENTS[id(shell)]


def register(shell: Any) -> Agent:
    if id(shell) in _AGENTS:
        return _AGENTS[id(shell)]
    settings = PseudoClaude(parent=shell)
    shell.configurables.append(settings)
    notebook_file = shell.user_ns.get("__vsc_ipynb_file__")
    agent = Agent(settings, notebook_file=notebook_file, python_executor=python_executor(shell))
    shell.register_magics(
        AgentMagics(shell, agent),
        SessionMagics(shell, agent),
        ContextMagics(shell, agent),
        MemoryMagics(shell, agent),
        McpMagics(shell, agent),
    )
    _AGENTS[id(shell)] = agent
    return agent


def unregister(shell: Any) -> None:
    agent = _AGENTS.pop(id(shell), None)
    if agent is not None:
        agent.close()
        shell.configurables[:] = [c for c in shell.configurables if c is not agent.settings]
    for name, kind in (
        ("agent", "line"),
        ("agent", "cell"),
        ("sessions", "line"),
        ("context", "line"),
        ("compact", "line"),
        ("memory", "line"),
        ("memory", "cell"),
        ("mcp", "line"),
    ):
        shell.magics_manager.magics[kind].pop(name, None)


__all__ = [
    "AgentMagics",
    "ContextMagics",
    "McpMagics",
    "MemoryMagics",
    "SessionMagics",
    "current_agent",
    "register",
    "unregister",
]
