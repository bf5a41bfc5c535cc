"""Which strategy a setting names: the only place that tells strategies apart by name.

``strategy`` (``%agent --strategy``, ``%config PseudoClaude.strategy``) is one of

- a built-in: ``compact``, ``rollover`` or ``api`` (``policies.BUILT_IN``);
- ``MODULE:CLASS``: a class in a module. A module in the workspace (the notebook's folder:
  ``MODULE.py``, or ``MODULE/__init__.py``; dots are folders) is loaded from that file by its
  path, and only it: the workspace is never put on ``sys.path``, so naming one module never
  lets the workspace shadow another (a cloned repository's ``json.py``). Other modules are
  imported as usual. The person chose the code by naming it, as ``import`` in a cell would;
- a name in the entry-point group ``pseudoclaude_nb.strategies`` (an installed package's).

A name that does not load, a class that lacks ``decide`` or is not a ``Strategy``, or a
declaration the host does not know is one ``ConfigError`` line, said before any request.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import ConfigError
from ..providers.base import ManagesContext, Provider
from ..strategies import HOST_TOOLS, Strategy
from .names import BUILT_IN_NAMES, GROUP, HOW, normalized
from .policies import BUILT_IN

assert tuple(BUILT_IN) == BUILT_IN_NAMES  # the setting's names are the built-ins'


def load_strategy(spec: str, workspace: Path | None = None) -> Strategy:
    """The strategy ``spec`` names, made anew (a file in the workspace is read again: an edit
    shows at the next run). ``ConfigError`` with one line when it cannot be."""
    try:
        key = normalized(spec)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    built_in = BUILT_IN.get(key)
    if built_in is not None:
        return built_in()
    found = _from_module(key, workspace) if ":" in key else _from_entry_point(key)
    return _checked(_made(found, key), key)


def check_provider(strategy: Strategy, provider: Provider) -> None:
    """Refuse, before a run, a provider ``strategy`` cannot work with (``server_context`` needs
    one that manages the context itself, ``ManagesContext``): what to use instead."""
    if strategy.server_context and not isinstance(provider, ManagesContext):
        from .provider_compaction import unsupported  # the api strategy's mechanism: only to refuse

        raise unsupported(provider.name, strategy.name)


# --- loading ---------------------------------------------------------------------------------


def _from_module(key: str, workspace: Path | None) -> object:
    module_name, _, attr = key.partition(":")
    file = _workspace_file(workspace, module_name)
    try:
        module = _load_file(module_name, file) if file is not None else importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - the person's code: any failure is theirs, said in one line
        where = f" ({file})" if file is not None else ""
        raise ConfigError(
            f"strategy {key}: module {module_name}{where} does not import: {type(exc).__name__}: {exc}"
        ) from None
    if not hasattr(module, attr):
        raise ConfigError(f"strategy {key}: module {module_name} has no {attr}")
    return getattr(module, attr)


def _workspace_file(workspace: Path | None, module_name: str) -> Path | None:
    """The workspace's file for ``module_name`` (``a.b`` → ``a/b.py`` or ``a/b/__init__.py``)."""
    if workspace is None:
        return None
    base = workspace.joinpath(*module_name.split("."))
    for candidate in (base.with_name(base.name + ".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _load_file(module_name: str, file: Path) -> ModuleType:
    """The module at ``file``, executed anew under ``module_name`` (and kept in ``sys.modules``
    as an import would, so its classes pickle and its dataclasses resolve their annotations)."""
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    previous = sys.modules.get(module_name)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        if previous is None:
            sys.modules.pop(module_name, None)
        else:
            sys.modules[module_name] = previous
        raise
    return module


def _from_entry_point(name: str) -> object:
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group=GROUP) if ep.name == name]
    if not found:
        installed = sorted(ep.name for ep in entry_points(group=GROUP))
        raise ConfigError(
            f"strategy {name!r} is unknown: use {HOW}"
            + (f"; installed: {', '.join(installed)}" if installed else "; none is installed")
        )
    try:
        return found[0].load()
    except Exception as exc:  # noqa: BLE001 - an installed package's code: said in one line
        raise ConfigError(
            f"strategy {name} ({found[0].value}) does not import: {type(exc).__name__}: {exc}"
        ) from None


def _made(found: object, key: str) -> Strategy:
    if isinstance(found, Strategy):
        return found
    if not isinstance(found, type) or not issubclass(found, Strategy):
        what = f"class {found.__name__}" if isinstance(found, type) else f"a {type(found).__name__}"
        raise ConfigError(
            f"strategy {key}: {what} is not a strategy: write a class that subclasses "
            "pseudoclaude_nb.strategies.Strategy and has decide(self, view)"
        )
    if "decide" in getattr(found, "__abstractmethods__", ()):
        raise ConfigError(
            f"strategy {key}: class {found.__name__} lacks decide(self, view) -> action "
            "(return Keep() to change nothing)"
        )
    try:
        return found()
    except Exception as exc:  # noqa: BLE001 - the person's __init__: said in one line
        raise ConfigError(
            f"strategy {key}: {found.__name__}() failed: {type(exc).__name__}: {exc} "
            "(the host makes a strategy with no arguments)"
        ) from None


def _checked(strategy: Strategy, key: str) -> Strategy:
    """What the strategy declares, checked once here rather than failing in a run."""
    name, tools, sections = strategy.name, strategy.tools, strategy.sections
    problems: list[str] = []
    if not isinstance(name, str) or not name.strip():
        problems.append("its name must be a non-empty string")
    unknown = [t for t in _items(tools) if t not in HOST_TOOLS]
    if unknown or not isinstance(tools, tuple | list):
        problems.append(f"tools may name only {', '.join(HOST_TOOLS)} (got {tools!r})")
    if not isinstance(sections, tuple | list) or not all(
        isinstance(s, tuple | list) and len(s) == 2 and all(isinstance(x, str) for x in s) for s in sections
    ):
        problems.append("sections must be (title, text) pairs of strings")
    if problems:
        raise ConfigError(f"strategy {key}: " + "; ".join(problems))
    return strategy


def _items(value: Any) -> list[Any]:
    return list(value) if isinstance(value, tuple | list) else []


__all__ = ["GROUP", "check_provider", "load_strategy", "normalized"]
