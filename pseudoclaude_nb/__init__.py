"""pseudoclaude_nb: a coding agent inside Jupyter, with visible and durable context.

``%load_ext pseudoclaude_nb`` registers the magics. The core (everything but
``magics`` and ``widgets``) never imports IPython and works as a plain library.
"""

from __future__ import annotations

from typing import Any

from .tools.user import tool

__all__ = ["load_ipython_extension", "tool", "unload_ipython_extension"]
__version__ = "0.1.0"


def load_ipython_extension(ipython: Any) -> None:
    from .magics import register

    register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .magics import unregister

    unregister(ipython)
