"""The IPython face of the package: thin magics and renderers over the core.

``register`` is all ``%load_ext`` runs, and it stays cheap (issue 30: at most twice
``import IPython``): it keeps the user's environment, makes the settings, installs the cell
recorder and the ``?`` fix, and registers each magic name (``deferred``). The agent, the
Magics classes and everything a run needs are imported and built on the first magic call
(``current_agent``); ``%sessions`` works through a ``SessionHost`` (``session_host``) and
builds the agent only for the actions that need it (issue 34). Keep it so: nothing imported
at the top of this module, ``notebook`` or ``deferred`` may import the agent, providers,
widgets, MCP or their libraries (``tests/test_startup.py`` checks).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..config import PseudoClaude
from ..envtrust import remember_user_env
from ..lazy import exports
from ..notebook.store import CellStore
from . import deferred
from .notebook import CellRecorder, IPythonNotebook, question_transformer

if TYPE_CHECKING:
    from ..agent import Agent
    from .agent import AgentMagics
    from .context import ContextMagics
    from .mcp import McpMagics
    from .memory import MemoryMagics
    from .python_exec import python_executor
    from .session_host import SessionHost
    from .sessions import SessionMagics
    from .studio import StudioMagics


@dataclass
class _Loaded:
    """What ``%load_ext`` set up in one shell; the agent comes with the first magic call."""

    settings: PseudoClaude
    store: CellStore
    recorder: CellRecorder
    notebook_file: str | None
    agent: Agent | None = None
    host: SessionHost | None = None  # what %sessions works with, made on its first call
    warm: Any = None  # a kernel's warm-up of the first run's imports (``warm.Warmer``)


_LOADED: dict[int, _Loaded] = {}
# The recorders by shell: the wire benchmark pauses and resumes them from inside a kernel.
_RECORDERS: dict[int, CellRecorder] = {}


def current_agent(shell: Any) -> Agent:
    """The agent of this shell (for the magics, tests and power users), built on first ask."""
    loaded = _LOADED[id(shell)]
    if loaded.agent is None:
        from ..agent import Agent
        from .python_exec import python_executor

        loaded.agent = Agent(
            loaded.settings,
            notebook_file=loaded.notebook_file,
            python_executor=python_executor(shell),
            notebook=IPythonNotebook(shell, loaded.store, deferred.magic_names),
        )
        if loaded.host is not None:
            # What %sessions did before the agent existed: its history index's backlog and
            # a resume whose conversation the agent loads now.
            loaded.host.adopt(loaded.agent)
    return loaded.agent


def sessions_of(shell: Any) -> SessionHost:
    """What ``%sessions`` of this shell works with: the agent's state once built, files before."""
    loaded = _LOADED[id(shell)]
    if loaded.host is None:
        from .session_host import SessionHost

        loaded.host = SessionHost(
            loaded.settings,
            loaded.notebook_file,
            build=lambda: current_agent(shell),
            built=lambda: loaded.agent,
        )
    return loaded.host


def register(shell: Any) -> None:
    if id(shell) in _LOADED:
        return
    # What the user's environment holds now is theirs: tool commands keep those of its
    # startup variables (BASH_ENV, LD_PRELOAD, …) and no others (workspace trust, SPEC §19).
    remember_user_env()
    settings = PseudoClaude(parent=shell)
    shell.configurables.append(settings)
    store = CellStore()
    names = deferred.magic_names()

    def package_names() -> set[str]:
        return names

    recorder = CellRecorder(shell, store, package_names)
    loaded = _Loaded(settings, store, recorder, notebook_file=shell.user_ns.get("__vsc_ipynb_file__"))
    _LOADED[id(shell)] = loaded
    _RECORDERS[id(shell)] = recorder

    def build(cls: type) -> Any:
        # %sessions reads files and builds the agent only when an action needs it (issue 34).
        if getattr(cls, "takes_host", False):
            return cls(shell, sessions_of(shell))
        return cls(shell, current_agent(shell))

    table = shell.magics_manager.magics
    for class_name in deferred.MAGICS:
        for kind, name, stand_in in deferred.DeferredMagics(class_name, build).stand_ins():
            table[kind][name] = stand_in  # what IPython's register_magics records, minus the class
    recorder.install()
    shell.input_transformers_cleanup.append(question_transformer(package_names))
    if getattr(shell, "kernel", None) is not None:
        # In a kernel the first run's imports are done while it is idle, not by %load_ext
        # nor on the way to the first request (issue 47).
        from .warm import warmer

        loaded.warm = warmer(shell, settings)


def unregister(shell: Any) -> None:
    recorder = _RECORDERS.pop(id(shell), None)
    if recorder is not None:
        recorder.uninstall()
    shell.input_transformers_cleanup[:] = [
        t for t in shell.input_transformers_cleanup if not getattr(t, "pseudoclaude", False)
    ]
    loaded = _LOADED.pop(id(shell), None)
    if loaded is not None:
        if loaded.warm is not None:
            loaded.warm.close()
        if loaded.host is not None:
            loaded.host.close()  # a pending resume's lock, the host's own history index
        if loaded.agent is not None:
            loaded.agent.close()
            if isinstance(loaded.agent.notebook, IPythonNotebook):
                loaded.agent.notebook.close()  # the live document's connection
        shell.configurables[:] = [c for c in shell.configurables if c is not loaded.settings]
    # The providers' kept HTTP clients (atexit closes them at kernel exit too); none were made
    # if no run ever imported the module.
    clients = sys.modules.get("pseudoclaude_nb.providers.clients")
    if clients is not None:
        clients.close_all()
    for _, kinds in deferred.MAGICS.values():
        for kind, names in kinds.items():
            for name in names:
                shell.magics_manager.magics[kind].pop(name, None)


__all__ = [
    "AgentMagics",
    "CellRecorder",
    "ContextMagics",
    "IPythonNotebook",
    "McpMagics",
    "MemoryMagics",
    "SessionMagics",
    "StudioMagics",
    "current_agent",
    "python_executor",
    "sessions_of",
    "question_transformer",
    "register",
    "unregister",
]

# The Magics classes and the executor import the agent's world: only when asked for.
__getattr__, __dir__ = exports(
    __name__,
    {
        ".agent": ("AgentMagics",),
        ".context": ("ContextMagics",),
        ".mcp": ("McpMagics",),
        ".memory": ("MemoryMagics",),
        ".python_exec": ("python_executor",),
        ".sessions": ("SessionMagics",),
        ".studio": ("StudioMagics",),
    },
)
