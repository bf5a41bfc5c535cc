"""``%studio``: the context studio docked beside the notebook, following the current session.

Thin: it builds the studio (``widgets.studio``) over the kernel's agent, docks it in JupyterLab's
side area with ``sidecar`` (jupyterlab-sidecar, the ``lab`` extra), and refreshes it after every
cell until ``%studio close``. A running ``%agent`` hands it its events (``studio_listeners``).
Where no side area exists (no sidecar installed, ``--here``, VS Code, Colab) it is shown in the
cell's output; a terminal gets the gauge as text.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from .args import parse
from .frontend import in_notebook

# The open studio of each shell: (studio, sidecar or display handle, docked?).
_OPEN: dict[int, tuple[Any, Any, bool]] = {}


def studio_listeners(shell: Any) -> list[Any]:
    """The run listeners ``%agent`` adds: the open studio, if any (it only observes)."""
    opened = _OPEN.get(id(shell))
    return [opened[0]] if opened is not None else []


def side_area() -> bool:
    """Whether a side area can be had: jupyterlab-sidecar is installed and the front end is not
    one known to lack JupyterLab's shell (VS Code, Colab)."""
    import importlib.util

    if "google.colab" in sys.modules or "VSCODE_PID" in os.environ:
        return False
    return importlib.util.find_spec("sidecar") is not None


@magics_class
class StudioMagics(Magics):
    def __init__(self, shell: Any, agent: Any) -> None:
        super().__init__(shell)
        self._agent = agent

    @magic_arguments()
    @argument("--here", action="store_true", help="show it in this cell's output, not docked")
    @argument("action", nargs="?", default="open", help="open (default) | close")
    @line_magic
    def studio(self, line: str) -> None:
        """The context studio: the gauge, the cost, the pins, and the session's timeline with its
        step scrubber (the request at the chosen step), beside the notebook.

        %studio            dock it in JupyterLab's side area; it follows the current session
                           after every cell (and during a run) until closed
        %studio --here     show it in this cell's output instead
        %studio close      close it (in an output it leaves the gauge as HTML and text)

        Docking needs jupyterlab-sidecar (pip install -e '.[lab]'); without it, and in VS Code
        or Colab, the studio shows in the output.
        """
        args = parse(self.studio, line)
        if args.action not in ("open", "close"):
            raise UsageError(f"unknown action {args.action!r}; use %studio, %studio --here or %studio close")
        if args.action == "close":
            self._close()
            return
        if not in_notebook(self.shell):
            from ..widgets.gauge import gauge_text
            from ..widgets.studio import ContextStudio

            print(gauge_text(ContextStudio(self._agent).gauge.state))
            return
        self._close(quiet=True)  # one studio a kernel: a second %studio moves it
        from ..widgets.studio import ContextStudio

        studio = ContextStudio(self._agent)
        if not args.here and side_area():
            import importlib

            # An optional extra (``lab``), imported by name as lab/plots.py imports matplotlib.
            Sidecar = importlib.import_module("sidecar").Sidecar  # noqa: N806 - the library's class

            panel = Sidecar(title="Context studio", anchor="split-right")  # beside the notebook, resizable
            with panel:
                display(studio)
            _OPEN[id(self.shell)] = (studio, panel, True)
            display(
                {
                    "text/plain": "context studio: docked on the right; %studio close closes it",
                    "text/html": "<i>context studio: docked on the right; <code>%studio close</code> closes it</i>",
                },
                raw=True,
            )
        else:
            handle = display(studio, display_id=True)
            _OPEN[id(self.shell)] = (studio, handle, False)
        assert self.shell is not None  # a magic runs in a shell
        self.shell.events.register("post_run_cell", studio.refresh)

    def _close(self, *, quiet: bool = False) -> None:
        opened = _OPEN.pop(id(self.shell), None)
        if opened is None:
            if not quiet:
                print("no context studio is open (%studio opens one)")
            return
        studio, holder, docked = opened
        assert self.shell is not None
        self.shell.events.unregister("post_run_cell", studio.refresh)
        if docked:
            holder.close()
        elif holder is not None:
            holder.update(studio.static_bundle(), raw=True)
        from ..widgets.settle import close_tree

        close_tree(studio)
        if not quiet:
            print("context studio closed")
