"""Logs written before the structured marks (issue 12): marked on load.

Before ``ToolResult.spilled`` and ``Message.host`` existed, a spill preview and a rollover
host note were known only by their text. A log whose effective messages carry none of the
new marks is such a log: its previews and notes are recognised by that text, once, on load,
and get the fields. Nothing else in the package looks at the text.
"""

from __future__ import annotations

import re

from ..messages import HOST_FALLBACK, HOST_REMIND, Message
from ..workspace import SPILL_DIR

LEGACY_PREVIEW = re.compile(
    r"\[Tool result too large for the context: [\d,]+ bytes, saved in full to (.+?)\]\n"
)
LEGACY_HOST_NOTES = {
    "[host note] context rollover reminder": HOST_REMIND,
    "[host note] context rollover fallback": HOST_FALLBACK,
}


def upgrade_legacy(messages: list[Message]) -> list[Message]:
    """``messages`` with legacy previews and host notes marked (unchanged for a current log)."""
    if any(m.host is not None or (m.tool_result is not None and m.tool_result.spilled) for m in messages):
        return messages  # written with the marks: the text means nothing
    out = []
    for m in messages:
        result = m.tool_result
        if result is not None:
            found = LEGACY_PREVIEW.match(result.content)
            if found:
                name = found.group(1).replace("\\", "/").rsplit("/", 1)[-1]
                m = m.model_copy(
                    update={"tool_result": result.model_copy(update={"spilled": f"{SPILL_DIR}/{name}"})}
                )
        elif m.role == "user":
            kind = next((k for prefix, k in LEGACY_HOST_NOTES.items() if m.content.startswith(prefix)), None)
            if kind is not None:
                m = m.model_copy(update={"host": kind})
        out.append(m)
    return out
