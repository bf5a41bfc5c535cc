"""A package's public names, imported on first access (PEP 562), so startup stays lean.

``%load_ext`` must cost at most twice ``import IPython`` (issue 30): a package ``__init__``
that imports its modules eagerly makes anyone who needs one of them pay for all of them
(the widgets' ``__init__`` alone pulls in ipywidgets). Such a package lists its names with
their modules here instead; each is imported the first time someone asks for it and kept
in the package's namespace after that. The ``TYPE_CHECKING`` imports next to each use keep
type checkers and readers seeing the same names.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def exports(
    package: str, where: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` for ``package``: ``where`` maps each submodule
    (".gauge") to the names it gives. ``__dir__`` lists them before they are imported, so
    tab completion sees them."""
    owner = {name: module for module, names in where.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = owner.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)  # asked once: a plain attribute from now on
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(owner))

    return __getattr__, __dir__
