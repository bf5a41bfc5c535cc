"""``run_cell``'s executor: a document cell's code run in this kernel, its outputs in notebook form.

The kernel is busy running ``%agent`` and processes no other request until that cell ends,
so a cell the agent runs cannot be sent to the kernel as an execute request: it runs here,
in-process, on the same path as ``run_python`` (``python_exec.execute``), with what a real
cell gets besides — IPython's syntax (magics, ``!`` commands) through ``transform_cell``,
tracebacks that name ``Cell In[n]``, the inline backend's figures, ``In``/``Out`` and the
``_i``/``_n`` variables — and its outputs become nbformat outputs for the document.

Numbering: each cell run takes the kernel's next execution count (In [n+1], In [n+2], … after
the ``%agent`` cell's own In [n]); when the run ends, the ``%agent`` cell, which finishes
after them, takes the number after theirs (``finish``), so no two cells share a number.

Bounds: printed output keeps its first 256 KB and last 64 KB in the page (the model gets the
usual caps); at most 50 displays and 10 MB of display data; ``input()`` and ``getpass`` fail
at once with a sentence (no one can answer a prompt inside the ``%agent`` cell); the stop
button stops the cell and the run.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import getpass
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..notebook.document import CellRun
from ..notebook.record import CellRecord, describe_display, display_image, error_info
from ..tools import shell as bounds
from .python_exec import MAX_IMAGES, Execution, execute

STREAM_HEAD = 256_000
STREAM_TAIL = 64_000
MAX_DISPLAYS = 50
DISPLAY_BYTES = 10 << 20
TEXT_LIMIT = 30_000  # the model's reading of one run, as read_cells caps a page

NO_INPUT = (
    "input() is not available in a cell the agent runs (nobody can answer inside the %agent cell); "
    "give the value in the code, or let the user run this cell"
)


class _Verbatim:
    """A redactor that keeps text as it is: the page shows the user's own output unredacted."""

    def text(self, value: str) -> str:
        return value


class CellRunner:
    """Runs cells for the document tools in one shell, and numbers them."""

    def __init__(
        self,
        shell: Any,
        magic_names: Callable[[], set[str]],
        running: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.shell = shell
        self._magic_names = magic_names
        self._running = running
        self.ran = 0  # cells run during the current %agent cell (``finish`` settles the numbering)
        self._agent_cell = ""  # that cell's raw source, as IPython stored it before it ran
        self._last = 0  # the last execution count taken
        self._ahead = 0

    def running_cell_id(self) -> str | None:
        return self._running()

    def package_cell(self, source: str) -> bool:
        names = self._magic_names()
        for line in source.splitlines():
            word = line.strip().lstrip("%").split(maxsplit=1)
            if line.strip().startswith("%") and word and word[0].rstrip("?") in names:
                return True
        return False

    def finish(self) -> None:
        """After a run that ran cells: the ``%agent`` cell takes the number after theirs."""
        if self.ran:
            self.ran = 0
            final = self._last + 1
            self.shell.history_manager.store_inputs(final, self._agent_cell)
            self.shell.execution_count = final + self._ahead

    def _number(self) -> int:
        """The next execution count, and the kernel's counter set past it.

        IPython 9 counts a cell at its start (the counter is already the next cell's number while
        ``%agent`` runs), earlier versions at its end; ``_ahead`` is which, read at the first cell.
        """
        shell = self.shell
        if not self.ran:
            raw = shell.history_manager.input_hist_raw
            self._agent_cell = raw[-1] if raw else ""
            self._last = max(len(raw) - 1, 0)  # the %agent cell's own number
            self._ahead = 1 if shell.execution_count > self._last else 0
        self._last += 1
        self.ran += 1
        shell.execution_count = self._last + self._ahead
        return self._last

    def run_code(self, source: str) -> CellRun:
        shell = self.shell
        number = self._number()
        out = bounds.OutputBuffer(STREAM_HEAD, STREAM_TAIL, margin=bounds.REDACT_MARGIN)
        err = bounds.OutputBuffer(STREAM_HEAD, STREAM_TAIL, margin=bounds.REDACT_MARGIN)
        try:
            transformed = shell.transform_cell(source)
        except SyntaxError:
            transformed = source  # compiling it below reports the error where it is
        shell.history_manager.store_inputs(number, transformed, source)
        filename = shell.compile.cache(transformed, number, raw_code=source)
        interrupted = False
        try:
            with _no_input():
                ran = execute(
                    shell, transformed, filename=filename, out=out, err=err, before_exit=_inline_figures
                )
        except KeyboardInterrupt as exc:
            ran, interrupted = Execution([], error=exc), True
        outputs, record = self._outputs(ran, number, filename, out, err, source)
        images = tuple(record.images[:MAX_IMAGES])
        return CellRun(number, tuple(outputs), record.render(TEXT_LIMIT), images, interrupted)

    def _outputs(
        self,
        ran: Execution,
        number: int,
        filename: str,
        out: bounds.OutputBuffer,
        err: bounds.OutputBuffer,
        source: str,
    ) -> tuple[list[dict[str, Any]], CellRecord]:
        outputs: list[dict[str, Any]] = []
        stdout, stderr = out.text(_Verbatim()), err.text(_Verbatim())  # type: ignore[arg-type]
        for name, text in (("stdout", stdout), ("stderr", stderr)):
            if text:
                outputs.append({"output_type": "stream", "name": name, "text": text})
        shown: list[str] = []
        images: list[tuple[bytes, str]] = []
        size = 0
        for display in ran.displays:
            data = _jsonable(getattr(display, "data", None) or {})
            weight = len(json.dumps(data))
            if len(shown) >= MAX_DISPLAYS or size + weight > DISPLAY_BYTES:
                outputs.append(
                    {
                        "output_type": "stream",
                        "name": "stderr",
                        "text": "[more displays not kept in the page]\n",
                    }
                )
                break
            size += weight
            metadata = _jsonable(getattr(display, "metadata", None) or {})
            outputs.append({"output_type": "display_data", "data": data, "metadata": metadata})
            shown.append(describe_display(data))
            picture = display_image(data)
            if picture is not None:
                images.append(picture)
        result = ""
        if ran.has_value:
            data, metadata = self.shell.display_formatter.format(ran.value)
            data = _jsonable(data)
            outputs.append(
                {
                    "output_type": "execute_result",
                    "execution_count": number,
                    "data": data,
                    "metadata": _jsonable(metadata),
                }
            )
            result = describe_display(data)
            self.shell.history_manager.output_hist[number] = ran.value
            self.shell.user_ns.update({"_": ran.value, f"_{number}": ran.value})
        error = None
        if ran.error is not None:
            exc = ran.error
            outputs.append(
                {
                    "output_type": "error",
                    "ename": type(exc).__name__,
                    "evalue": str(exc),
                    "traceback": self._traceback(exc, filename),
                }
            )
            error = error_info(exc, label=self._label)
        record = CellRecord.make(
            0,
            number,
            source,
            stdout=stdout,
            stderr=stderr,
            result=result,
            displays=shown,
            error=error,
            images=images,
        )
        return outputs, record

    def _traceback(self, exc: BaseException, filename: str) -> list[str]:
        """The traceback as the notebook shows it, from the cell's own first frame."""
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != filename:
            tb = tb.tb_next
        try:
            lines = self.shell.InteractiveTB.structured_traceback(type(exc), exc, tb or exc.__traceback__)
            return [str(line) for line in lines]
        except Exception:  # noqa: BLE001 - a traceback that cannot be formatted is still an error
            return [f"{type(exc).__name__}: {exc}"]

    def _label(self, filename: str) -> str | None:
        count = getattr(getattr(self.shell, "compile", None), "_filename_map", {}).get(filename)
        if count is not None:
            return f"Cell In[{count}]"
        if "/IPython/core/" in filename or "/ipykernel/" in filename or filename.endswith("python_exec.py"):
            return None
        return filename


@contextlib.contextmanager
def _no_input() -> Iterator[None]:
    def refuse(*_: Any, **__: Any) -> str:
        raise RuntimeError(NO_INPUT)

    saved = builtins.input, getpass.getpass
    builtins.input, getpass.getpass = refuse, refuse
    try:
        yield
    finally:
        builtins.input, getpass.getpass = saved


def _inline_figures() -> None:
    """The figures a cell drew, displayed as the inline backend does after a real cell."""
    backend = sys.modules.get("matplotlib_inline.backend_inline")
    plt = sys.modules.get("matplotlib.pyplot")
    if backend is None or plt is None or "inline" not in str(plt.get_backend()):
        return
    try:
        backend.flush_figures()
    except Exception:  # noqa: BLE001 - a figure that cannot be drawn is not the cell's failure
        return


def _jsonable(value: Any) -> Any:
    """A display bundle as the notebook format holds it: bytes as base64, the rest JSON."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)
