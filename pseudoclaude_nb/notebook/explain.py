"""The offline explainer: what the last error of the notebook activity block means, with no model.

With no API key, ``%agent`` does not pretend: it reads the block the host already wrote
(``activity.render_activity``; this module parses that rendering, which the same package
owns) and explains the newest error in it deterministically — the cell, the line, the
exception and what that exception usually means in a notebook — and says plainly that no
model was asked. A prompt it cannot answer this way gets one honest line instead.
Pure: text in, text out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .activity import BEGIN, END

_HEADER = re.compile(r"^### (?P<label>In \[\d+\]|cell #\d+)(?: — raised (?P<type>[\w.]+))?$")
_SECTION = re.compile(r"^--- (stdout|stderr|display|Out\[\d*\]|error)$")
_FRAME = re.compile(r"^\s{4}(?P<where>.+?, line (?P<line>\d+), in [^:]+)(?:: (?P<code>.*))?$")
_QUOTED = re.compile(r"'([^']+)'")


@dataclass(frozen=True)
class CellError:
    label: str  # "In [2]"
    source: str
    type: str  # "ZeroDivisionError"
    message: str
    frames: tuple[str, ...]  # innermost last, as recorded


def last_error(block: str) -> CellError | None:
    """The newest cell of an activity block that raised, or None (no block, no error)."""
    start, end = block.find(BEGIN), block.rfind(END)
    if start < 0 or end < start:
        return None
    found = None
    for cell in _cells(block[start + len(BEGIN) : end].splitlines()):
        if cell is not None:
            found = cell
    return found


def _cells(lines: list[str]) -> list[CellError | None]:
    out: list[CellError | None] = []
    header: re.Match[str] | None = None
    body: list[str] = []
    for line in [*lines, "### In [0]"]:  # a sentinel header ends the last cell
        match = _HEADER.match(line)
        if match is None:
            body.append(line)
            continue
        if header is not None:
            out.append(_cell(header, body))
        header, body = match, []
    return out


def _cell(header: re.Match[str], body: list[str]) -> CellError | None:
    if not header.group("type"):
        return None
    sections: dict[str, list[str]] = {"source": []}
    name = "source"
    for line in body:
        if _SECTION.match(line):
            name = line[4:]
            sections[name] = []
        else:
            sections[name].append(line)
    error = sections.get("error") or [header.group("type")]
    kind, _, message = error[0].partition(": ")
    frames = tuple(line.strip() for line in error[1:] if line.startswith("    "))
    return CellError(
        header.group("label"), "\n".join(sections["source"]).strip(), kind.strip(), message.strip(), frames
    )


# What each common exception usually means in a notebook, and what to check first. The
# wording names the usual cause; the message and the line say which case this one is.
HINTS: dict[str, str] = {
    "ZeroDivisionError": "a division (or `%`) had 0 on the right-hand side. Check how the divisor got its value: "
    "an empty list counted with `len()`, a counter never incremented, or a filter that matched nothing.",
    "NameError": "the name is not defined in the kernel: it is misspelled, or the cell that defines it has not "
    "run in this kernel (after a restart every cell must run again, in order).",
    "KeyError": "the key is not in the dictionary (or the column is not in the DataFrame). Print the keys "
    "(`d.keys()`, `df.columns`) and compare spelling, case and spaces; `d.get(key)` returns None instead.",
    "IndexError": "the index is past the end of the sequence: a list of n items has indexes 0 to n - 1, and an "
    "empty list has none. Check the length first.",
    "TypeError": "a value of the wrong type reached an operation or a call: e.g. adding a str to an int, calling "
    "something that is not a function, or passing the wrong number of arguments. The message names both sides.",
    "ValueError": "the type was right but the value was not: e.g. `int('3.5')`, unpacking the wrong number of "
    "items, or a shape that does not fit. The message says which value.",
    "AttributeError": "the object has no attribute of that name: check its type (`type(x)`), the spelling, and "
    "whether it is None because a function returned nothing.",
    "ModuleNotFoundError": "the package is not installed in this kernel's environment. Install it from the "
    "notebook with `%pip install NAME` (it installs where the kernel runs), then restart the kernel.",
    "ImportError": "the module was found but the name could not be imported from it: a version without it, a "
    "spelling mistake, or a circular import.",
    "FileNotFoundError": "no file at that path, as seen from the kernel's working directory (`import os; "
    "os.getcwd()`). Relative paths are relative to it, not to the notebook's folder if the kernel moved.",
    "SyntaxError": "Python could not parse the cell, so none of it ran. The line shown is where parsing stopped; "
    "the mistake is often just before it (an unclosed bracket or quote, a missing colon).",
    "IndentationError": "the indentation of a block is inconsistent: mixed tabs and spaces, or a line indented "
    "more or less than its block.",
    "AssertionError": "an `assert` found its condition false: the assumption it states does not hold for this "
    "data. Print the values it compares.",
    "RecursionError": "a function called itself too deeply, usually without a base case that stops it.",
    "MemoryError": "the kernel ran out of memory: the data is too large for this machine, or a loop grows a "
    "structure without bound.",
    "KeyboardInterrupt": "the cell was interrupted (the stop button or an interrupt), so it did not finish.",
    "StopIteration": "`next()` was called on an iterator that had nothing left.",
    "UnboundLocalError": "a local variable was read before it was assigned in this function: assigning to a "
    "name anywhere in a function makes it local throughout (use `global`/`nonlocal`, or pass it in).",
    "PermissionError": "the operating system refused access to that path: check its owner and mode.",
    "JSONDecodeError": "the text is not valid JSON: empty, cut off, or HTML from an error page. Print the start "
    "of the text you parse.",
}

NO_MODEL = (
    "This answer came from the offline explainer, not a model: no ANTHROPIC_API_KEY, OPENAI_API_KEY or "
    'OPENAI_BASE_URL is set. For an answer to any question, set a key (README: "A first run with a real '
    'key"); `%agent --provider demo` plays the offline tour.'
)

NOTHING_TO_EXPLAIN = (
    "No model is configured, so nothing can answer that prompt: no ANTHROPIC_API_KEY, OPENAI_API_KEY or "
    "OPENAI_BASE_URL is set. Offline, `%agent` can only explain the newest error in the cells you ran since "
    'the last run, and none of them raised one. Set a key (README: "A first run with a real key"), or run '
    "`%agent --provider demo` for the offline tour."
)


def explain(error: CellError) -> str:
    """A short Markdown explanation of ``error``, ending with the no-model line."""
    head = f"**{error.label} raised `{error.type}`**" + (f": {error.message}" if error.message else "")
    lines = [head, ""]
    where = _where(error)
    if where:
        lines += [where, ""]
    hint = HINTS.get(error.type.rsplit(".", 1)[-1])
    if hint:
        lines.append(f"A `{error.type}` means {hint}")
    else:
        lines.append(
            f"`{error.type}` is not one the offline explainer knows; its message and the line above are "
            "the best leads (search the message, or read the function's documentation)."
        )
    names = _QUOTED.findall(error.message)
    if names and error.type in ("NameError", "KeyError", "AttributeError", "ModuleNotFoundError"):
        lines += ["", f"The name in question: `{names[0]}`."]
    lines += ["", NO_MODEL]
    return "\n".join(lines)


def _where(error: CellError) -> str:
    """Where it was raised: the innermost frame in a cell, or the innermost frame at all."""
    frames = [m for m in (_FRAME.match("    " + f) for f in error.frames) if m]
    in_cell = [m for m in frames if m.group("where").startswith(("Cell In", "cell #"))]
    chosen = in_cell[-1] if in_cell else (frames[-1] if frames else None)
    if chosen is None:
        return ""
    where = chosen.group("where").split(", in ")[0]
    code = f": `{chosen.group('code').strip()}`" if chosen.group("code") else ""
    deeper = " (the call it made failed further in: see the last frame)" if chosen is not frames[-1] else ""
    return f"It was raised at {where}{code}{deeper}."


def answer(prompt_message: str) -> str:
    """The explainer's reply to a run's first user message (its activity block included)."""
    error = last_error(prompt_message)
    return explain(error) if error is not None else NOTHING_TO_EXPLAIN
