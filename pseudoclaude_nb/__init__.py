"""pseudoclaude_nb: a coding agent inside Jupyter, with visible and durable context.

``%load_ext pseudoclaude_nb`` registers the magics. The core (everything but
``magics`` and ``widgets``) never imports IPython and works as a plain library.

Startup stays lean (issue 30): importing the package and ``%load_ext`` import only what
registering the magics and recording cells need; the agent, providers, widgets, MCP and
their libraries load on first use. Public names here resolve on first access (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .lazy import exports as _exports

if TYPE_CHECKING:
    from .tools.user import tool

__all__ = ["load_ipython_extension", "tool", "unload_ipython_extension"]
__version__ = "0.1.0"


# The tool registry pulls in every tool module: imported when ``tool`` is first asked for.
__getattr__, __dir__ = _exports(__name__, {".tools.user": ("tool",)})


def load_ipython_extension(ipython: Any) -> None:
    from .magics import register

    register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .magics import unregister

    unregister(ipython)
