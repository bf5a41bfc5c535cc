"""Widgets that leave a static rendering behind, so a saved notebook reopens readable.

A widget's output holds a view of a model that lives in the kernel; saved and reopened
without it, JupyterLab and Notebook 7 show "Error displaying widget: model not found"
although the output carries HTML and text too (the view wins). A ``Settles`` widget is
shown with a display id, and when the next cell runs (clicks are only answered between
cells, so it stays interactive for as long as it is the last thing run) its output is
replaced in place by its own ``text/html`` and ``text/plain``, and the widget is closed.
The saved notebook then holds HTML and text, no widget state to find.

While it is live its output carries its ``text/html`` too (the same as the settled one: a
front end without widgets shows it, and nbval compares a run notebook's outputs with the
settled ones it recorded).
"""

from __future__ import annotations

import logging
from typing import Any

from IPython.display import display

# A failure that must not reach the user's output is logged at debug, with its traceback:
# logging.getLogger("pseudoclaude_nb").setLevel(logging.DEBUG) (and a handler) shows it.
_log = logging.getLogger(__name__)

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

_pending: list[tuple[Any, Any]] = []  # (display handle, widget) shown and not yet settled
_hooked: set[int] = set()  # the shells whose pre_run_cell settles them


def static_bundle(bundle: dict[str, Any]) -> dict[str, Any]:
    return {mime: data for mime, data in bundle.items() if mime != WIDGET_VIEW}


def close_tree(widget: Any) -> None:
    """Close ``widget`` and the widgets it holds (children, layout, style): no model is left
    for a saved notebook's widget state."""
    import ipywidgets

    seen: set[int] = set()
    stack = [widget]
    while stack:
        w = stack.pop()
        if id(w) in seen:
            continue
        seen.add(id(w))
        for name in getattr(w, "keys", ()):
            value = getattr(w, name, None)
            for item in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(item, ipywidgets.Widget):
                    stack.append(item)
        w.close()


def settle_all(*_: Any) -> None:
    """Replace every shown widget by its static rendering (the next cell is about to run)."""
    while _pending:
        handle, widget = _pending.pop(0)
        try:
            handle.update(static_bundle(widget._repr_mimebundle_()), raw=True)
            close_tree(widget)
        except Exception:  # noqa: BLE001 - a widget that cannot render stays as it was
            _log.debug("a widget could not be settled into its static rendering", exc_info=True)


class Settles:
    """Mixin for an ipywidget with a ``_repr_mimebundle_`` that includes HTML and text."""

    def _ipython_display_(self, **kwargs: Any) -> None:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is None or getattr(shell, "kernel", None) is None:
            display(self._repr_mimebundle_(), raw=True)  # type: ignore[attr-defined]  # no front end to settle: as it is
            return
        if id(shell) not in _hooked:
            shell.events.register("pre_run_cell", settle_all)
            _hooked.add(id(shell))
        bundle = self._repr_mimebundle_()  # type: ignore[attr-defined]
        _pending.append((display(bundle, raw=True, display_id=True), self))
