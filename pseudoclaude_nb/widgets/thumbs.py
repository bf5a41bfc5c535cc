"""Image thumbnails as small ``<img>`` data URLs (issue-14): the tool line, the spill browser.

Without Pillow an image cannot be shrunk, so the thumbnail is the image itself shown small;
an image over ``THUMB_BYTES`` gets a text label instead, to keep the notebook file small.
"""

from __future__ import annotations

import base64
import html

THUMB_BYTES = 256_000


def thumbnail(data: bytes, media_type: str, *, px: int = 64, title: str = "") -> str:
    """An ``<img>`` at most ``px`` high, or a label when the image is too big to inline."""
    label = html.escape(title or f"{media_type}, {len(data):,} bytes")
    if len(data) > THUMB_BYTES:
        return f"<span class='pc-thumb-skipped' title='{label}'>[image {label}]</span>"
    src = f"data:{html.escape(media_type)};base64,{base64.b64encode(data).decode('ascii')}"
    return (
        f"<img class='pc-thumb' src='{src}' alt='{label}' title='{label}' "
        f"style='max-height:{px}px;max-width:{px * 3}px;vertical-align:middle;margin:2px'/>"
    )
