"""A drawing as an ``<img>`` whose source is the SVG itself: what a saved output holds.

JupyterLab's sanitizer strips inline ``<svg>`` from an untrusted notebook's HTML and leaves
its text nodes run together ("effective window: … user assistant tool call"); a cloned
repository's notebooks open untrusted. It keeps an ``<img>`` with a ``data:`` URI, and so do
nbconvert and a code host's viewer. An SVG shown as an image is a document of its own: the
page's CSS variables do not reach it, so every colour of ``theme`` is drawn as the last value of
its chain, and ``currentColor`` as the picture's own ``color``, a grey that reads on light and
dark backgrounds alike (``PICTURE_TEXT``). Live views (a widget, a running gauge) keep the inline
SVG, themed by the front end.

A saved picture is bytes in every notebook that shows it, so it holds what is drawn and no more
(issue 47): each ``var()`` chain is replaced by the value an image draws, coordinates lose a
trailing ``.0``, the line breaks between elements go, and the SVG is percent-encoded, not
base64 (``data:image/svg+xml,…``: an SVG's markup is mostly characters a URL keeps, so it grows
by about a tenth instead of a third).
"""

from __future__ import annotations

import html
import re

# A grey halfway in contrast between a white and a near-black (#111) page: about 4.3:1 on
# both (JupyterLab's light and dark themes; VS Code's #1e1e1e gives 3.8:1).
PICTURE_TEXT = "#797979"

# The platform's own UI font (every current browser knows ``system-ui``), with no quoted family
# name that the single-quoted ``src`` would have to escape.
FONT = "system-ui,sans-serif"
_TITLES = re.compile(r"<title>.*?</title>\n?", re.S)  # tooltips: an image shows none
# The root's accessible name: the ``alt`` says it; inside the image it would only hide a session
# id from the notebook tests' sanitizers (the encoded picture differed run to run).
_LABEL = re.compile(r'\s(?:role="img"|aria-label="[^"]*")')
_SIZE = re.compile(r'<svg\b[^>]*?\bwidth="(\d+)"[^>]*?\bheight="(\d+)"')
# A ``var(--name, fallback)`` whose fallback holds no ``var()`` (an ``rgba(…)`` at most): the
# innermost of a chain, replaced by its fallback until no chain is left.
_VAR = re.compile(r"var\(--[\w-]+,\s*((?:[^()]|\((?!--)[^()]*\))*?)\)")
_WHOLE = re.compile(r'(?<!version)="(-?\d+)\.0"')  # x="118.0" → x="118" (an XML version stays 1.0)
_BETWEEN = re.compile(r">\s+<")
_TAG = re.compile(r"<[^<>]+>")
# A shape's colour alone in its ``style``: a ``fill`` attribute says it in fewer bytes, where the
# element has none already (two would make the image invalid).
_FILL_STYLE = re.compile(r'style="fill:([^;"]+)(?:;fill-opacity:([^;"]+))?"')
# What a data URL in a single-quoted attribute cannot hold as it is: the URL's own escape and
# fragment marks, the attribute's quote and character references, markup (browsers block a URL
# with "<" next to a removed line break) and control characters.
_UNSAFE = re.compile(r"[%#'&<>\x00-\x1f\x7f]")


def drawn(svg: str) -> str:
    """``svg`` as an image draws it, without what an image ignores."""
    svg = _LABEL.sub("", _TITLES.sub("", svg), count=2)
    while True:
        flat = _VAR.sub(r"\1", svg)
        if flat == svg:
            break
        svg = flat
    svg = _TAG.sub(_fill_attribute, _BETWEEN.sub("><", _WHOLE.sub(r'="\1"', svg)))
    # Its own text colour and font: an image inherits neither from the page.
    return svg.replace("<svg ", f'<svg style="color:{PICTURE_TEXT};font-family:{FONT}" ', 1)


def _fill_attribute(tag: re.Match[str]) -> str:
    """A tag without the spaces after its values' commas (``rgba(128,128,128,0.3)``), its lone
    fill style as an attribute."""
    markup = tag.group().replace(", ", ",")
    if ' fill="' in markup:
        return markup
    return _FILL_STYLE.sub(
        lambda m: f'fill="{m.group(1)}"' + (f' fill-opacity="{m.group(2)}"' if m.group(2) else ""), markup
    )


def data_url(svg: str) -> str:
    """``data:image/svg+xml,…``: only what a URL or the attribute cannot hold is escaped; other
    characters, non-ASCII text included, stay as they are (UTF-8, the SVG's own encoding)."""
    return "data:image/svg+xml," + _UNSAFE.sub(lambda m: f"%{ord(m.group()):02X}", svg)


def picture(svg: str, alt: str, css_class: str = "pc-picture") -> str:
    """``svg`` as ``<img src='data:image/svg+xml,…'>``; ``alt`` is the compact summary a reader
    gets where the image is not shown (a text browser, a screen reader)."""
    image = drawn(svg)
    size = _SIZE.search(image)
    dims = f" width='{size.group(1)}' height='{size.group(2)}'" if size else ""
    return (
        f"<img class='{css_class}' src='{data_url(image)}'{dims} "
        f"alt='{html.escape(alt, quote=True)}' style='max-width:100%;height:auto'/>"
    )
