"""Text from outside made safe to keep and to show: two pure functions, no I/O.

``escape_surrogates`` is for what enters a conversation (tool results, file names, MCP
results): a lone surrogate cannot be encoded as UTF-8 JSON, and a session must never end
because a file name was not UTF-8. ``printable`` is for what is printed from a log, a
sidecar or a cloned session: a title must not move the cursor, clear the screen or set the
clipboard (OSC 52) of the person reading it.
"""

from __future__ import annotations

import re

# A lone surrogate: U+D800..U+DFFF. ``os.listdir`` and ``bytes.decode(errors="surrogateescape")``
# carry an undecodable byte 0xNN as U+DCNN; anything else in the range is a broken string.
_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls but tab and newline, DEL, C1 controls, and the bidi overrides that reorder
# what a terminal shows (U+202A..U+202E, U+2066..U+2069).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _surrogate(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def escape_surrogates(text: str) -> tuple[str, bool]:
    """``text`` with each lone surrogate written as ``\\xNN`` (an undecodable byte) or
    ``\\uNNNN``; and whether anything was escaped, so the caller can say so."""
    if text.isascii():
        return text, False
    out, count = _SURROGATE.subn(_surrogate, text)
    return out, bool(count)


def _control(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` with control characters (ESC, BEL, CR, C1, bidi overrides) written as escapes.

    Tabs and newlines stay unless ``one_line`` (a title, a name in a listing). Lone
    surrogates are escaped too, so the result can always be printed.
    """
    pattern = _CONTROL_LINE if one_line else _CONTROL
    text = pattern.sub(_control, text)
    return escape_surrogates(text)[0]
