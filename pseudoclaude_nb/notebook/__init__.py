"""What the agent knows of the notebook it runs in: recorded cells and the activity block.

``record`` (one executed cell, capped as it is recorded), ``store`` (this kernel's cells),
``activity`` (the block that begins a run's user message), ``skip`` (cells the user keeps
from the model: tag or comment ``agent-skip``), ``inspect`` (a variable,
described without running its code), ``host`` (the Protocol the magics implement). No
IPython here: the magics record cells and hand them over.
"""

from __future__ import annotations

from .activity import ActivityBlock, ShownCell, cells_for_run, package_cell, render_activity, split_skipped
from .host import NotebookHost
from .inspect import inspect_variable
from .record import BoundedText, CellRecord, ErrorInfo, clean, describe_display, error_info, strip_ansi
from .skip import SKIP_TAG, NotebookTags, marked_in_source, parse_counts
from .store import CellStore

__all__ = [
    "ActivityBlock",
    "BoundedText",
    "CellRecord",
    "CellStore",
    "ErrorInfo",
    "NotebookHost",
    "NotebookTags",
    "SKIP_TAG",
    "ShownCell",
    "cells_for_run",
    "clean",
    "describe_display",
    "error_info",
    "inspect_variable",
    "marked_in_source",
    "parse_counts",
    "package_cell",
    "render_activity",
    "split_skipped",
    "strip_ansi",
]
