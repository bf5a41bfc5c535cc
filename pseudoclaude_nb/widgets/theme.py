"""Colours from the frontend's theme, so the widgets read in light and dark themes alike.

Every colour is a CSS ``var()`` chain: JupyterLab / Notebook 7 (``--jp-*``), then VS Code
(``--vscode-*``), then Colab (``--colab-*``), then a value that works on either background
(``currentColor`` for text: the output's own text colour). SVG presentation attributes do
not resolve ``var()``, so SVG elements take these through ``style``.
"""

from __future__ import annotations

# Text: headline / labels / secondary notes.
FG1 = (
    "var(--jp-ui-font-color1, var(--vscode-editor-foreground, var(--colab-primary-text-color, currentColor)))"
)
FG2 = (
    "var(--jp-ui-font-color2, var(--vscode-descriptionForeground, "
    "var(--colab-secondary-text-color, currentColor)))"
)
# Surfaces and lines.
BG0 = "var(--jp-layout-color0, var(--vscode-editor-background, transparent))"
TRACK = "var(--jp-layout-color3, var(--vscode-editorWidget-border, rgba(128, 128, 128, 0.3)))"
BORDER = "var(--jp-border-color1, var(--vscode-panel-border, rgba(128, 128, 128, 0.5)))"
AXIS = "var(--jp-ui-font-color2, var(--vscode-descriptionForeground, rgba(128, 128, 128, 0.9)))"
# Meaning.
BRAND = "var(--jp-brand-color1, var(--vscode-textLink-foreground, #1976d2))"
ERROR = "var(--jp-error-color1, var(--vscode-errorForeground, #d32f2f))"
WARN = "var(--jp-warn-color1, var(--vscode-editorWarning-foreground, #b26a00))"
SUCCESS = "var(--jp-success-color1, var(--vscode-testing-iconPassed, #2e7d32))"
MONO = "var(--jp-code-font-family, var(--vscode-editor-font-family, monospace))"
# Text that holds dollar figures ("$0.122 … $0.160"): JupyterLab and Notebook 7 typeset an
# HTML output's text with MathJax, which reads two dollar signs as a formula (and "%" as a TeX
# comment). MathJax 3 skips an element of class mathjax_ignore; the classic Notebook's
# MathJax 2, tex2jax_ignore.
NO_MATH = "mathjax_ignore tex2jax_ignore"


def fill(color: str, opacity: float | None = None) -> str:
    """``style`` for an SVG shape or text."""
    return f'style="fill:{color}' + (f";fill-opacity:{opacity}" if opacity is not None else "") + '"'


def stroke(color: str, extra: str = "") -> str:
    return f'style="stroke:{color}' + (f";{extra}" if extra else "") + '"'


def spaced(svg: str) -> str:
    """``svg`` with a line break after each label and tooltip. Drawn, nothing changes (SVG
    ignores whitespace between elements); an untrusted notebook's sanitizer drops the SVG and
    keeps its text, which then reads "Layer 2 17,000 ~11,551 / 50,000 tokens", not
    "Layer 2 17,000~11,551 / 50,000 tokens"."""
    return svg.replace("</text>", "</text>\n").replace("</title>", "</title>\n")
