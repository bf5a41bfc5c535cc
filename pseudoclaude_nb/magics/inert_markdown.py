"""The model's answer as Markdown that can hold no live HTML, no auto-loaded image and no script link.

JupyterLab trusts the outputs of a cell the person runs, and renders a trusted
``text/markdown`` output without its sanitizer: an answer holding ``<img src=x
onerror=…>`` ran that script in the notebook's page, which can drive the kernel. The
answer's text is not the person's: a workspace's ``.env`` can name the host that writes
it, and any file the agent reads can ask the model to repeat a string. An image
(``![](https://host/?q=…)``) loads as soon as it shows, carrying whatever its URL holds.

So, outside fenced code blocks:

* a ``<`` that could open a tag, a comment or an autolink (``<`` before a letter, ``/``,
  ``!`` or ``?``) is written ``&lt;`` (the page shows ``<``);
* ``![`` is written ``&#33;[``: the image becomes a link, shown, never fetched;
* a link whose destination has a scheme other than ``http``, ``https`` or ``mailto``
  (``javascript:``, ``data:``…, however it is escaped or spelled) loses its ``]``
  (``&#93;``), so no link is made.

Fenced code blocks are kept as they are, and made unambiguous first: a fence is honoured
only at the start of a line, gets a blank line before it, its closing line is written as
its opening fence, and an unclosed one is closed at the end. Markdown (marked, in
JupyterLab) and JupyterLab's math pass then both see the block where this module does.
Inline code is kept as written only where its edges cannot be drawn differently by any
parser (a wrong edge is a script): in a paragraph whose every line has an even number of
single backticks and no ``[ ] | \\ $ ~ @``, ``://`` or ``www.`` (links, tables, escapes,
math, strikethrough and autolinks can each swallow a backtick). Elsewhere ``a < b`` is
unchanged, but ```List<int>``` shows as ``List&lt;int>`` inside the code span.
"""

from __future__ import annotations

import html
import re

_OPEN = re.compile(r"(`{3,})([^`]*)$|(~{3,})(.*)$")  # at the start of a line only
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_DESTINATION = re.compile(r"\](\(|:)")
_BACKSLASH_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_SCHEME = re.compile(r"([a-z][a-z0-9+.\-]*):")
_SAFE_SCHEMES = frozenset({"http", "https", "mailto"})


def inert_markdown(text: str) -> str:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    out: list[str] = []
    prose: list[str] = []
    fence: tuple[str, int] | None = None  # (its character, its length) while inside one

    def flush() -> None:
        if prose:
            out.extend(_inert_prose("\n".join(prose)).split("\n"))
            prose.clear()

    for line in lines:
        if fence is None:
            opened = _OPEN.match(line)
            if opened is None:
                prose.append(line)
                continue
            flush()
            if out and out[-1].strip():
                out.append("")  # a fence after a blank line starts a block of its own, whatever came before
            run = opened.group(1) or opened.group(3)
            info = (opened.group(2) if opened.group(1) else opened.group(4)).replace("`", "")
            fence = (run[0], len(run))
            out.append(run + info)
        elif _closes(line, fence):
            out.append(fence[0] * fence[1])
            fence = None
        else:
            out.append(line)
    if fence is not None:
        out.append(fence[0] * fence[1])
    flush()
    return "\n".join(out)


def _closes(line: str, fence: tuple[str, int]) -> bool:
    """Whether ``line`` may close the fence, by a rule looser than any parser's (a line one of
    them would take as a close is a close here too; it is written as the exact fence)."""
    body = line.lstrip(" \t")
    if len(line) - len(body) > 3:
        return False
    run = len(body) - len(body.lstrip(fence[0]))
    return run >= fence[1] and not body[run:].strip(" \t`~")


def _inert_prose(text: str) -> str:
    """Paragraph by paragraph (blank lines apart): inline code kept where it is unambiguous."""
    out: list[str] = []
    block: list[str] = []

    def flush() -> None:
        if block:
            para = "\n".join(block)
            out.append(_inert_with_code(para) if _plain_code_spans(para) else _inert_text(para))
            block.clear()

    for line in text.split("\n"):
        if line.strip():
            block.append(line)
        else:
            flush()
            out.append(line)
    flush()
    return "\n".join(out)


_SWALLOWS_BACKTICKS = re.compile(r"[\[\]|\\$~@]|://|www\.")
_CODE_SPAN = re.compile(r"`[^`\n]+`")


def _plain_code_spans(block: str) -> bool:
    """Whether every parser pairs this paragraph's backticks as ``_CODE_SPAN`` does, line by line."""
    if "`" not in block or _SWALLOWS_BACKTICKS.search(block):
        return False
    return all("``" not in line and line.count("`") % 2 == 0 for line in block.split("\n"))


def _inert_with_code(block: str) -> str:
    parts, at = [], 0
    for span in _CODE_SPAN.finditer(block):
        parts += [_inert_text(block[at : span.start()]), span.group(0)]
        at = span.end()
    return "".join([*parts, _inert_text(block[at:])])


def _inert_text(text: str) -> str:
    text = _TAG_START.sub("&lt;", text)
    text = text.replace("![", "&#33;[")
    return _DESTINATION.sub(lambda m: _link_end(m, text), text)


def _link_end(match: re.Match[str], text: str) -> str:
    """``](`` or ``]:``, or ``&#93;`` and the same when what follows is a destination with an unsafe scheme."""
    ahead = text[match.end() : match.end() + 300].lstrip()
    ahead = ahead.removeprefix("<").removeprefix("&lt;")
    # As a browser reads it: escapes and entities undone, blanks and controls dropped.
    ahead = html.unescape(_BACKSLASH_ESCAPE.sub(r"\1", ahead))
    ahead = "".join(c for c in ahead if c > " ").lower()
    scheme = _SCHEME.match(ahead)
    if scheme is not None and scheme.group(1) not in _SAFE_SCHEMES:
        return "&#93;" + match.group(1)
    return match.group(0)
