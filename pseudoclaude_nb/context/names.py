"""How a strategy is named in a setting, checked without importing anything (``%config``).

``normalized`` keeps a built-in's name in lower case (the setting was case-insensitive) and
accepts ``MODULE:CLASS`` or an installed strategy's entry-point name as written; whether it
loads is the registry's to say, before a run's first request.
"""

from __future__ import annotations

import re

BUILT_IN_NAMES = ("compact", "rollover", "api")
GROUP = "pseudoclaude_nb.strategies"
_CLASS_SPEC = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_ENTRY_NAME = re.compile(r"^[A-Za-z_][\w.-]*$")
HOW = (
    "compact, rollover, api, MODULE:CLASS (a Strategy subclass; MODULE may be a file in the "
    f"notebook's folder) or the name of an installed strategy (entry points {GROUP})"
)


def normalized(spec: str) -> str:
    """``spec`` as the setting keeps it; ``ValueError`` when it cannot name a strategy at all."""
    key = spec.strip()
    if key.lower() in BUILT_IN_NAMES:
        return key.lower()
    if _CLASS_SPEC.match(key) or _ENTRY_NAME.match(key):
        return key
    raise ValueError(f"{spec!r} is not a strategy: use {HOW}")
