"""``inspect_variable``'s work: what a dotted name in the user's namespace holds.

Resolving the name calls nothing: each attribute is looked up with
``inspect.getattr_static``, so a property getter, ``__getattr__`` or descriptor never runs
(a property is reported as such, not evaluated). Describing the value does call ``repr``,
in a worker thread with a time cap, because a user's ``__repr__`` may raise or hang.
pandas and numpy objects get their own summaries when the user imported those libraries:
this module looks them up in ``sys.modules`` and never imports them.
"""

from __future__ import annotations

import difflib
import inspect
import reprlib
import sys
import threading
import types
from collections import deque
from collections.abc import Mapping
from typing import Any

from ..errors import ToolError

REPR_CAP = 2_000
REPR_SECONDS = 2.0
FIRST_ITEMS = 5
KEYS_SHOWN = 20
# Names every IPython namespace has; suggesting them for a typo is noise.
_SHELL_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}
# What getattr_static hands back for an attribute computed on access: reported, never run.
_COMPUTED = (property, types.GetSetDescriptorType, types.MemberDescriptorType)
_BUILTIN_CONTAINERS = (list, tuple, dict, set, frozenset, deque, str, bytes, bytearray, range)

_reprlib = reprlib.Repr()
_reprlib.maxstring = REPR_CAP
_reprlib.maxother = REPR_CAP
_reprlib.maxlist = _reprlib.maxtuple = _reprlib.maxset = _reprlib.maxfrozenset = 50
_reprlib.maxdict = _reprlib.maxdeque = 50
_reprlib.maxlevel = 4


def resolve(namespace: Mapping[str, Any], name: str) -> Any:
    """The object ``name`` (``a.b.c``) names, looked up statically; ``ToolError`` if unknown."""
    parts = name.strip().split(".")
    if not parts or not all(p.isidentifier() for p in parts):
        raise ToolError(f"{name!r} is not a dotted Python name (like df or model.config.lr)")
    head = parts[0]
    if head not in namespace:
        raise ToolError(_unknown(head, [k for k in namespace if not k.startswith("_")], "the notebook"))
    obj = namespace[head]
    for i, attr in enumerate(parts[1:], start=1):
        try:
            obj = inspect.getattr_static(obj, attr)
        except AttributeError:
            where = ".".join(parts[:i])
            raise ToolError(_unknown(attr, _static_names(obj), where)) from None
        if isinstance(obj, _COMPUTED) and i < len(parts) - 1:
            raise ToolError(
                f"{'.'.join(parts[: i + 1])} is computed by a {type(obj).__name__}; "
                "inspect_variable does not run code to read it (use run_python if allowed)"
            )
    return obj


def _unknown(name: str, candidates: list[str], where: str) -> str:
    names = [c for c in candidates if c not in _SHELL_NAMES]
    similar = difflib.get_close_matches(name, names, n=5, cutoff=0.5)
    if not similar:
        similar = sorted(c for c in names if name.lower() in c.lower())[:5]
    hint = f"; similar names: {', '.join(similar)}" if similar else ""
    return f"no name {name!r} in {where}{hint}"


def _static_names(obj: Any) -> list[str]:
    names: set[str] = set()
    try:
        names.update(object.__getattribute__(obj, "__dict__"))
    except (AttributeError, TypeError):
        pass
    for klass in type(obj).__mro__:
        names.update(vars(klass))
    return sorted(n for n in names if not n.startswith("__"))


def describe(obj: Any, name: str) -> str:
    """Type and the size facts that apply, then a capped repr: the tool's result text."""
    lines = [f"{name}: {_type_name(obj)}"]
    if isinstance(obj, _COMPUTED):
        lines.append(f"a {type(obj).__name__} on the class: its value is computed on access and was not read")
        doc = getattr(obj, "__doc__", None)
        if isinstance(doc, str) and doc.strip():
            lines.append(f"doc: {doc.strip().splitlines()[0][:200]}")
        return "\n".join(lines)
    lines += _library_facts(obj) or _builtin_facts(obj)
    lines.append("repr: " + safe_repr(obj))
    return "\n".join(lines)


def _type_name(obj: Any) -> str:
    kind = type(obj)
    module = getattr(kind, "__module__", "") or ""
    qual = getattr(kind, "__qualname__", kind.__name__)
    return qual if module in ("builtins", "__main__") else f"{module}.{qual}"


def _builtin_facts(obj: Any) -> list[str]:
    if not isinstance(obj, _BUILTIN_CONTAINERS):
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)):
            try:
                return [f"signature: {getattr(obj, '__name__', '')}{inspect.signature(obj)}"]
            except (TypeError, ValueError):
                return []
        return []
    facts = [f"len: {len(obj):,}"]
    if isinstance(obj, dict):
        keys = [_short(k) for k in list(obj)[:KEYS_SHOWN]]
        more = f" … ({len(obj) - KEYS_SHOWN:,} more)" if len(obj) > KEYS_SHOWN else ""
        facts.append(f"keys: {', '.join(keys)}{more}")
    elif isinstance(obj, (list, tuple, deque, set, frozenset, range)):
        items = [_short(x) for _, x in zip(range(FIRST_ITEMS), obj, strict=False)]
        facts.append(f"first items: {', '.join(items)}")
        kinds = {type(x).__name__ for _, x in zip(range(200), obj, strict=False)}
        if kinds:
            facts.append(f"item types: {', '.join(sorted(kinds))}")
    return facts


def _library_facts(obj: Any) -> list[str]:
    """Summaries for numpy and pandas objects, only when the user has imported them."""
    pd = sys.modules.get("pandas")
    np = sys.modules.get("numpy")
    if pd is not None:
        if isinstance(obj, pd.DataFrame):
            cols = [str(c) for c in list(obj.columns)[:KEYS_SHOWN]]
            dtypes = [f"{c}: {t}" for c, t in list(obj.dtypes.items())[:KEYS_SHOWN]]
            more = f" … ({obj.shape[1] - KEYS_SHOWN:,} more)" if obj.shape[1] > KEYS_SHOWN else ""
            return [
                f"shape: {obj.shape}",
                f"columns: {', '.join(cols)}{more}",
                f"dtypes: {', '.join(dtypes)}{more}",
                f"index: {type(obj.index).__name__}, {len(obj.index):,} entries",
            ]
        if isinstance(obj, pd.Series):
            return [f"shape: {obj.shape}", f"dtype: {obj.dtype}", f"name: {obj.name!r}"]
        if isinstance(obj, pd.Index):
            return [f"len: {len(obj):,}", f"dtype: {obj.dtype}"]
    if np is not None:
        if isinstance(obj, np.ndarray):
            return [f"shape: {obj.shape}", f"dtype: {obj.dtype}", f"size: {obj.size:,}"]
        if isinstance(obj, np.generic):
            return [f"dtype: {obj.dtype}"]
    return []


def _short(value: Any) -> str:
    text = safe_repr(value, cap_chars=80, seconds=0.5)
    return text


def safe_repr(obj: Any, *, cap_chars: int = REPR_CAP, seconds: float = REPR_SECONDS) -> str:
    """``repr(obj)`` capped at ``cap_chars``; a raising or hanging ``__repr__`` is reported.

    Builtin containers use ``reprlib`` (bounded work for a 10-million-item list); anything
    else runs its own ``__repr__`` in a daemon thread given ``seconds``. A hung thread cannot
    be stopped from Python; it is left to finish on its own.
    """
    if isinstance(obj, (*_BUILTIN_CONTAINERS, int, float, complex, bool, type(None))):
        try:
            text = _reprlib.repr(obj)
        except Exception as exc:  # noqa: BLE001 - an item's __repr__ may raise
            return f"(repr raised {type(exc).__name__}: {exc})"
        return _cut(text, cap_chars)
    box: list[Any] = []

    def work() -> None:
        try:
            box.append(("ok", repr(obj)))
        except BaseException as exc:  # noqa: BLE001 - reported, never raised
            box.append(("error", exc))

    worker = threading.Thread(target=work, name="pseudoclaude-repr", daemon=True)
    worker.start()
    worker.join(seconds)
    if not box:
        return f"(repr did not finish within {seconds:g} s; not shown)"
    kind, value = box[0]
    if kind == "error":
        return f"(repr raised {type(value).__name__}: {str(value)[:200]})"
    return _cut(value if isinstance(value, str) else str(value), cap_chars)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters in all)"


def inspect_variable(namespace: Mapping[str, Any], name: str) -> str:
    return describe(resolve(namespace, name), name.strip())
