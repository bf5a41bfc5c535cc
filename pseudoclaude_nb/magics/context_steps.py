"""``%context --at STEP`` and ``%context --diff A B`` (SPEC §19 steering)."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError


def steps_action(magics: Any, args: Any) -> None:
    raise UsageError("%context --at/--diff: not built yet")
