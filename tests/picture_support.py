"""The drawing a saved picture's ``data:`` URI holds, read as a browser reads it.

A picture is percent-encoded (``data:image/svg+xml,…``, issue 47); notebooks recorded before
that hold base64 (``data:image/svg+xml;base64,…``) until they are recorded again.
"""

from __future__ import annotations

import base64
import re
import urllib.parse

# A picture's source in a saved output's HTML: the single-quoted ``src`` of its ``<img>``.
SOURCE = re.compile(r"src='(data:image/svg\+xml[;,][^']*)'")


def drawing(src: str) -> str:
    """The SVG of ``src``, a ``data:image/svg+xml`` URI in either encoding."""
    head, _, body = src.partition(",")
    assert head.startswith("data:image/svg+xml"), src[:40]
    if head.endswith(";base64"):
        return base64.b64decode(body).decode("utf-8")
    return urllib.parse.unquote(body, encoding="utf-8", errors="strict")


def first_drawing(html: str) -> str:
    """The SVG of the first picture in ``html``."""
    found = SOURCE.search(html)
    assert found, "a picture"
    return drawing(found.group(1))
