"""What the agent knows of the notebook it runs in: recorded cells and the activity block.

``record`` (one executed cell, capped as it is recorded), ``store`` (this kernel's cells),
``activity`` (the block that begins a run's user message), ``skip`` (cells the user keeps
from the model: tag or comment ``agent-skip``), ``inspect`` (a variable,
described without running its code), ``host`` (the Protocols the magics implement). The open
document (SPEC §20): ``document`` (its cells and the ``Document`` Protocol), ``route`` (the
server and path a kernel finds), ``live`` (the server's shared document, joined), ``saved``
(the file, read-only), ``link`` (which of them a run gets), ``seen`` (what the agent read, so
no change lands on a cell it did not mean). No IPython here: the magics record cells and hand them over. The names are imported on first
access: ``%load_ext`` installs the recorder without the redactor or the inspector (issue 30).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
    from .activity import (
        ActivityBlock,
        ShownCell,
        cells_for_run,
        package_cell,
        render_activity,
        split_skipped,
    )
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

__getattr__, __dir__ = exports(
    __name__,
    {
        ".activity": (
            "ActivityBlock",
            "ShownCell",
            "cells_for_run",
            "package_cell",
            "render_activity",
            "split_skipped",
        ),
        ".host": ("NotebookHost",),
        ".inspect": ("inspect_variable",),
        ".record": (
            "BoundedText",
            "CellRecord",
            "ErrorInfo",
            "clean",
            "describe_display",
            "error_info",
            "strip_ansi",
        ),
        ".skip": ("SKIP_TAG", "NotebookTags", "marked_in_source", "parse_counts"),
        ".store": ("CellStore",),
    },
)
