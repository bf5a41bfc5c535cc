"""The IPython face of the package: thin magics and renderers over the core."""

from __future__ import annotations

from typing import Any

from ..agent import Agent
from ..config import PseudoClaude
from ..envtrust import remember_user_env
from ..notebook import CellStore
from ..providers import clients
from .agent import AgentMagics
from .context import ContextMagics
from .mcp import McpMagics
from .memory import MemoryMagics
from .notebook import CellRecorder, IPythonNotebook, question_transformer
from .python_exec import python_executor
from .sessions import SessionMagics

_AGENTS: dict[int, Agent] = {}
_RECORDERS: dict[int, CellRecorder] = {}


def current_agent(shell: Any) -> Agent:
    """The agent of this shell (for tests and power users)."""
    return _AGENTS[id(shell)]


def register(shell: Any) -> Agent:
    if id(shell) in _AGENTS:
        return _AGENTS[id(shell)]
    # What the user's environment holds now is theirs: tool commands keep those of its
    # startup variables (BASH_ENV, LD_PRELOAD, …) and no others (workspace trust, SPEC §19).
    remember_user_env()
    settings = PseudoClaude(parent=shell)
    shell.configurables.append(settings)
    notebook_file = shell.user_ns.get("__vsc_ipynb_file__")
    store = CellStore()
    agent = Agent(
        settings,
        notebook_file=notebook_file,
        python_executor=python_executor(shell),
        notebook=IPythonNotebook(shell, store),
    )
    magics = [
        AgentMagics(shell, agent),
        SessionMagics(shell, agent),
        ContextMagics(shell, agent),
        MemoryMagics(shell, agent),
        McpMagics(shell, agent),
    ]
    shell.register_magics(*magics)
    names = {name for m in magics for kind in m.magics.values() for name in kind}

    def package_names() -> set[str]:
        return names

    recorder = CellRecorder(shell, store, package_names)
    recorder.install()
    shell.input_transformers_cleanup.append(question_transformer(package_names))
    _AGENTS[id(shell)] = agent
    _RECORDERS[id(shell)] = recorder
    return agent


def unregister(shell: Any) -> None:
    recorder = _RECORDERS.pop(id(shell), None)
    if recorder is not None:
        recorder.uninstall()
    shell.input_transformers_cleanup[:] = [
        t for t in shell.input_transformers_cleanup if not getattr(t, "pseudoclaude", False)
    ]
    agent = _AGENTS.pop(id(shell), None)
    if agent is not None:
        agent.close()
        shell.configurables[:] = [c for c in shell.configurables if c is not agent.settings]
    clients.close_all()  # the providers' kept HTTP clients (atexit closes them at kernel exit too)
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
    "CellRecorder",
    "ContextMagics",
    "IPythonNotebook",
    "McpMagics",
    "MemoryMagics",
    "SessionMagics",
    "current_agent",
    "python_executor",
    "question_transformer",
    "register",
    "unregister",
]
