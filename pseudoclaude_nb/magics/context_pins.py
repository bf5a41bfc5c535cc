"""``%context pin TEXT`` / ``%context pins`` / ``%context unpin N`` (SPEC §19 steering)."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError


def pins_action(magics: Any, words: list[str]) -> None:
    raise UsageError("%context pin/pins/unpin: not built yet")
