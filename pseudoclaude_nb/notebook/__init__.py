"""What the agent knows of the notebook it runs in: recorded cells and the activity block.

``record`` (one executed cell, capped as it is recorded), ``store`` (this kernel's cells),
``activity`` (the block that begins a run's user message), ``inspect`` (a variable,
described without running its code), ``host`` (the Protocol the magics implement). No
IPython here: the magics record cells and hand them over.
"""

from __future__ import annotations

from .activity import ActivityBlock, cells_for_run, package_cell, render_activity
from .host import NotebookHost
from .inspect import inspect_variable
from .record import BoundedText, CellRecord, ErrorInfo, clean, describe_display, error_info, strip_ansi
from .store import CellStore

__all__ = [
    "ActivityBlock",
    "BoundedText",
    "CellRecord",
    "CellStore",
    "ErrorInfo",
    "NotebookHost",
    "cells_for_run",
    "clean",
    "describe_display",
    "error_info",
    "inspect_variable",
    "package_cell",
    "render_activity",
    "strip_ansi",
]
