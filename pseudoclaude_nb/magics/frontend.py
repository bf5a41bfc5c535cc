"""Which frontend a shell has: its own module, so a table or a listing can ask without
importing the run renderer (``render`` imports the run events and pydantic's message
models; issue 34 keeps ``%sessions list`` in a fresh kernel free of them)."""

from __future__ import annotations

from typing import Any


def in_notebook(shell: Any) -> bool:
    # A kernel (ipykernel's ZMQInteractiveShell) has a frontend that renders HTML and widgets.
    return getattr(shell, "kernel", None) is not None
