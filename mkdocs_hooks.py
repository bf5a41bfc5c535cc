"""MkDocs hook: let the pages keep GitHub's table syntax.

GitHub needs ``\\|`` for a pipe inside code in a table cell; Python-Markdown splits cells
outside code spans only and would show the backslash. So on the site, ``\\|`` inside a code
span of a table row becomes ``|``; the Markdown files read the same on GitHub.
"""

from __future__ import annotations

import re

_CODE_SPAN = re.compile(r"`[^`\n]*`")


def _unescape_pipes(span: re.Match[str]) -> str:
    return span.group(0).replace("\\|", "|")


def on_page_markdown(markdown: str, **_: object) -> str:
    lines = []
    fenced = False
    for line in markdown.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.lstrip().startswith("|"):
            line = _CODE_SPAN.sub(_unescape_pipes, line)
        lines.append(line)
    return "\n".join(lines)
