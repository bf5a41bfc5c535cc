"""The magics as ``%load_ext`` registers them: the names now, the code on first call.

Importing a Magics class imports what it works with — the agent, the providers, the session
store, the widgets: ~550 modules and over a second, where issue 30 allows ``%load_ext`` twice
``import IPython``. So ``%load_ext`` registers a stand-in for each magic name (``MAGICS``
says which class and module answer it). The first call of any magic of a class imports
that class, builds it over the kernel's agent (built then too) and hands the call on;
later calls go straight to the built instance. ``%agent?`` reads the real docstring
through IPython's ``getdoc`` hook, so help still shows every option.

``tests/test_startup.py`` checks this table against the classes themselves.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from IPython.core.magic import MAGIC_NO_VAR_EXPAND_ATTR

# Class -> (its module in this package, its magic names by kind). A line_cell magic is
# listed under both kinds, as IPython records it.
MAGICS: dict[str, tuple[str, dict[str, tuple[str, ...]]]] = {
    "AgentMagics": (".agent", {"line": ("agent",), "cell": ("agent",)}),
    "SessionMagics": (".sessions", {"line": ("sessions",)}),
    "ContextMagics": (".context", {"line": ("context", "compact")}),
    "MemoryMagics": (".memory", {"line": ("memory",), "cell": ("memory",)}),
    "McpMagics": (".mcp", {"line": ("mcp",)}),
    "StudioMagics": (".studio", {"line": ("studio",)}),
}
# The magics that take their line as typed (``@no_var_expand``): IPython reads the flag off the
# function it calls, before the class is imported. ``sessions`` expands its line itself for
# every action but ``search`` (issue 41: free text as typed, ids from variables as before).
AS_TYPED = frozenset({"agent", "context", "compact", "memory", "sessions"})


def magic_names() -> set[str]:
    return {name for _, kinds in MAGICS.values() for names in kinds.values() for name in names}


def magics_class(class_name: str) -> type:
    module, _ = MAGICS[class_name]
    return getattr(importlib.import_module(module, __package__), class_name)


class DeferredMagics:
    """One Magics class of one shell: imported and built (by ``build``) on first use."""

    def __init__(self, class_name: str, build: Callable[[type], Any]) -> None:
        self.class_name = class_name
        self._build = build
        self._instance: Any = None

    def instance(self) -> Any:
        if self._instance is None:
            self._instance = self._build(magics_class(self.class_name))
        return self._instance

    def stand_ins(self) -> list[tuple[str, str, DeferredMagic]]:
        """(kind, name, stand-in) for every magic the class has; one stand-in per name."""
        _, kinds = MAGICS[self.class_name]
        made: dict[str, DeferredMagic] = {}
        return [
            (kind, name, made.setdefault(name, DeferredMagic(self, name)))
            for kind, names in kinds.items()
            for name in names
        ]


class DeferredMagic:
    """What IPython calls for one magic name: the real method, once its class is built."""

    def __init__(self, owner: DeferredMagics, name: str) -> None:
        self.owner = owner
        self.name = name
        self.__name__ = name
        if name in AS_TYPED:
            setattr(self, MAGIC_NO_VAR_EXPAND_ATTR, True)

    def __call__(self, *args: Any) -> Any:
        # (line) for a line magic, (line, cell) for a cell magic: as the real method takes them.
        return getattr(self.owner.instance(), self.name)(*args)

    def getdoc(self) -> str | None:
        """IPython's help (``%agent?``) asks objects for their docs here: the real method's."""
        return getattr(magics_class(self.owner.class_name), self.name).__doc__

    # ``%magic``, ``inspect.getdoc`` and others read ``__doc__`` itself: the real one too.
    __doc__ = property(getdoc)

    def __repr__(self) -> str:
        return f"<%{self.name} of {self.owner.class_name}, imported on first call>"
