"""The agent's imports, done while a kernel is idle after ``%load_ext`` (issue 47).

The first ``%agent`` of a kernel imports the agent's world (the agent, the context layer,
the tools, pydantic's models, the provider and its HTTP library: ~270 modules) before its
first request, ~0.4 s of the cell. ``%load_ext`` must stay lean, so they are not imported
there; a kernel is idle most of the time after it (a person reads, types the prompt), and
``Warmer`` imports them then: once the kernel has been idle for ``IDLE`` seconds after a cell,
a daemon thread imports what a first run needs. A cell that starts while it works waits for
it first (so no two threads ever import the package at once) and finds the modules there.
Imports only: no agent, provider or file is made. A module that fails to import here is
left for the run to import (and report) as it would have.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable
from typing import Any

_log = logging.getLogger(__name__)

IDLE = 1.0  # seconds of an idle kernel before the warm-up starts (a cell run back to back waits for none)


def first_run_modules(provider: str) -> list[str]:
    """What a first ``%agent`` with ``provider`` ("auto" resolved) imports before its request."""
    wire = {
        # httpx imports its transport's library (httpcore) when a client is first made
        "openai": ("pseudoclaude_nb.providers.openai_compat", "httpcore"),
        "anthropic": ("pseudoclaude_nb.providers.anthropic",),
    }.get(provider, ())
    return [
        "dotenv",
        "pseudoclaude_nb.agent.core",
        "pseudoclaude_nb.magics.agent",
        "pseudoclaude_nb.magics.python_exec",
        "pseudoclaude_nb.magics.render",
        "pseudoclaude_nb.widgets.gauge",
        *wire,
        "pseudoclaude_nb.session.timeline",  # the writer's, at the run's end
        # An action's mechanisms (a summary, a drop, a hand-off): not on a first run's way to
        # its request, imported when its context first fills; an idle kernel has them ready.
        "pseudoclaude_nb.context.apply",
    ]


class Warmer:
    """Imports ``modules()`` on a thread once ``shell`` has been idle for ``IDLE`` seconds."""

    def __init__(
        self, shell: Any, modules: Callable[[], list[str]], after: Callable[[], None] | None = None
    ) -> None:
        self.shell = shell
        self._modules = modules
        self._after = after  # more warm-up once imported (the provider's TLS context)
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._thread: threading.Thread | None = None
        self.done = False
        shell.events.register("post_run_cell", self._idle)
        shell.events.register("pre_run_cell", self._busy)

    def close(self) -> None:
        """Stop waiting (``%unload_ext``); a warm-up under way finishes on its own."""
        with self._lock:
            self.done = True
            self._cancel()
        for name, hook in (("post_run_cell", self._idle), ("pre_run_cell", self._busy)):
            try:
                self.shell.events.unregister(name, hook)
            except ValueError:
                pass  # not registered (a shell that dropped its callbacks)

    def _idle(self, *_: Any) -> None:
        with self._lock:
            if self.done or self._thread is not None:
                return
            self._cancel()
            self._timer = threading.Timer(IDLE, self._start)
            self._timer.daemon = True
            self._timer.start()

    def _busy(self, *_: Any) -> None:
        with self._lock:
            self._cancel()
            thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join()  # the cell imports nothing while the warm-up still does

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _start(self) -> None:
        with self._lock:
            if self.done or self._thread is not None or self._timer is None:
                return  # a cell started meanwhile (it cancelled the timer) or it is done
            self._timer = None
            self._thread = threading.Thread(target=self._warm, name="pseudoclaude-warm", daemon=True)
            self._thread.start()

    def _warm(self) -> None:
        try:
            for name in self._modules():
                importlib.import_module(name)
            if self._after is not None:
                self._after()
        except Exception:  # noqa: BLE001 - a warm-up only: the run imports (and reports) what failed here
            _log.debug("the agent's imports could not be warmed up", exc_info=True)
        finally:
            self.done = True


def warmer(shell: Any, settings: Any) -> Warmer | None:
    """A ``Warmer`` for a kernel's shell (a terminal's first run pays as before), else None."""
    if getattr(shell, "kernel", None) is None:
        return None

    def modules() -> list[str]:
        from ..providers import auto_provider

        name = settings.provider
        return first_run_modules(auto_provider() if name == "auto" else name)

    def tls() -> None:
        # A hosted provider's TLS context (its CA bundle: tens of ms) is made once per process.
        from ..providers import wire

        wire.tls()

    return Warmer(shell, modules, tls)
