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
"""

from __future__ import annotations

import errno
import fcntl
import os
import threading
from pathlib import Path
from typing import Any

from ..conversation import Conversation, Hooks
from ..errors import SessionLockedError, SessionWriteError
from ..messages import Message, Usage, new_id
from ..redact import Redactor
from . import entries
from .paths import LOCK_NAME, LOG_NAME


class SessionWriter:
    def __init__(
        self, session_dir: Path, *, model: str | None = None, fsync: bool = True, redact: bool = True
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
        self._lock = threading.Lock()
        self._hooks = Hooks(on_append=self.append_message, on_replace=self.replace)
        self._fd: int | None = None
        self._lock_fd: int | None = self._acquire_lock()
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            self._mend_torn_tail()
        except OSError as exc:
            self._release_lock()
            raise SessionWriteError(f"cannot open session log {self.path}: {exc}") from exc

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
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
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
            self._write(b"" if self.failed else self._encode(self._message_entry(message)))

    def replace(self, reason: str, messages: list[Message]) -> None:
        with self._lock:
            self._write(self._replace_bytes(reason, messages), resync=False)

    # --- other entries ---------------------------------------------------------------------

    def log_usage(self, usage: Usage, *, messages: int, model: str | None) -> None:
        self.log(entries.usage_entry(usage, messages=messages, model=model))

    def log_note(self, text: str, level: str = "info") -> None:
        self.log(entries.note_entry(text, level))

    def log(self, entry: dict[str, Any]) -> None:
        with self._lock:
            self._write(self._encode(entry))

    # --- internals -------------------------------------------------------------------------

    def _encode(self, entry: dict[str, Any]) -> bytes:
        """One line, redacted.

        Encoding first makes the pre-check one scan of the bytes; only a line that may hold
        a secret is walked and encoded again.
        """
        line = entries.encode(entry)
        if self.redactor is not None and self.redactor.may_contain(line):
            line = entries.encode(self.redactor.value(entry))
        return line

    def _message_entry(self, message: Message, replace_id: str | None = None) -> dict[str, Any]:
        model = None
        if not self._stamped and self.model:
            model, self._stamped = self.model, True
        return entries.message_entry(message, replace_id=replace_id, model=model)

    def _replace_bytes(self, reason: str, messages: list[Message]) -> bytes:
        rid = new_id()
        batch = [entries.replace_entry(reason, rid, len(messages))]
        batch.extend(self._message_entry(m, rid) for m in messages)
        data = b"".join(entries.encode(e) for e in batch)
        # One pre-check over the whole snapshot, so a clean 1,000-message replace costs
        # what one append of the same bytes costs; entries are redacted one by one only if
        # it finds something.
        if self.redactor is not None and self.redactor.may_contain(data):
            data = b"".join(self._encode(e) for e in batch)
        return data

    def _resync_bytes(self) -> bytes:
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
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            if self.fsync:
                os.fsync(self._fd)
        except OSError as exc:
            hint = "free some disk space" if exc.errno == errno.ENOSPC else "check the folder"
            self.failed = SessionWriteError(
                f"could not write session log {self.path}: {exc.strerror or exc}; {hint}. "
                "The conversation is kept in memory and the log is resynced on the next write."
            )
            raise self.failed from exc
        self.failed = None

    def _mend_torn_tail(self) -> None:
        mending = self._mending()
        if mending:
            os.write(self._fd, mending)
            if self.fsync:
                os.fsync(self._fd)

    def _mending(self) -> bytes:
        """What ends a torn last line: ``\n`` plus a note saying the line was torn.

        The note lets the loader count the line as a crash's torn tail, not corruption.
        """
        with open(self.path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return b""
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return b""
        note = entries.note_entry("a line torn by a crash or failed write precedes this note", "warning")
        note["kind"] = entries.TORN_NOTE
        return b"\n" + entries.encode(note)

    def _acquire_lock(self) -> int:
        path = self.dir / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise SessionLockedError(self.id, pid) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        return fd

    def _release_lock(self) -> None:
        fd = getattr(self, "_lock_fd", None)
        if fd is not None:
            # Unlocking before close; the file stays (removing it would race a new locker).
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            self._lock_fd = None


def _read_pid(fd: int) -> int | None:
    try:
        raw = os.pread(fd, 32, 0).decode().strip()
        return int(raw) if raw else None
    except (OSError, ValueError):
        return None


def is_locked(session_dir: Path) -> bool:
    """True when some process holds the session's writer lock (used by the catalog)."""
    path = Path(session_dir) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)
