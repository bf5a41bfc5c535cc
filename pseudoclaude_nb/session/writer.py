"""The session writer: the conversation's hooks that make it durable.

It owns ``conversation.jsonl`` and ``writer.lock`` of one session and nothing else.
Crash rules it keeps (SPEC §6.2):

* an append is one ``write`` and one ``fsync``; a replace (marker + snapshot) is also
  one ``write`` and one ``fsync``, so the loader sees all of it or a torn tail;
* a log whose last byte is not ``\\n`` (a crash mid-line) gets a ``\\n`` first, so the
  next entry does not fuse with the torn one;
* after a failed write the writer is *failed*: its next write is a ``resync`` replace of
  the whole current conversation, so the log converges however much of the failed write
  reached the disk;
* with ``redact`` (the default) every entry passes through ``redact.Redactor`` first, so
  known secret shapes and the environment's API keys never reach the disk. The in-memory
  conversation keeps the original text: only the log is redacted.

A replace repeats messages the writer has already written (the recent tail of a summary,
all but the spilled results of a snapshot), so it keeps each current message's encoded,
redacted line: a snapshot entry is that line plus its ``replace_id``, and a 1,000-message
replace costs about what writing and fsyncing its bytes costs (SPEC §15).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from .. import safeio
from ..conversation import Conversation, Hooks
from ..errors import SessionLockedError, SessionWriteError, UnsafePathError
from ..messages import Message, new_id
from ..redact import Redactor
from ..workspace import LOG_NAME, SPILL_DIR
from . import entries, locks, mend, sidecar
from .encode import EncodeError, encode_checked, encode_entry
from .locks import is_locked

__all__ = ["META_BYTES", "EncodeError", "SessionWriter", "encode_entry", "is_locked"]


# meta.json is brought up to date on close, after a replace (in the background: ``wait_meta``
# waits for it), when the agent's run ends (``settle_meta``), and after this many bytes written
# since. Not every few appends: its atomic rename made the next fsync dearer, and refreshing
# every 32 appends cost a third of the durable append's budget (SPEC §15). A reader finding
# it behind reads only the bytes after its offset (sidecar.refresh).
META_BYTES = 8 << 20


class SessionWriter:
    def __init__(
        self,
        session_dir: Path,
        *,
        model: str | None = None,
        fsync: bool = True,
        redact: bool = True,
        meta_bytes: int = META_BYTES,
    ) -> None:
        self.dir = Path(session_dir)
        self.id = self.dir.name
        self.path = self.dir / LOG_NAME
        self.model = model
        self.fsync = fsync
        self.redactor: Redactor | None = Redactor() if redact else None
        self.failed: SessionWriteError | None = None
        self.conversation: Conversation | None = None
        self._stamped = False
        # Message id -> (the message, its encoded and redacted entry without model or
        # replace_id), for the messages of the current conversation; see the docstring.
        self._lines: dict[str, tuple[Message, bytes]] = {}
        self._lines_env: list[tuple[str, str]] | None = None  # the env keys they were redacted for
        self._lock = threading.Lock()
        self._hooks = Hooks(on_append=self.append_message, on_replace=self.replace)
        self._fd: int | None = None
        self.meta_bytes = meta_bytes
        self._unsynced = 0  # bytes written since meta.json was last brought up to date
        self._meta_lock = threading.Lock()  # one sidecar update at a time
        self._meta_thread: threading.Thread | None = None
        self._notices: list[str] = []  # derived data that could not be kept (``take_notices``)
        self._marker_fields: dict[str, Any] = {}  # see ``marking``
        # A session folder with a link, a special file or a hard-linked file anywhere in it
        # is never written: its writes could land outside the workspace (safeio).
        problem = safeio.tree_problem(self.dir)
        if problem is not None:
            raise UnsafePathError(
                f"session {self.id} is unsafe and is never written: {problem}. Remove the folder "
                f"{self.dir} (or move it out of .pseudoclaude), then start or resume another session"
            )
        self._lock_fd: int | None = self._acquire_lock()
        try:
            # Read and write: the torn-tail check reads the last byte through this same fd.
            self._fd = safeio.open_file(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            # The log is locked too: deleting writer.lock while it is held must not let a
            # second kernel in (its new lock file would be free, this log is not).
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = locks.read_pid(self._lock_fd)
                raise SessionLockedError(self.id, pid) from None
            self._mend_torn_tail()
            # Holding the lock, this writer is the only one that spills here: crash leftovers go.
            for folder in (self.dir, self.dir / SPILL_DIR, self.dir / "images"):
                safeio.remove_stale_temps(folder)
        except BaseException as exc:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            self._release_lock()
            if isinstance(exc, OSError) and not isinstance(exc, UnsafePathError):
                raise SessionWriteError(f"cannot open session log {self.path}: {exc}") from exc
            raise

    # --- wiring ------------------------------------------------------------------------

    def attach(self, conversation: Conversation) -> None:
        """Become the conversation's hooks (and know it, for resyncs)."""
        self.conversation = conversation
        conversation.add_hooks(self._hooks)

    def detach(self) -> None:
        if self.conversation is not None:
            self.conversation.remove_hooks(self._hooks)
            self.conversation = None

    def set_model(self, model: str | None) -> None:
        """The model of this writer's run; the next message entry is stamped with it."""
        if model != self.model:
            self.model, self._stamped = model, False

    def close(self) -> None:
        self.detach()
        if (fd := getattr(self, "_fd", None)) is not None:
            self.settle_meta()
            os.close(fd)
            self._fd = None
        self._release_lock()

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- hooks ---------------------------------------------------------------------------

    def append_message(self, message: Message) -> None:
        with self._lock:
            # When failed, _write sends the resync snapshot, which already holds this message.
            if self.failed:
                self._write(b"")
                return
            self._check_env()
            try:
                line = self._message_line(message)
            except EncodeError as exc:
                raise self._unencodable(exc) from exc
            self._write(line)

    def replace(self, reason: str, messages: list[Message]) -> None:
        with self._lock:
            try:
                data = self._replace_bytes(reason, messages)
            except EncodeError as exc:
                raise self._unencodable(exc) from exc
            self._write(data, resync=False)
        # The sidecar catches up off the caller's thread: that parses the snapshot just written,
        # which would cost a replace several times its write and fsync (SPEC §15).
        self._unsynced = 0
        self._meta_thread = threading.Thread(target=self.sync_meta, name="pseudoclaude-meta", daemon=True)
        self._meta_thread.start()

    @contextlib.contextmanager
    def marking(self, **fields: Any) -> Iterator[None]:
        """Extra fields on the replace markers written meanwhile (an undo's ``undoes``, SPEC §6.1)."""
        self._marker_fields = fields
        try:
            yield
        finally:
            self._marker_fields = {}

    def wait_meta(self) -> None:
        """Wait for a sidecar update running in the background (after a replace)."""
        thread = getattr(self, "_meta_thread", None)
        if thread is not None:
            thread.join()

    def _unencodable(self, exc: EncodeError) -> SessionWriteError:
        """An entry that cannot be encoded fails the writer (closed): the error to raise.

        The conversation already holds the message, so the log must not go on without it:
        the writer is *failed* and every later write tries the resync again, which fails
        the same way until the session is left (``%sessions new``). Nothing is written
        out of order meanwhile.
        """
        self.failed = SessionWriteError(
            f"could not write session log {self.path}: {exc}. Nothing more is written to this "
            "session; start a new one with %sessions new"
        )
        return self.failed

    def settle_meta(self) -> None:
        """Bring ``meta.json`` up to date if anything was written since it last was (a run's end, close).

        The timeline's index too, once the log has grown enough since it was kept (4 MB or
        5 %): an open then scans only what is newer; and the step figures (``steps.idx``)
        once 4 MB of the log are not in them. Only here, never after a replace or
        every ``meta_bytes``: its scan would take the interpreter from the run it follows.
        """
        self.wait_meta()
        meta = self.sync_meta() if self._unsynced else sidecar.read_meta(self.dir)
        if meta is not None:
            with self._meta_lock:  # the index's header says whether it is due: nothing set per append
                from . import timeline  # its scan's imports: at a run's end, not before its first request

                problem = timeline.keep_index(self.dir, meta)  # never raises: derived
            if problem is not None:
                self._notices.append(problem)
            from . import step_figures

            problem = step_figures.keep(self.dir)  # never raises: derived, like the timeline's
            if problem is not None:
                self._notices.append(problem)

    def sync_meta(self) -> dict[str, Any] | None:
        """Bring ``meta.json`` up to date: it reads only what was written since it was last current.

        Derived data: never raises (a reader rebuilds a sidecar it finds stale or broken);
        the sidecar, or None when it could not be brought up to date.
        """
        self._unsynced = 0
        with self._meta_lock:
            try:
                return sidecar.refresh(self.dir, fsync=False)
            except Exception as exc:  # noqa: BLE001 - the sidecar is derived; the log is what counts
                self._notices.append(
                    f"the sidecar meta.json of session {self.id} was not updated: {type(exc).__name__}: "
                    f"{exc} (the log is intact; a reader rebuilds the sidecar from it)"
                )
                return None

    def take_notices(self) -> list[str]:
        """What derived data (the sidecar, the timeline index) could not be kept since last asked,
        each once; the agent says them at the run's end, so a bug there is not silent."""
        notices, self._notices = list(dict.fromkeys(self._notices)), []
        return notices

    # --- other entries ---------------------------------------------------------------------

    def record(self, entry: entries.Recorded) -> None:
        """The only way entries other than messages reach the log (``SessionRecord``): a note,
        usage, spend, spill, compact, rollover, pin or unpin entry, as its value."""
        self._log(entry.raw)

    def _log(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self._write(self._encode(entry))

    # --- internals -------------------------------------------------------------------------

    def _encode(self, entry: dict[str, Any]) -> bytes:
        """One line, redacted.

        Encoding first makes the pre-check one scan of the bytes; only a line that may hold
        a secret is walked, encoded again and redacted as a whole (``Redactor.line``).
        """
        entry, line = encode_checked(entry)  # the entry as written: surrogates escaped
        if self.redactor is not None:
            line = self.redactor.line(entry, line)
        return line

    def _message_line(self, message: Message) -> bytes:
        """One message's line: the path of every append, so it skips the list machinery of ``_bodies``."""
        mid = message.id
        kept = self._lines.get(mid)
        if kept is not None and kept[0] is message:
            return kept[1] + self._model_stamp() + b"}\n"
        line = self._fresh_line(message)
        body = line[:-2]  # an entry is a JSON object and a newline: drop "}\n"
        self._lines[mid] = (message, body)
        stamp = self._model_stamp()
        return body + stamp + b"}\n" if stamp else line

    def _model_stamp(self) -> bytes:
        """``,"model":…`` for the first message entry this writer writes with a model, else empty."""
        if self._stamped or not self.model:
            return b""
        self._stamped = True
        model = self.redactor.text(self.model) if self.redactor is not None else self.model
        return b',"model":' + orjson.dumps(model)

    def _bodies(self, messages: list[Message]) -> list[bytes]:
        """Each message's encoded, redacted entry without its closing brace and newline (kept).

        A message the writer encoded before (the very same object) reuses its line.
        """
        get = self._lines.get
        out = [kept[1] if (kept := get(m.id)) is not None and kept[0] is m else None for m in messages]
        fresh = [i for i, body in enumerate(out) if body is None]
        if fresh:
            # Each entry as written (surrogates escaped), so the redactor encodes the same text.
            pairs = [encode_checked(entries.message_entry(messages[i])) for i in fresh]
            found, lines = [e for e, _ in pairs], [line for _, line in pairs]
            # One pre-check over all new lines; lines are redacted one by one only if it finds something.
            redactor = self.redactor
            if redactor is not None and redactor.may_contain(b"".join(lines)):
                lines = [redactor.line(e, line) for e, line in zip(found, lines, strict=True)]
            for i, line in zip(fresh, lines, strict=True):
                out[i] = body = line[:-2]  # an entry is a JSON object and a newline: drop "}\n"
                self._lines[messages[i].id] = (messages[i], body)
        return out  # type: ignore[return-value]

    def _fresh_line(self, message: Message) -> bytes:
        """A message's entry, encoded and redacted (the pre-check is of this very line)."""
        entry, line = encode_checked(entries.message_entry(message))  # surrogates escaped
        redactor = self.redactor
        if redactor is not None and redactor.may_contain(line, env_read=True):  # after _check_env
            line = redactor.line(entry, line, checked=True)
        return line

    def _check_env(self) -> None:
        """A key set in the environment since a line was kept must be redacted from it too."""
        if self.redactor is not None:
            # The redactor makes a new list only when the keys change; the old one is held
            # here, so a new one cannot have its identity.
            env = self.redactor.env_secrets()
            if env is not self._lines_env:
                self._lines, self._lines_env = {}, env

    def _replace_bytes(self, reason: str, messages: list[Message]) -> bytes:
        """The marker and every snapshot entry, as one buffer for one write.

        A snapshot entry is its body plus ``,"replace_id":…}`` (and the model stamp on the
        first entry this writer writes): the same bytes as encoding the entry, since orjson
        writes a dict compactly and in insertion order and ``entries.message_entry`` adds
        these keys last.
        """
        self._check_env()
        rid = new_id()
        bodies = self._bodies(messages)
        if len(self._lines) > 2 * len(messages) + 64:
            # Lines of messages a replace dropped: let them go once they outnumber the rest.
            current = {m.id for m in messages}
            self._lines = {k: v for k, v in self._lines.items() if k in current}
        tail = b',"replace_id":' + orjson.dumps(rid) + b"}\n"
        parts = [tail] * (2 * len(bodies) + 1)
        marker = entries.ReplaceEntry.new(reason, rid, len(messages)).raw
        if reason != "resync":
            marker.update(self._marker_fields)
        parts[0] = encode_entry(marker)
        parts[1::2] = bodies
        if bodies:
            parts[1] = bodies[0] + self._model_stamp()
        return b"".join(parts)  # one buffer: the snapshot is copied once

    def _resync_bytes(self) -> bytes:
        # An entry that cannot be encoded stays unencodable: EncodeError keeps the writer failed.
        current = self.conversation.messages() if self.conversation is not None else []
        return self._replace_bytes("resync", current)

    def _write(self, data: bytes, *, resync: bool = True) -> None:
        if self._fd is None:
            raise SessionWriteError(f"session {self.id} is closed; resume it to write again")
        try:
            if self.failed is not None:
                # Part of the failed write may have landed as a torn line: end it, then
                # bring the log back to the whole conversation.
                data = self._mending() + (self._resync_bytes() if resync else b"") + data
            written = os.write(self._fd, data)
            if written < len(data):  # a short write (a signal, a full disk): the rest, in order
                view = memoryview(data)[written:]
                while view:
                    view = view[os.write(self._fd, view) :]
            if self.fsync:
                os.fsync(self._fd)
            self._unsynced += len(data)
        except EncodeError as exc:  # the resync cannot be encoded: stay failed (see _unencodable)
            assert self.failed is not None
            raise self.failed from exc
        except OSError as exc:
            hint = "free some disk space" if exc.errno == errno.ENOSPC else "check the folder"
            self.failed = SessionWriteError(
                f"could not write session log {self.path}: {exc.strerror or exc}; {hint}. "
                "The conversation is kept in memory and the log is resynced on the next write."
            )
            raise self.failed from exc
        self.failed = None
        if self.meta_bytes and self._unsynced >= self.meta_bytes:
            self.sync_meta()

    def _mend_torn_tail(self) -> None:
        mending = self._mending()
        if mending:
            assert self._fd is not None  # called just after the log was opened
            os.write(self._fd, mending)
            if self.fsync:
                os.fsync(self._fd)

    def _mending(self) -> bytes:
        assert self._fd is not None
        return mend.mending(self._fd, self.path)

    def _acquire_lock(self) -> int:
        return locks.acquire(self.dir, self.id)

    def _release_lock(self) -> None:
        fd = getattr(self, "_lock_fd", None)
        if fd is not None:
            locks.release(fd)
            self._lock_fd = None
