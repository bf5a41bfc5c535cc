"""The searchable pieces of a log line or spilled file, derived the same way when indexing and reading.

The index keeps only where a piece is: a message's log line (offset, length) and which part
of it (its text, its k-th tool call, its tool result), or a byte range of a spilled file.
``message_parts`` and ``spill_chunks`` say what the pieces are; ``RowReader`` reads a
piece's text back from the files by those offsets (for a query's check and its snippet, and
to delete a row's tokens from the contentless table).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .. import safeio
from ..provider_blocks import readable_text
from ..session.entries import MessageEntry, SpillEntry, parse_line
from ..workspace import LOG_NAME, SPILL_DIR
from .schema import KIND

CHUNK_LINES = 200  # spilled files are indexed in chunks, so a hit can name its line
CHUNK_BYTES = 16_000
SPILL_INDEX_BYTES = 8_000_000  # beyond this, a spilled file's tail is not indexed
SEARCH_TOOL = "search_history"  # rows of earlier searches never answer a new one


@dataclass(frozen=True, slots=True)
class Part:
    kind: int
    part: int
    text: str
    call_id: str | None = None
    tool: str | None = None


def message_data(entry: MessageEntry) -> dict[str, Any]:
    # A plainly valid entry has every field of its type as it stands; one that needed the
    # lenient reading is indexed as the loader reads it.
    return entry.raw if entry.parsed is None else entry.parsed.to_dict()


def message_parts(data: dict[str, Any]) -> list[Part]:
    """The searchable parts of one message: its text, each tool call, its tool result."""
    out: list[Part] = []
    content = data.get("content")
    if isinstance(content, str) and content.strip():
        out.append(Part(KIND["text"], 0, content))
    for k, call in enumerate(data.get("tool_calls") or ()):
        if isinstance(call, dict):
            name = call.get("name")
            out.append(
                Part(
                    KIND["tool_call"],
                    k,
                    f"{name} {_dumps(call.get('arguments') or {})}",
                    call.get("id"),
                    name,
                )
            )
    result = data.get("tool_result")
    if isinstance(result, dict) and isinstance(result.get("content"), str):
        out.append(Part(KIND["tool_result"], 0, result["content"], result.get("call_id")))
    for k, r in enumerate(data.get("reasoning") or ()):
        # issue 41: a provider's compaction (--strategy api) is searchable by its readable summary
        if isinstance(r, dict) and r.get("kind") == "compaction":
            summary = readable_text(r.get("data") if isinstance(r.get("data"), str) else None)
            if summary is not None:
                out.append(Part(KIND["text"], 1 + k, summary))
    return out


def spill_chunks(data: bytes) -> Iterator[tuple[int, int, int]]:
    """(first line number, byte offset, byte length) pieces of at most CHUNK_LINES lines or about CHUNK_BYTES."""
    start_line, start, lines, pos = 1, 0, 0, 0
    n = len(data)
    while pos < n:
        end = data.find(b"\n", pos)
        end = n if end < 0 else end + 1
        lines += 1
        pos = end
        if lines >= CHUNK_LINES or pos - start >= CHUNK_BYTES:
            yield start_line, start, pos - start
            start_line, start, lines = start_line + lines, pos, 0
    if pos > start:
        yield start_line, start, pos - start


def spill_path(session_dir: Path, rel: str | None) -> Path | None:
    """The spilled file a spill entry names, if it is one of the session's own (never elsewhere)."""
    if rel is None:
        return None
    parts = Path(rel).parts
    if len(parts) != 2 or parts[0] != SPILL_DIR or parts[1].startswith("."):
        return None
    return session_dir / rel


def read_spill(path: Path) -> bytes | None:
    try:
        with os.fdopen(safeio.open_file(path), "rb") as f:
            return f.read(SPILL_INDEX_BYTES)
    except OSError:
        return None


def decode_chunk(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


@dataclass
class RowText:
    text: str
    session_id: str
    message_uuid: str
    role: str
    kind: str
    ts: float
    call_id: str | None
    ref: str | None
    line: int | None


class Folders:
    """Session directories by the index's session number, made when first asked for."""

    def __init__(self, root: Path, names: dict[int, str]) -> None:
        self.root, self.names = root, names
        self._made: dict[int, Path] = {}

    def get(self, sid: int) -> Path | None:
        folder = self._made.get(sid)
        if folder is None:
            name = self.names.get(sid)
            if not isinstance(name, str) or not name or "/" in name or "\x00" in name or name.startswith("."):
                return None  # a name from the file, not a session folder's: never a path to read
            folder = self._made[sid] = self.root / name
        return folder


class RowReader:
    """Reads rows' text back from the logs and spilled files (descriptors kept open while in use)."""

    def __init__(self, folders: Folders | dict[int, Path]) -> None:
        self.folders = folders  # sid -> session directory
        self._fds: dict[Path, int] = {}
        self._dirs: dict[Path, int] = {}  # folders opened on the way, to open the next file beside them
        self._lines: dict[tuple[int, int], Any] = {}

    def close(self) -> None:
        for fd in (*self._fds.values(), *self._dirs.values()):
            os.close(fd)
        self._fds.clear()
        self._dirs.clear()
        self._lines.clear()

    def _open(self, path: Path) -> int:
        """``safeio.open_file(path)``, its grandparent opened once: a search's candidates are
        spread over many sessions, and walking the whole path again for each cost more than
        reading its rows."""
        parent = path.parent
        dfd = self._dirs.get(parent)
        if dfd is None:
            top = self._dirs.get(parent.parent)
            if top is None:
                top = self._dirs[parent.parent] = safeio.open_dir(parent.parent)
            dfd = self._dirs[parent] = safeio.open_subdir(top, parent.name, shown=parent)
        return safeio.open_at(dfd, path.name, os.O_RDONLY, shown=path)

    def __enter__(self) -> RowReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _pread(self, path: Path, off: int, length: int) -> bytes | None:
        fd = self._fds.get(path)
        try:
            if fd is None:
                fd = self._fds[path] = self._open(path)
            return os.pread(fd, length, off)
        except OSError:
            return None

    def entry(self, sid: int, off: int, length: int) -> Any:
        """The parsed entry of the log line at ``off`` (None: unreadable)."""
        key = (sid, off)
        if key not in self._lines:
            folder = self.folders.get(sid)
            raw = None if folder is None else self._pread(folder / LOG_NAME, off, length)
            self._lines[key] = None if not raw else parse_line(raw)
            if len(self._lines) > 256:
                self._lines.pop(next(iter(self._lines)))
        return self._lines[key]

    def text(self, row: tuple[Any, ...]) -> str | None:
        """The text of a row ``(id, sid, kind, part, off, len, line, src, slen)``; None if unreadable."""
        _, sid, kind, part, off, length, _line, src, slen = row
        if kind == KIND["spill"]:
            spill = self.entry(sid, src, slen)
            folder = self.folders.get(sid)
            if not isinstance(spill, SpillEntry) or folder is None:
                return None
            path = spill_path(folder, spill.path)
            data = None if path is None else self._pread(path, off, length)
            return None if data is None else decode_chunk(data)
        entry = self.entry(sid, off, length)
        if not isinstance(entry, MessageEntry):
            return None
        for p in message_parts(message_data(entry)):
            if p.kind == kind and p.part == part:
                return p.text
        return None

    def describe(self, row: tuple[Any, ...], session_id: str, text: str) -> RowText:
        """Everything a hit says about a row whose text was read."""
        _, sid, kind, part, off, length, line, src, slen = row
        if kind == KIND["spill"]:
            spill = self.entry(sid, src, slen)
            ts = spill.raw.get("ts") if isinstance(spill, SpillEntry) else 0.0
            call_id = spill.call_id if isinstance(spill, SpillEntry) else None
            rel = spill.path if isinstance(spill, SpillEntry) else None
            owner = self._owner(sid, src + slen, call_id)
            return RowText(
                text,
                session_id,
                owner,
                "user",
                "spill",
                ts if isinstance(ts, (int, float)) else 0.0,
                call_id,
                f".pseudoclaude/sessions/{session_id}/{rel}",
                line,
            )
        entry = self.entry(sid, off, length)
        data = message_data(entry)
        ts = data.get("ts")
        call_id = None
        for p in message_parts(data):
            if p.kind == kind and p.part == part:
                call_id = p.call_id
        return RowText(
            text,
            session_id,
            data.get("id") or "",
            data.get("role") or "",
            ("text", "tool_call", "tool_result", "spill")[kind],
            ts if isinstance(ts, (int, float)) else 0.0,
            call_id,
            None,
            None,
        )

    def _owner(self, sid: int, start: int, call_id: str | None) -> str:
        """The id of the message that carries a spill's preview: the tool result logged after it."""
        folder = self.folders.get(sid)
        if folder is None or call_id is None:
            return ""
        pos = start
        for _ in range(64):
            data = self._pread(folder / LOG_NAME, pos, 1 << 16)
            if not data:
                return ""
            for raw in data.split(b"\n")[:-1]:
                pos += len(raw) + 1
                entry = parse_line(raw)
                if isinstance(entry, MessageEntry):
                    result = entry.raw.get("tool_result")
                    if isinstance(result, dict) and result.get("call_id") == call_id:
                        return entry.id
            if b"\n" not in data:
                return ""
        return ""


def _dumps(value: Any) -> str:
    """Tool-call arguments as text; nested past orjson's limit they still index (or are skipped)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        import json

        try:
            return json.dumps(value, ensure_ascii=False)
        except (RecursionError, ValueError, TypeError):
            return ""
