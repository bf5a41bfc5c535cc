"""The notebook side of the agent, over IPython: cell recording, the host, the ``?`` fix.

``CellRecorder`` listens to ``pre_run_cell``/``post_run_cell``. While a user cell runs it
copies what it prints into bounded buffers (in a kernel, the batches ipykernel sends,
``magics.stream_tap``; elsewhere a tee of ``sys.stdout``/``sys.stderr``, every write going
to the original stream first), and notes displayed outputs and the
result by wrapping the shell's display publisher and display hook. Cells of this
package's magics are not recorded and not teed; a cell marked ``agent-skip`` (its first
line ``# agent-skip``, or the tag, found through the ``cellId`` the frontend sends and the
notebook file) is not teed either and is recorded as a place only. ``IPythonNotebook`` is the core's
``NotebookHost``. ``question_transformer`` lets ``%agent why did it fail?`` reach the magic
instead of IPython's help syntax.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..notebook.activity import package_cell
from ..notebook.record import (
    CELL_IMAGES,
    STDERR_CAP,
    STDOUT_CAP,
    BoundedText,
    CellRecord,
    describe_display,
    display_image,
    error_info,
)
from ..notebook.skip import NotebookTags, marked_in_source
from ..notebook.store import CellStore
from .stream_tap import StreamTap, can_tap

if TYPE_CHECKING:
    from ..notebook.host import DocumentAccess

# A failure that must not reach the user's output is logged at debug, with its traceback:
# logging.getLogger("pseudoclaude_nb").setLevel(logging.DEBUG) (and a handler) shows it.
_log = logging.getLogger(__name__)

DISPLAYS_KEPT = 20


DRAIN_EVERY = 256  # writes a tee holds before it copies them into its sink


class _Tee:
    """A stream that writes through to ``stream`` and copies into ``sink`` unless paused.

    A print loop writes ~4 times a line; each write here is one list append (the copy into
    the bounded sink happens every ``DRAIN_EVERY`` writes, joined), so the recorder adds a
    few percent to an output-heavy cell, not a third.
    """

    def __init__(self, stream: Any, sink: BoundedText, recorder: CellRecorder) -> None:
        self._stream, self._sink, self._recorder = stream, sink, recorder
        self._pending: list[Any] = []

    def write(self, text: Any) -> Any:
        written = self._stream.write(text)
        if not self._recorder.paused:
            pending = self._pending
            pending.append(text)
            if len(pending) >= DRAIN_EVERY:
                self.drain()
        return written

    def drain(self) -> None:
        pending, self._pending = self._pending, []
        try:
            self._sink.write("".join(t if isinstance(t, str) else _as_text(t) for t in pending))
        except Exception:  # noqa: BLE001 - recording must never break the user's print
            _log.debug("the cell recorder could not copy printed output", exc_info=True)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _bindings(namespace: Mapping[str, Any]) -> dict[str, int]:
    """``id()`` of the value of each name in the user's namespace (a skipped cell's before and after)."""
    try:
        return {name: id(value) for name, value in list(namespace.items())}
    except Exception:  # noqa: BLE001 - recording must never break the user's cell
        _log.debug("the cell recorder could not list the namespace", exc_info=True)
        return {}


def _as_text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class _Running:
    """What is captured for the cell that is running now."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.stdout = BoundedText(STDOUT_CAP, STDOUT_CAP // 2)
        self.stderr = BoundedText(STDERR_CAP * 2 // 3, STDERR_CAP // 3)
        self.displays: list[str] = []
        self.more_displays = 0
        self.result = ""
        self.images: list[tuple[bytes, str]] = []  # issue-14: the last few displayed images


def notebook_path(shell: Any) -> str | None:
    """The notebook file this kernel runs, as its frontend names it (VS Code, then Jupyter)."""
    named = shell.user_ns.get("__vsc_ipynb_file__") or os.environ.get("JPY_SESSION_NAME")
    return named if isinstance(named, str) and named.endswith(".ipynb") else None


def cell_id(shell: Any, info: Any) -> str | None:
    """The id of the running cell: what ipykernel hands ``run_cell``, else the request's metadata.

    JupyterLab and VS Code send it as ``metadata.cellId`` of the execute request; IPython 8.13+
    passes it on as ``info.cell_id``. nbclient and terminals send none.
    """
    found = getattr(info, "cell_id", None)
    if not found and hasattr(shell, "get_parent"):
        try:
            found = (shell.get_parent().get("metadata") or {}).get("cellId")
        except Exception:  # noqa: BLE001 - a missing or odd parent header means no id
            found = None
    return found if isinstance(found, str) and found else None


class CellRecorder:
    def __init__(self, shell: Any, store: CellStore, magic_names: Callable[[], set[str]]) -> None:
        self.shell = shell
        self.store = store
        self._magic_names = magic_names
        self._running: _Running | None = None
        self._skipping = False  # the running cell is marked agent-skip
        self._before: dict[str, int] = {}  # id() of each user name's value before a skipped cell
        self._tags = NotebookTags()
        self._tees: tuple[Any, Any] | None = None  # the streams the tees replaced
        self._made: tuple[_Tee, ...] = ()  # the tees themselves
        self._taps: tuple[StreamTap, ...] = ()  # in a kernel: no tees, the sent batches are copied
        self.paused = 0
        self._publish: Any = None
        self._write_format: Any = None

    # --- wiring ------------------------------------------------------------------------------

    def install(self) -> None:
        if can_tap(sys.stdout) and can_tap(sys.stderr):
            self._taps = (
                StreamTap(sys.stdout, self._sink("stdout")),
                StreamTap(sys.stderr, self._sink("stderr")),
            )
        self.shell.events.register("pre_run_cell", self.pre_run_cell)
        self.shell.events.register("post_run_cell", self.post_run_cell)
        pub = self.shell.display_pub
        self._publish = pub.publish
        pub.publish = self._on_publish
        hook = self.shell.displayhook
        if hasattr(hook, "write_format_data"):
            self._write_format = hook.write_format_data
            hook.write_format_data = self._on_result
        # A terminal prints the traceback and the "Out[n]:" prompt to stdout; that is the
        # shell's output, not the cell's (the record has the error and result already).
        self._quieted = [(self.shell, "showtraceback")]
        self._quieted += [
            (hook, n) for n in ("write_output_prompt", "finish_displayhook") if hasattr(hook, n)
        ]
        for obj, attr in self._quieted:
            setattr(obj, attr, self._quiet(getattr(obj, attr)))

    def _sink(self, which: str) -> Callable[[str], None]:
        def write(data: str) -> None:
            running = self._running
            if running is not None and not self.paused:
                getattr(running, which).write(data)

        return write

    def uninstall(self) -> None:
        for tap in self._taps:
            tap.remove()
        self._taps = ()
        for name, fn in (("pre_run_cell", self.pre_run_cell), ("post_run_cell", self.post_run_cell)):
            try:
                self.shell.events.unregister(name, fn)
            except ValueError:
                pass
        self._untee()
        for obj, attr in (
            (self.shell.display_pub, "publish"),
            (self.shell.displayhook, "write_format_data"),
            *getattr(self, "_quieted", ()),
        ):
            if attr in vars(obj):
                delattr(obj, attr)  # the class's method shows through again

    # --- events ------------------------------------------------------------------------------

    def pre_run_cell(self, info: Any) -> None:
        source = getattr(info, "raw_cell", "") or ""
        self._untee()
        self._skipping = False
        if package_cell(source, self._magic_names()):
            self._running = None
            return
        if self._skipped(source, info):
            self._running, self._skipping = None, True
            self._before = _bindings(self.shell.user_ns)  # what it binds is withheld (issue 41)
            return
        if self._taps:
            self._running = None
            for tap in self._taps:
                tap.flush()  # what an earlier cell left pending is not this cell's
            self._running = _Running(source)
            return
        self._running = running = _Running(source)
        self._tees = (sys.stdout, sys.stderr)
        sys.stdout = _Tee(sys.stdout, running.stdout, self)
        sys.stderr = _Tee(sys.stderr, running.stderr, self)
        self._made = (sys.stdout, sys.stderr)

    def post_run_cell(self, result: Any) -> None:
        if self._running is not None:
            for tap in self._taps:
                tap.flush()  # the last batch is sent (and copied) before the record is made
        running, self._running = self._running, None
        skipping, self._skipping = self._skipping, False
        self._untee()
        if skipping:
            count = getattr(result, "execution_count", None)
            self.store.add(CellRecord.skipped_cell(self.store.next_seq(), count))
            before, self._before = self._before, {}
            after = _bindings(self.shell.user_ns)
            self.store.withhold({name: i for name, i in after.items() if before.get(name) != i})
            return
        if running is None:
            return
        exc = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        error = error_info(exc, label=self._label) if isinstance(exc, BaseException) else None
        displays = list(running.displays)
        if running.more_displays:
            displays.append(f"[{running.more_displays} more displays not kept]")
        self.store.add(
            CellRecord.make(
                self.store.next_seq(),
                getattr(result, "execution_count", None),
                running.source,
                stdout=running.stdout.value(),
                stderr=running.stderr.value(),
                result=running.result,
                displays=displays,
                error=error,
                images=running.images,
            )
        )

    def _skipped(self, source: str, info: Any) -> bool:
        if marked_in_source(source):
            return True
        try:
            return self._tags.skipped(notebook_path(self.shell), cell_id(self.shell, info))
        except Exception:  # noqa: BLE001 - an unreadable notebook must not break the user's cell
            return False

    def _untee(self) -> None:
        if self._tees is None:
            return
        out, err = self._tees
        for tee in self._made:
            tee.drain()  # what it holds goes into the record before it is read (wherever it is now)
        self._made = ()
        # Only undo our own tee: a cell that set sys.stdout itself keeps what it set.
        if isinstance(sys.stdout, _Tee) and sys.stdout._recorder is self:
            sys.stdout = out
        if isinstance(sys.stderr, _Tee) and sys.stderr._recorder is self:
            sys.stderr = err
        self._tees = None

    def _on_publish(self, data: Any, *args: Any, **kwargs: Any) -> Any:
        running = self._running
        if running is not None and not kwargs.get("update") and isinstance(data, Mapping):
            try:
                if len(running.displays) < DISPLAYS_KEPT:
                    running.displays.append(describe_display(data))
                else:
                    running.more_displays += 1
                picture = display_image(data)
                if picture is not None:
                    running.images = [*running.images, picture][-CELL_IMAGES:]
            except Exception:  # noqa: BLE001 - recording must never break a display
                _log.debug("the cell recorder could not note a display", exc_info=True)
        self.paused += 1  # a terminal's publisher prints: that is not the cell's own output
        try:
            return self._publish(data, *args, **kwargs)
        finally:
            self.paused -= 1

    def _on_result(self, format_dict: Any, *args: Any, **kwargs: Any) -> Any:
        running = self._running
        if running is not None and isinstance(format_dict, Mapping):
            try:
                running.result = describe_display(format_dict)
            except Exception:  # noqa: BLE001 - recording must never break the cell's result
                _log.debug("the cell recorder could not note the cell's result", exc_info=True)
        self.paused += 1
        try:
            return self._write_format(format_dict, *args, **kwargs)
        finally:
            self.paused -= 1

    def _quiet(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.paused += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self.paused -= 1

        return call

    def _label(self, filename: str) -> str | None:
        """ "Cell In[3]" for a cell's code; ``None`` (dropped) for the shell's own frames."""
        count = getattr(getattr(self.shell, "compile", None), "_filename_map", {}).get(filename)
        if count is not None:
            return f"Cell In[{count}]"
        if "/IPython/core/" in filename or "/ipykernel/" in filename:
            return None
        return filename


class IPythonNotebook:
    """The core's ``NotebookHost`` over an IPython shell."""

    def __init__(
        self, shell: Any, store: CellStore, magic_names: Callable[[], set[str]] | None = None
    ) -> None:
        self.shell = shell
        self._store = store
        self._magic_names = magic_names or set
        self._link: Any = None  # notebook.link.DocumentLink, made on the first run (not at %load_ext)
        self._runner: Any = None  # magics.cell_exec.CellRunner

    def document(self, *, live: bool = True) -> DocumentAccess:
        from ..notebook.host import DocumentAccess
        from ..notebook.link import DocumentLink
        from .cell_exec import CellRunner

        if self._link is None:
            self._link = DocumentLink(lambda: notebook_path(self.shell))
            self._runner = CellRunner(self.shell, self._magic_names, lambda: cell_id(self.shell, None))
        document, why = self._link.resolve(live=live)
        # Said by a run where a person has a notebook open that the agent cannot change (a
        # server without the collaboration extension, VS Code); a kernel that does not know
        # its notebook (nbclient, a console) says why in %agent --tools and %context only.
        news = self._link.news(why, document) if document is not None and _in_kernel(self.shell) else None
        return DocumentAccess(document, why, news, self._runner)

    def finish_run(self) -> None:
        """After a run: the ``%agent`` cell takes the execution count after the cells it ran."""
        if self._runner is not None:
            self._runner.finish()

    def close(self) -> None:
        if self._link is not None:
            self._link.close()

    @property
    def cells(self) -> CellStore:
        return self._store

    def namespace(self) -> Mapping[str, Any]:
        return self.shell.user_ns

    def propose_cell(self, code: str) -> str:
        lines = len(code.splitlines()) or 1
        size = f"{lines} line{'s' if lines != 1 else ''}"
        if _in_kernel(self.shell):
            # Jupyter frontends insert the payload as a new cell below the running one.
            self.shell.set_next_input(code, replace=False)
            return f"proposed a new cell below ({size}); the user reviews and runs it"
        print(f"proposed cell ({size}):\n{code}", flush=True)
        return f"printed the proposed code ({size}) for the user: this is a terminal, not a notebook"


def _in_kernel(shell: Any) -> bool:
    return type(shell).__module__.startswith("ipykernel")


# --- "%agent why did it fail?" ----------------------------------------------------------------

_QUESTION = re.compile(r"^(?P<indent>\s*)%(?P<name>[A-Za-z_]\w*)(?P<rest>\s+.*\S)\s*$")


def question_transformer(names: Callable[[], set[str]]) -> Callable[[list[str]], list[str]]:
    """An ``input_transformers_cleanup`` step: a package line magic ending with ``?`` runs.

    IPython reads a line that ends with ``?`` as a help request, even after a line magic;
    this step runs before that and turns the line into the ``run_line_magic`` call IPython
    would make itself. ``%agent?`` (and ``%agent ??``) stay help; ``%%`` cells are left alone.
    """

    def transform(lines: list[str]) -> list[str]:
        if not lines or lines[0].lstrip().startswith("%%"):
            return lines
        out = []
        for line in lines:
            match = _QUESTION.match(line)
            rest = match.group("rest").strip() if match else ""
            if match and rest.endswith("?") and rest.strip("?").strip() and match.group("name") in names():
                newline = "\n" if line.endswith("\n") else ""
                line = f"{match.group('indent')}get_ipython().run_line_magic({match.group('name')!r}, {rest!r}){newline}"
            out.append(line)
        return out

    transform.pseudoclaude = True  # type: ignore[attr-defined]  # found again by unregister
    return transform
