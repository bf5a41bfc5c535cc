"""``inspect_variable``'s work: what a dotted name in the user's namespace holds.

Resolving the name calls nothing: each attribute is looked up with
``inspect.getattr_static``, so a property getter, ``__getattr__`` or descriptor never runs
(a property is reported as such, not evaluated). Describing the value may run the user's
code (a ``__repr__``, an item's ``__hash__``, a metaclass's ``__signature__``), so all of it
runs in worker threads under a time cap: the tool returns within about twice
``REPR_SECONDS`` whatever the object does. Size facts of a subclass of a builtin container
come from the builtin's own methods (``list.__len__(obj)``), never from its overrides.
pandas and numpy objects get their own summaries when the user imported those libraries:
this module looks them up in ``sys.modules`` and never imports them.
"""

from __future__ import annotations

import difflib
import inspect
import itertools
import re
import reprlib
import sys
import threading
import time
import types
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import ToolError
from ..redact import redacted_head

REPR_CAP = 2_000
REPR_SECONDS = 2.0
FIRST_ITEMS = 5
KEYS_SHOWN = 20
# Names every IPython namespace has; suggesting them for a typo is noise.
_SHELL_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}
# The shell's history: In, Out, _ih, _oh, _dh, _, __, ___, _i, _ii, _iii, _iN, _N. It holds
# every cell's source and result, those marked agent-skip too, so it is never described.
HISTORY_NAME = re.compile(r"In|Out|_ih|_oh|_dh|_{1,3}|_i{1,3}|_i?\d+")
# What getattr_static hands back for an attribute computed on access: reported, never run.
_COMPUTED = (property, types.GetSetDescriptorType, types.MemberDescriptorType)
_BUILTIN_CONTAINERS = (list, tuple, dict, set, frozenset, deque, str, bytes, bytearray, range)

_reprlib = reprlib.Repr()
_reprlib.maxstring = REPR_CAP
_reprlib.maxother = REPR_CAP
_reprlib.maxlist = _reprlib.maxtuple = _reprlib.maxset = _reprlib.maxfrozenset = 50
_reprlib.maxdict = _reprlib.maxdeque = 50
_reprlib.maxlevel = 4


def resolve(namespace: Mapping[str, Any], name: str, withheld: frozenset[str] = frozenset()) -> Any:
    """The object ``name`` (``a.b.c``) names, looked up statically; ``ToolError`` if unknown.

    ``withheld``: names a cell marked ``agent-skip`` bound (issue 41), refused like the
    shell's history, and never offered as a similar name."""
    parts = name.strip().split(".")
    if not parts or not all(p.isidentifier() for p in parts):
        raise ToolError(f"{name!r} is not a dotted Python name (like df or model.config.lr)")
    head = parts[0]
    if HISTORY_NAME.fullmatch(head):
        raise ToolError(
            f"{head} is the shell's history, which holds cells marked agent-skip too, so it is not "
            "described; read_cells shows the cells the agent may see"
        )
    if head in withheld:
        raise ToolError(
            f"{head} was set in a cell marked agent-skip: the person keeps it from the agent; "
            "ask them about it instead"
        )
    if head not in namespace:
        shown = [k for k in namespace if not k.startswith("_") and k not in withheld]
        raise ToolError(_unknown(head, shown, "the notebook"))
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


def describe(obj: Any, name: str, *, seconds: float = REPR_SECONDS) -> str:
    """Type and the size facts that apply, then a capped repr: the tool's result text.

    Built in a worker thread given ``2 * seconds`` in all (item reprs share ``seconds / 2``,
    the repr gets ``seconds``): what was found by then is returned, with a note for the rest.
    """
    lines: list[str] = []
    outcome = _capped(lambda: _describe(obj, name, lines, seconds), 2 * seconds)
    if outcome is None:
        return "\n".join(
            [*lines[:], f"(describing it did not finish within {2 * seconds:g} s; the rest is not shown)"]
        )
    if outcome[0] == "error":
        exc = outcome[1]
        return "\n".join([*lines[:], f"(describing it raised {type(exc).__name__}: {str(exc)[:200]})"])
    return "\n".join(lines)


def _describe(obj: Any, name: str, lines: list[str], seconds: float) -> None:
    lines.append(f"{name}: {_type_name(obj)}")
    if issubclass(type(obj), _COMPUTED):
        lines.append(f"a {type(obj).__name__} on the class: its value is computed on access and was not read")
        doc = getattr(obj, "__doc__", None)
        if isinstance(doc, str) and doc.strip():
            lines.append(f"doc: {doc.strip().splitlines()[0][:200]}")
        return
    lines += _library_facts(obj) or _builtin_facts(obj, time.monotonic() + seconds / 2)
    lines.append("repr: " + safe_repr(obj, seconds=seconds))


def _type_name(obj: Any) -> str:
    kind = type(obj)
    module = getattr(kind, "__module__", "") or ""
    qual = getattr(kind, "__qualname__", kind.__name__)
    return qual if module in ("builtins", "__main__") else f"{module}.{qual}"


def _builtin_base(kind: type) -> type[Any] | None:
    """The builtin container ``kind`` is or derives from: its methods, not the subclass's, are used."""
    return next((b for b in kind.__mro__ if b in _BUILTIN_CONTAINERS), None)


def _builtin_facts(obj: Any, deadline: float) -> list[str]:
    base = _builtin_base(type(obj))
    if base is None:
        if issubclass(type(obj), (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)):
            try:
                return [f"signature: {getattr(obj, '__name__', '')}{inspect.signature(obj)}"]
            except (TypeError, ValueError):
                return []
        return []
    size = base.__len__(obj)
    facts = [f"len: {size:,}"]

    def short(value: Any) -> str:
        left = round(deadline - time.monotonic(), 2)
        return (
            safe_repr(value, cap_chars=80, seconds=min(0.5, left)) if left > 0 else "(not shown: out of time)"
        )

    if base is dict:
        keys = [short(k) for k in itertools.islice(dict.__iter__(obj), KEYS_SHOWN)]
        more = f" … ({size - KEYS_SHOWN:,} more)" if size > KEYS_SHOWN else ""
        facts.append(f"keys: {', '.join(keys)}{more}")
    elif base in (list, tuple, deque, set, frozenset, range):
        items = [short(x) for x in itertools.islice(base.__iter__(obj), FIRST_ITEMS)]
        facts.append(f"first items: {', '.join(items)}")
        kinds = {type(x).__name__ for x in itertools.islice(base.__iter__(obj), 200)}
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


def safe_repr(obj: Any, *, cap_chars: int = REPR_CAP, seconds: float = REPR_SECONDS) -> str:
    """``repr(obj)`` capped at ``cap_chars``; a raising or hanging ``__repr__`` is reported.

    Builtin containers use ``reprlib`` (bounded work for a 10-million-item list); a subclass
    of one that keeps the builtin's ``__repr__`` is shown through its first items, read with the
    builtin's own methods; anything else runs its own ``__repr__``. All of it runs in a daemon
    thread given ``seconds`` (an item's ``__repr__`` is the user's code too). A hung thread
    cannot be stopped from Python; it is left to finish on its own.
    """
    outcome = _capped(lambda: _repr(obj), seconds)
    if outcome is None:
        return f"(repr did not finish within {seconds:g} s; not shown)"
    kind, value = outcome
    if kind == "error":
        return f"(repr raised {type(value).__name__}: {str(value)[:200]})"
    return _cut(value if isinstance(value, str) else str(value), cap_chars)


_SCALARS = (int, float, complex, bool, type(None))


def _repr(obj: Any) -> str:
    kind = type(obj)
    if kind in _BUILTIN_CONTAINERS or kind in _SCALARS:
        return _reprlib.repr(obj)
    base = _builtin_base(kind)
    if base is not None and kind.__repr__ is base.__repr__:
        return _reprlib.repr(_plain(obj, base))
    return repr(obj)


def _plain(obj: Any, base: type[Any]) -> Any:
    """The first items of a builtin subclass's value as the builtin itself, its overrides unused."""
    many = max(_reprlib.maxlist, _reprlib.maxdict) + 1  # one more than shown: reprlib adds "…"
    if base is dict:
        return {k: dict.__getitem__(obj, k) for k in itertools.islice(dict.__iter__(obj), many)}
    if base in (str, bytes, bytearray):
        return base.__getitem__(obj, slice(0, REPR_CAP + 1))
    items = list(itertools.islice(base.__iter__(obj), many))
    return items if base is list else base(items)


def _capped(work: Callable[[], Any], seconds: float) -> tuple[str, Any] | None:
    """("ok", value) or ("error", exception) from ``work`` run in a daemon thread; None if it
    did not finish within ``seconds``."""
    box: list[tuple[str, Any]] = []

    def run() -> None:
        try:
            box.append(("ok", work()))
        except BaseException as exc:  # noqa: BLE001 - reported, never raised
            box.append(("error", exc))

    worker = threading.Thread(target=run, name="pseudoclaude-inspect", daemon=True)
    worker.start()
    worker.join(max(seconds, 0.0))
    return box[0] if box else None


def _cut(text: str, limit: int) -> str:
    # Redacted before the cut: a key crossing it would leave a head no pattern knows.
    return text if len(text) <= limit else redacted_head(text, limit) + f"… ({len(text):,} characters in all)"


def inspect_variable(
    namespace: Mapping[str, Any],
    name: str,
    *,
    seconds: float = REPR_SECONDS,
    withheld: frozenset[str] = frozenset(),
) -> str:
    return describe(resolve(namespace, name, withheld), name.strip(), seconds=seconds)
