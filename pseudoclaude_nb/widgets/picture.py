"""A drawing as an ``<img>`` whose source is the SVG itself: what a saved output holds.

JupyterLab's sanitizer strips inline ``<svg>`` from an untrusted notebook's HTML (a cloned
repository's notebooks open untrusted) and leaves its text nodes run together; it keeps an
``<img>`` with a ``data:`` URI, and so do nbconvert and a code host's viewer. An SVG shown as an
image is a document of its own: the page's CSS variables do not reach it, so every colour of
``theme`` falls back to the last value of its chain, and ``currentColor`` to the picture's own
``color``, a grey that reads on light and dark backgrounds alike (``PICTURE_TEXT``). Live views
(a widget, a running gauge) keep the inline SVG, themed by the front end.
"""

from __future__ import annotations

import base64
import html
import re

# A grey halfway in contrast between a white and a near-black (#111) page: about 4.3:1 on
# both (JupyterLab's light and dark themes; VS Code's #1e1e1e gives 3.8:1).
PICTURE_TEXT = "#797979"

FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"
_TITLES = re.compile(r"<title>.*?</title>\n?", re.S)  # tooltips: an image shows none
# The root's accessible name: the ``alt`` says it; inside the image it would only hide a session
# id from the notebook tests' sanitizers (the encoded picture differed run to run).
_LABEL = re.compile(r'\s(?:role="img"|aria-label="[^"]*")')
_SIZE = re.compile(r'<svg\b[^>]*?\bwidth="(\d+)"[^>]*?\bheight="(\d+)"')


def picture(svg: str, alt: str, css_class: str = "pc-picture") -> str:
    """``svg`` as ``<img src="data:image/svg+xml;base64,…">``; ``alt`` is the compact summary
    a reader gets where the image is not shown (a text browser, a screen reader)."""
    # Its own text colour and font: an image inherits neither from the page.
    drawn = _LABEL.sub("", _TITLES.sub("", svg), count=2).replace(
        "<svg ", f'<svg style="color:{PICTURE_TEXT};font-family:{FONT}" ', 1
    )
    data = base64.b64encode(drawn.encode("utf-8")).decode("ascii")
    size = _SIZE.search(drawn)
    dims = f" width='{size.group(1)}' height='{size.group(2)}'" if size else ""
    return (
        f"<img class='{css_class}' src='data:image/svg+xml;base64,{data}'{dims} "
        f"alt='{html.escape(alt, quote=True)}' style='max-width:100%;height:auto'/>"
    )
