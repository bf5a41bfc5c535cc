"""The open notebook as the Jupyter server's collaboration room holds it: read and changed live.

With ``jupyter-collaboration`` the server keeps each open notebook as a shared document
(``jupyter_ydoc.YNotebook`` over ``pycrdt``); JupyterLab and Notebook 7 render that document,
so a change made to it appears in the page at once, next to the person's own typing. This
module joins the room as one more collaborator, over a websocket, from a thread of its own:

- The kernel's main thread is busy running ``%agent`` (and cannot process comm messages
  until the cell ends), so the connection lives on its own asyncio loop; every read and
  change runs *on that loop* (``_call``), so the document is only ever touched by one thread.
- Only our own changes are sent (the update each change makes, computed from the state
  vector before it); what the server sends is applied and never echoed back.
- A dropped connection is noticed (the socket closes) and the next call reconnects once,
  syncing a fresh copy; a server that cannot be reached is a ``JoinError`` with the reason.

The session request (``PUT api/collaboration/session/<path>``) is jupyter-collaboration's own
REST API, as its frontend uses it. No IPython here.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import quote

from .document import CellRun, CellType, DocCell, DocumentError, JoinError, Snapshot
from .route import Route

_log = logging.getLogger(__name__)

T = TypeVar("T")

TIMEOUT = 10.0  # seconds: connect and sync, or one call on the loop
# An initial sync carries the whole notebook; its images and outputs can be large.
MAX_MESSAGE = 512 << 20
ORIGIN = "pseudoclaude"


class LiveNotebook:
    """The live document of one notebook, joined through ``route``."""

    live = True

    def __init__(self, route: Route, *, timeout: float = TIMEOUT) -> None:
        self.route = route
        self.timeout = timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._doc: Any = None  # jupyter_ydoc.YNotebook, touched on the loop only
        self._socket: Any = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: str | None = None
        self._alive = False
        self._lock = threading.Lock()  # one connect at a time

    @property
    def where(self) -> str:
        return f"the open notebook {self.route.path} (live: changes appear in the page)"

    # --- connection ----------------------------------------------------------------------------

    def open(self) -> None:
        """Join the room and sync; raises ``JoinError`` with the reason when that fails."""
        with self._lock:
            if self._alive:
                return
            self._shutdown()
            session = _session(self.route, self.timeout)
            self._ready.clear()
            self._failure = None
            self._thread = threading.Thread(
                target=self._serve, args=(session,), name="pseudoclaude-document", daemon=True
            )
            self._thread.start()
            if not self._ready.wait(self.timeout + 1):
                self._failure = (
                    self._failure or f"no answer from the Jupyter server within {self.timeout:.0f} s"
                )
            if self._failure is not None:
                failure = self._failure
                self._shutdown()
                raise JoinError(failure)

    def close(self) -> None:
        with self._lock:
            self._shutdown()

    def _shutdown(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(self.timeout)
        self._thread, self._loop, self._stop, self._alive = None, None, None, False

    def _serve(self, session: Mapping[str, str]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(session))
        except Exception as exc:  # noqa: BLE001 - said by open() or the next call, never raised here
            self._failure = self._failure or _reason(exc)
            _log.debug("the live notebook's connection ended", exc_info=True)
        finally:
            self._alive = False
            self._ready.set()
            loop.close()

    async def _main(self, session: Mapping[str, str]) -> None:
        from jupyter_ydoc import YNotebook
        from pycrdt import YMessageType, YSyncMessageType, create_sync_message, handle_sync_message
        from websockets.asyncio.client import connect

        room = f"{session['format']}:{session['type']}:{session['fileId']}"
        url = f"{self.route.ws_url}api/collaboration/room/{room}?sessionId={quote(session['sessionId'])}"
        headers = {"Authorization": f"token {self.route.token}"} if self.route.token else None
        self._stop = asyncio.Event()
        synced = asyncio.Event()
        doc = YNotebook()
        async with connect(
            url, additional_headers=headers, max_size=MAX_MESSAGE, open_timeout=self.timeout, logger=_log
        ) as socket:
            self._socket, self._doc = socket, doc

            async def listen() -> None:
                async for message in socket:
                    data = message if isinstance(message, bytes) else message.encode()
                    if not data or data[0] != YMessageType.SYNC:
                        continue  # awareness (who else is here): not ours to track
                    with doc.ydoc.transaction(origin="server"):
                        reply = handle_sync_message(data[1:], doc.ydoc)
                    if data[1:2] == bytes([YSyncMessageType.SYNC_STEP2]):
                        synced.set()
                    if reply is not None:
                        await socket.send(reply)

            reader = asyncio.ensure_future(listen())
            await socket.send(create_sync_message(doc.ydoc))
            try:
                await asyncio.wait_for(synced.wait(), self.timeout)
            except asyncio.TimeoutError:
                self._failure = "the server did not send the document"
                reader.cancel()
                return
            self._alive = True
            self._ready.set()
            stop = asyncio.ensure_future(self._stop.wait())
            await asyncio.wait([reader, stop], return_when=asyncio.FIRST_COMPLETED)
            self._alive = False
            reader.cancel()
            stop.cancel()

    def _call(self, fn: Callable[[Any], T], *, change: bool = False) -> T:
        """Run ``fn(doc)`` on the loop; a change's update is sent before this returns."""
        if not self._alive:
            self.open()  # a dropped connection: reconnect once, with a fresh copy
        loop = self._loop
        assert loop is not None
        future = asyncio.run_coroutine_threadsafe(self._apply(fn, change), loop)
        try:
            return future.result(self.timeout)
        except TimeoutError:
            future.cancel()
            raise DocumentError(f"the live notebook did not answer within {self.timeout:.0f} s") from None

    async def _apply(self, fn: Callable[[Any], T], change: bool) -> T:
        from pycrdt import create_update_message

        doc = self._doc
        if not change:
            return fn(doc)
        before = doc.ydoc.get_state()
        with doc.ydoc.transaction(origin=ORIGIN):
            result = fn(doc)
        update = doc.ydoc.get_update(before)
        if update != b"\x00\x00":
            await self._socket.send(create_update_message(update))
        return result

    # --- the Document protocol -----------------------------------------------------------------

    def snapshot(self, start: int, end: int) -> Snapshot:
        def read(doc: Any) -> Snapshot:
            cells = doc.ycells
            ids = tuple(str(c.get("id") or "") for c in cells)
            shown = tuple(_cell(i, cells[i]) for i in range(max(0, start), min(end, len(ids))))
            return Snapshot(ids, shown, self.where)

        return self._call(read)

    def insert(self, index: int, cell_type: CellType, source: str, stamp: Mapping[str, Any]) -> DocCell:
        def insert(doc: Any) -> DocCell:
            cell: dict[str, Any] = {
                "cell_type": cell_type,
                "source": source,
                "metadata": {"pseudoclaude": dict(stamp)},
            }
            if cell_type == "code":
                cell.update(outputs=[], execution_count=None)
            ycell = doc.create_ycell(cell)
            doc.ycells.insert(index, ycell)
            return _cell(index, doc.ycells[index])

        return self._call(insert, change=True)

    def set_source(self, index: int, cell_id: str, source: str, stamp: Mapping[str, Any]) -> DocCell:
        def edit(doc: Any) -> DocCell:
            ycell = _at(doc, index, cell_id)
            doc.set_cell(index, source=source)
            _stamp(ycell, stamp)
            return _cell(index, ycell)

        return self._call(edit, change=True)

    def delete(self, index: int, cell_id: str) -> DocCell:
        def delete(doc: Any) -> DocCell:
            gone = _cell(index, _at(doc, index, cell_id))
            del doc.ycells[index]
            return gone

        return self._call(delete, change=True)

    def begin_run(self, index: int, cell_id: str) -> None:
        def begin(doc: Any) -> None:
            ycell = _at(doc, index, cell_id)
            _set_outputs(ycell, [])
            ycell["execution_count"] = None
            ycell["execution_state"] = "running"

        self._call(begin, change=True)

    def end_run(self, index: int, cell_id: str, run: CellRun, stamp: Mapping[str, Any]) -> None:
        def end(doc: Any) -> None:
            ycell = _find(doc, index, cell_id)
            if ycell is None:
                return  # the person deleted it while it ran: the outputs have nowhere to go
            _set_outputs(ycell, list(run.outputs))
            ycell["execution_count"] = run.execution_count
            ycell["execution_state"] = "idle"
            _stamp(ycell, stamp)

        self._call(end, change=True)


def _session(route: Route, timeout: float) -> dict[str, str]:
    """Ask the server for the notebook's room (jupyter-collaboration's session API)."""
    import httpx

    headers = {"Authorization": f"token {route.token}"} if route.token else {}
    try:
        response = httpx.put(
            f"{route.url}api/collaboration/session/{quote(route.path)}",
            json={"format": "json", "type": "notebook"},
            headers=headers,
            timeout=timeout,
        )
    except httpx.HTTPError as exc:
        raise JoinError(f"the Jupyter server at {route.url} could not be reached ({_reason(exc)})") from None
    if response.status_code == 404:
        raise JoinError(
            "the Jupyter server has no collaboration extension; install pseudoclaude_nb[lab] "
            "(jupyter-collaboration) where the server runs and restart it"
        )
    if response.status_code in (401, 403):
        raise JoinError(f"the Jupyter server refused this kernel's token (HTTP {response.status_code})")
    if response.status_code >= 400:
        raise JoinError(f"the Jupyter server answered HTTP {response.status_code} for the notebook's room")
    try:
        found = response.json()
        return {key: str(found[key]) for key in ("format", "type", "fileId", "sessionId")}
    except (ValueError, KeyError, TypeError):
        raise JoinError("the Jupyter server's collaboration API answered in an unknown shape") from None


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else ("" if value is None else str(value))


def _cell(index: int, ycell: Any) -> DocCell:
    """A plain copy of one cell (no Y types escape the loop)."""
    metadata = _py(ycell.get("metadata"))
    metadata = metadata if isinstance(metadata, dict) else {}
    stamp, tags = metadata.get("pseudoclaude"), metadata.get("tags")
    outputs = _py(ycell.get("outputs"))
    count = ycell.get("execution_count")
    return DocCell(
        index=index,
        id=str(ycell.get("id") or ""),
        cell_type=str(ycell.get("cell_type") or "code"),
        source=_text(ycell.get("source")),
        execution_count=int(count) if isinstance(count, (int, float)) else None,
        outputs=tuple(o for o in outputs if isinstance(o, dict)) if isinstance(outputs, list) else (),
        agent=stamp if isinstance(stamp, dict) else None,
        tags=tuple(t for t in tags if isinstance(t, str)) if isinstance(tags, list) else (),
    )


def _py(value: Any) -> Any:
    """A shared value as plain Python (maps, arrays and texts copied out; Yjs keeps every
    number as a float, so whole ones come back as ints, as jupyter_ydoc does)."""
    return _ints(value.to_py() if hasattr(value, "to_py") else value)


def _ints(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def _at(doc: Any, index: int, cell_id: str) -> Any:
    """The cell at ``index``, which must still be ``cell_id`` (checked on the loop, at the change)."""
    cells = doc.ycells
    if not 0 <= index < len(cells) or str(cells[index].get("id") or "") != cell_id:
        raise DocumentError(
            f"the notebook changed while the change was being made: cell {index} is no longer {cell_id}; "
            "read_notebook again"
        )
    return cells[index]


def _find(doc: Any, index: int, cell_id: str) -> Any:
    cells = doc.ycells
    if 0 <= index < len(cells) and str(cells[index].get("id") or "") == cell_id:
        return cells[index]
    return next((c for c in cells if str(c.get("id") or "") == cell_id), None)


def _stamp(ycell: Any, stamp: Mapping[str, Any]) -> None:
    from pycrdt import Map

    metadata = ycell.get("metadata")
    if metadata is None:
        ycell["metadata"] = Map({"pseudoclaude": dict(stamp)})
        return
    if "pseudoclaude" in metadata:
        del metadata["pseudoclaude"]
    metadata["pseudoclaude"] = dict(stamp)


def _set_outputs(ycell: Any, outputs: list[Mapping[str, Any]]) -> None:
    """Outputs in the shared schema (``YNotebook``'s docstring): each a map, stream text as text."""
    from pycrdt import Array, Map, Text

    youtputs = ycell.get("outputs")
    if youtputs is None:
        ycell["outputs"] = youtputs = Array()
    youtputs.clear()
    made = []
    for output in outputs:
        item = dict(output)
        if item.get("output_type") == "stream":
            item["text"] = Text(_text(item.get("text")))
        made.append(Map(item))
    youtputs.extend(made)
