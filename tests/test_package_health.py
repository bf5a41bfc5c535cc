"""The package as a whole (issue 12): no import cycle, every import declared, ``__all__`` honest.

Like httpx's ``tests/test_exported_members.py``: what a package exports is exactly what its
``__all__`` says.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import pkgutil
import re
import sys
import types
from pathlib import Path

import pytest
import tomllib

import pseudoclaude_nb

ROOT = Path(pseudoclaude_nb.__file__).parent
PYPROJECT = ROOT.parent / "pyproject.toml"


def modules() -> dict[str, Path]:
    out = {}
    for f in ROOT.rglob("*.py"):
        parts = f.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def imports(name: str, path: Path) -> list[tuple[str, int]]:
    """(absolute module, level) of every import statement in the file, TYPE_CHECKING ones too."""
    is_pkg = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(a.name, 0) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                found += [(f"{target}.{a.name}", node.level) for a in node.names]
                found.append((target, node.level))
            else:
                found += [(f"{node.module}.{a.name}", 0) for a in node.names]
                found.append((node.module or "", 0))
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    edges: dict[str, set[str]] = {}
    for name, path in mods.items():
        own = {".".join(name.split(".")[:k]) for k in range(1, name.count(".") + 2)}
        deps = set()
        for target, _ in imports(name, path):
            parts = target.split(".")
            # Importing a.b.c runs a.b's __init__ first: each package on the way is a dependency.
            for k in range(2, len(parts) + 1):
                prefix = ".".join(parts[:k])
                if prefix in mods and prefix not in own:
                    deps.add(prefix)
        edges[name] = deps
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_the_import_graph_has_no_cycle():
    """Type-only imports count too: a view that imports its agent is a circle even if lazy."""
    assert cycles(graph()) == []


def test_the_log_layer_imports_no_index_and_tools_import_no_log_layer():
    """Issue 33: ``session/`` tells its derived index through a hook and never imports it;
    tools, memory and MCP take ``workspace`` and ``safeio`` from the top level, not ``session/``."""
    edges = graph()
    wrong = sorted(
        (name, dep)
        for name, deps in edges.items()
        for dep in deps
        if (name.startswith("pseudoclaude_nb.session") and dep.startswith("pseudoclaude_nb.history"))
        or (
            name.split(".")[1:2] in (["tools"], ["memory"], ["mcp"])
            and dep.startswith("pseudoclaude_nb.session")
        )
    )
    assert wrong == []


def test_the_cycle_check_can_fail():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]


def _declared() -> set[str]:
    data = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    names = set()
    for spec in data["project"]["dependencies"]:
        names.add(re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower().replace("_", "-"))
    return names


def test_every_imported_distribution_is_declared():
    declared = _declared()
    owners = importlib.metadata.packages_distributions()
    missing = {}
    for name, path in modules().items():
        for target, level in imports(name, path):
            top = target.split(".")[0]
            if level or not top or top == "pseudoclaude_nb" or top in sys.stdlib_module_names:
                continue
            dists = {d.lower().replace("_", "-") for d in owners.get(top, [top])}
            if not dists & declared:
                missing.setdefault(top, name)
    assert missing == {}, f"imported but not in pyproject.toml's dependencies: {missing}"


def packages() -> list[str]:
    names = ["pseudoclaude_nb"]
    names += [m.name for m in pkgutil.walk_packages([str(ROOT)], "pseudoclaude_nb.") if m.ispkg]
    return names


def _defined_in(value: object, package: str) -> bool:
    where = getattr(value, "__module__", None)
    if not isinstance(where, str) or isinstance(value, (str, int, float, tuple, frozenset, dict)):
        return True  # a constant: defined where it is named
    return where == package or where.startswith(package + ".")


@pytest.mark.parametrize("name", packages())
def test_all_lists_exactly_what_a_package_exports(name: str):
    module = importlib.import_module(name)
    declared = getattr(module, "__all__", None)
    if declared is None:
        pytest.skip(f"{name} declares no __all__")
    assert len(declared) == len(set(declared)), "a name listed twice"
    for item in declared:
        assert hasattr(module, item), f"{name}.__all__ names {item!r}, which does not exist"
    public = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and not isinstance(v, types.ModuleType)
        # what the package itself defines (in it or its modules), not what its own code imports
        # from elsewhere (Any, Path, or pseudoclaude_nb.errors' ConfigError in providers)
        and _defined_in(v, name)
        and n not in ("annotations", "TYPE_CHECKING")
    }
    assert sorted(public - set(declared)) == [], f"{name} exports names its __all__ does not list"
