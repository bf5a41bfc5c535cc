"""The file tools: ``read_file``, ``write_file`` and ``edit_file``, bounded to the workspace.

Handlers raise ``ToolError`` with a message the model can act on (wrong offset, ambiguous
edit); the registry turns it into an error result. Searching files lives in ``search.py``.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

from pydantic import Field

from ..errors import ToolError
from ..notebook.ipynb import read_notebook
from ..redact import redact_text
from .registry import Tool, ToolArgs
from .workspace import display_path, open_resolved, resolve_in_workspace

# Like git and grep: a NUL byte in the first 8 KB means "binary".
BINARY_SNIFF_BYTES = 8192
# A single minified line could otherwise make one read as large as the file, which would be
# spilled, and the preview's advice (read with offset/limit) would loop back to it.
MAX_LINE_CHARS = 2000


def is_binary(path: Path) -> bool:
    with path.open("rb") as f:
        return b"\0" in f.read(BINARY_SNIFF_BYTES)


def _existing_file(workspace: Path, path: str) -> Path:
    resolved = resolve_in_workspace(workspace, path)
    if not resolved.exists():
        raise ToolError(f"{path} does not exist (paths are relative to the workspace); try list_files")
    if resolved.is_dir():
        raise ToolError(f"{path} is a directory, not a file; use list_files to see its files")
    if not resolved.is_file():
        # A FIFO or device would block or never end; neither is something to read here.
        raise ToolError(f"{path} is not a regular file")
    return resolved


# --- read_file -------------------------------------------------------------------------


class ReadFileArgs(ToolArgs):
    path: str = Field(description="File path, relative to the workspace (or absolute inside it).")
    offset: int = Field(1, ge=1, description="1-based line number of the first line to return.")
    limit: int = Field(2000, ge=1, description="Maximum number of lines to return.")


def read_file(workspace: Path, args: ReadFileArgs) -> str:
    resolved = _existing_file(workspace, args.path)
    fd = open_resolved(workspace, resolved)  # no check-then-open race; hard links refused
    raw = os.fdopen(fd, "rb")
    if b"\0" in raw.read(BINARY_SNIFF_BYTES):
        raw.close()
        raise ToolError(
            f"{args.path} looks binary (NUL byte in its first 8 KB); inspect it with bash (file, xxd)"
        )
    if resolved.suffix.lower() == ".ipynb":
        view = read_notebook(raw, args.offset, args.limit, args.path)  # issue-13; from the fd
        if view is not None:
            raw.close()
            return view
    raw.seek(0)
    shown: list[str] = []
    total = 0
    last = args.offset + args.limit - 1
    with io.TextIOWrapper(raw, encoding="utf-8", errors="replace") as f:
        for total, line in enumerate(f, start=1):
            if args.offset <= total <= last:
                line = line.rstrip("\r\n")
                if len(line) > MAX_LINE_CHARS:  # redacted before the cut: no half key left
                    line = redact_text(line)
                if len(line) > MAX_LINE_CHARS:
                    extra = len(line) - MAX_LINE_CHARS
                    line = line[:MAX_LINE_CHARS] + f"… [{extra} more characters on this line]"
                shown.append(f"{total:>6}\t{line}")
    if total == 0:
        return f"({args.path} is empty)"
    if args.offset > total:
        raise ToolError(f"offset={args.offset} is past the end of {args.path}, which has {total} lines")
    remaining = total - last
    if remaining > 0:
        shown.append(f"… {remaining} more lines; use offset={last + 1}")
    return "\n".join(shown)


# --- write_file ------------------------------------------------------------------------


class WriteFileArgs(ToolArgs):
    path: str = Field(description="File path, relative to the workspace.")
    content: str = Field(description="The complete new content of the file.")


def write_file(workspace: Path, args: WriteFileArgs) -> str:
    resolved = resolve_in_workspace(workspace, args.path, write=True)
    if resolved.is_dir():
        raise ToolError(f"{args.path} is a directory; give a file path")
    data = args.content.encode("utf-8")
    _write(workspace, resolved, data, make_parents=True)
    return f"wrote {len(data)} bytes to {display_path(workspace, resolved)}"


def _write(workspace: Path, resolved: Path, data: bytes, *, make_parents: bool = False) -> None:
    """Replace the file's content through an fd opened without a race (O_TRUNC only after the checks)."""
    fd = open_resolved(workspace, resolved, os.O_WRONLY | os.O_CREAT, 0o666, make_parents=make_parents)
    with os.fdopen(fd, "wb") as f:
        f.truncate(0)
        f.write(data)


# --- edit_file -------------------------------------------------------------------------


class EditFileArgs(ToolArgs):
    path: str = Field(description="File path, relative to the workspace.")
    old_string: str = Field(description="Exact text to replace, including whitespace and indentation.")
    new_string: str = Field(description="Text to put in its place.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of exactly one.")


def edit_file(workspace: Path, args: EditFileArgs) -> str:
    resolved = resolve_in_workspace(workspace, args.path, write=True)
    if not resolved.exists():
        raise ToolError(f"{args.path} does not exist; create it with write_file")
    if resolved.is_dir():
        raise ToolError(f"{args.path} is a directory, not a file")
    if not args.old_string:
        raise ToolError("old_string is empty; to create or overwrite a file use write_file")
    if args.old_string == args.new_string:
        raise ToolError("old_string and new_string are the same; nothing to change")
    try:
        # newline="": keep the file's own line endings byte for byte.
        with io.open(open_resolved(workspace, resolved), encoding="utf-8", newline="") as f:  # noqa: UP020
            text = f.read()
    except UnicodeDecodeError:
        raise ToolError(f"{args.path} is not UTF-8 text; edit it with bash instead") from None
    old, new = args.old_string, args.new_string
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        # Models write "\n"; a CRLF file would otherwise never match a multi-line edit.
        old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old_string not found in {args.path}; read the file again and copy the exact text, "
            "including whitespace"
        )
    if count > 1 and not args.replace_all:
        raise ToolError(
            f"old_string matched {count} times in {args.path}; pass more surrounding context "
            "to make it unique, or replace_all=true"
        )
    updated = text.replace(old, new) if args.replace_all else text.replace(old, new, 1)
    _write(workspace, resolved, updated.encode("utf-8"))
    noun = "occurrence" if count == 1 else "occurrences"
    return f"edited {display_path(workspace, resolved)}: replaced {count} {noun}"


def file_tools(workspace: Path) -> list[Tool]:
    return [
        Tool(
            name="read_file",
            description=(
                "Read a text file in the workspace. Returns lines numbered like `cat -n` "
                "(number, tab, line). Reads at most `limit` lines (default 2000) from 1-based "
                "line `offset`; when more remain, the last line says which offset to use next. "
                f"Lines longer than {MAX_LINE_CHARS} characters are cut. Binary files are refused."
            ),
            args=ReadFileArgs,
            handler=lambda a: read_file(workspace, a),
        ),
        Tool(
            name="write_file",
            description=(
                "Create or overwrite a file in the workspace with `content` (UTF-8); parent "
                "directories are created. Prefer edit_file to change part of an existing file."
            ),
            args=WriteFileArgs,
            handler=lambda a: write_file(workspace, a),
            side_effect=True,
        ),
        Tool(
            name="edit_file",
            description=(
                "Replace `old_string` with `new_string` in a file. The match is exact "
                "(whitespace included) and must be unique unless `replace_all` is true; "
                "otherwise the edit fails and says why. Read the file first to copy the text."
            ),
            args=EditFileArgs,
            handler=lambda a: edit_file(workspace, a),
            side_effect=True,
        ),
    ]
