"""A ``.ipynb`` file as ``read_file`` shows it: numbered lines of a compact rendering.

Raw notebook JSON is mostly escaping, metadata and base64 images; the model needs the
cells. Each cell becomes a header line (number, type, execution count), its source, and
its text outputs capped (images and other rich outputs listed by type). A file that is
not a readable notebook returns ``None`` and is read as plain text.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO

from ..redact import redact_text
from .record import cap, clean

OUTPUT_CAP = 600  # characters of one output
CELL_OUTPUTS_CAP = 1_500  # characters of all outputs of one cell
MAX_NOTEBOOK_BYTES = 64_000_000
MAX_LINE_CHARS = 2_000


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def output_lines(output: dict[str, Any]) -> list[str]:
    kind = output.get("output_type")
    if kind == "stream":
        return [f"{output.get('name', 'stdout')}: " + cap(clean(_text(output.get("text"))), OUTPUT_CAP)]
    if kind == "error":
        tb = [clean(line) for line in output.get("traceback") or []]
        where = [line for line in "\n".join(tb).splitlines() if line.startswith(("Cell In", "File "))][-1:]
        return [f"error: {output.get('ename', '')}: {clean(str(output.get('evalue', '')))}", *where]
    if kind in ("execute_result", "display_data"):
        data = output.get("data") or {}
        label = f"Out[{output.get('execution_count')}]" if kind == "execute_result" else "display"
        rich = [m for m in data if m != "text/plain"]
        listed = ", ".join(f"[{m}]" for m in rich if m.startswith("image/") or m.startswith("application/"))
        if "text/plain" in data:
            text = cap(clean(_text(data["text/plain"])), OUTPUT_CAP)
            return [f"{label}: {text}" + (f" {listed}" if listed else "")]
        return [f"{label}: {listed or ', '.join(rich)}"]
    return [f"[{kind} output]"]


def render_notebook(nb: dict[str, Any]) -> list[str]:
    cells = nb.get("cells")
    if not isinstance(cells, list):
        raise ValueError("no cells")
    kernel = ((nb.get("metadata") or {}).get("kernelspec") or {}).get("name", "")
    lines = [f"# notebook · {len(cells)} cells" + (f" · kernel {kernel}" if kernel else "")]
    for number, cell in enumerate(cells, start=1):
        kind = cell.get("cell_type", "?")
        count = cell.get("execution_count")
        lines.append(f"## [{number}] {kind}" + (f" · In [{count}]" if kind == "code" and count else ""))
        lines.extend(_text(cell.get("source")).splitlines() or ["(empty)"])
        shown: list[str] = []
        for output in cell.get("outputs") or []:
            shown.extend(output_lines(output) if isinstance(output, dict) else [])
        block = cap("\n".join(shown), CELL_OUTPUTS_CAP)
        lines.extend(f"  ↳ {line}" for line in block.splitlines() if block)
    return lines


def read_notebook(source: BinaryIO, offset: int, limit: int, shown_path: str) -> str | None:
    """``read_file``'s answer for a notebook, or ``None`` to read it as plain text.

    ``source`` is the file ``read_file`` already opened (relative to a directory fd, no link
    followed, a regular file with one link): the notebook is read from it, never opened again
    by path, so a name swapped for a link after the checks is not followed.
    """
    try:
        source.seek(0)
        data = source.read(MAX_NOTEBOOK_BYTES + 1)
        if len(data) > MAX_NOTEBOOK_BYTES:
            return None
        lines = render_notebook(json.loads(data.decode("utf-8", errors="replace")))
    except (ValueError, OSError, AttributeError, TypeError, RecursionError):
        return None
    total = len(lines)
    if offset > total:
        from ..errors import ToolError

        raise ToolError(f"offset={offset} is past the end of {shown_path}, which renders as {total} lines")
    last = offset + limit - 1
    out = ["(a notebook, shown as cells and text outputs, not raw JSON; line numbers are of this view)"]
    for number in range(offset, min(last, total) + 1):
        line = lines[number - 1]
        if len(line) > MAX_LINE_CHARS:  # redacted before the cut: no half key left
            line = redact_text(line)
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f"… [{len(line) - MAX_LINE_CHARS} more characters on this line]"
        out.append(f"{number:>6}\t{line}")
    if total > last:
        out.append(f"… {total - last} more lines; use offset={last + 1}")
    return "\n".join(out)
