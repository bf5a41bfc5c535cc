"""The search tools: ``list_files`` (glob) and ``grep`` (regular expression), read-only.

Both walk the workspace without descending into tool and VCS clutter (``SKIP_DIRS``) unless
the pattern or path names such a directory explicitly, and both cap their output so one call
cannot flood the context. Neither follows a symlink out of the workspace.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import Field

from ..errors import ToolError
from .files import is_binary
from .registry import Tool, ToolArgs
from .workspace import display_path, resolve_in_workspace

SKIP_DIRS = frozenset({".git", ".pseudoclaude", "__pycache__", ".ipynb_checkpoints", "node_modules"})
MAX_LISTED_FILES = 1000
MAX_GREP_MATCHES = 200
# A match in a minified file would otherwise put the whole file into one output line.
MAX_GREP_LINE_CHARS = 500

_WILDCARDS = frozenset("*?[")


def glob_to_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob over ``/``-separated relative paths.

    ``*`` and ``?`` stay within one path component, ``**/`` matches zero or more directories,
    ``[...]`` is a character class (``[!...]`` negated). Hidden files are matched like others.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append(f"[{body}]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def walk_files(top: Path) -> Iterator[Path]:
    """Files under ``top`` in a stable order, not descending into ``SKIP_DIRS`` below ``top``.

    ``top`` itself may be a skipped directory: naming it explicitly is how the model reads
    spilled results under ``.pseudoclaude``. Symlinked directories are not followed.
    """
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            yield Path(dirpath, name)


# --- list_files ------------------------------------------------------------------------


class ListFilesArgs(ToolArgs):
    pattern: str = Field(
        "**/*",
        description="Glob relative to the workspace, e.g. '**/*.py' (any depth) or 'src/*.txt'.",
    )


def _relative_pattern(workspace: Path, pattern: str) -> str:
    pattern = pattern.replace("\\", "/") if os.sep == "\\" else pattern
    for prefix in {str(Path(workspace).resolve()), str(workspace)}:
        if pattern.startswith(prefix.rstrip("/") + "/"):
            pattern = pattern[len(prefix.rstrip("/")) + 1 :]
            break
    while pattern.startswith("./"):
        pattern = pattern[2:]
    if pattern.endswith("/"):
        pattern += "**/*"
    return pattern or "**/*"


def list_files(workspace: Path, args: ListFilesArgs) -> str:
    root = Path(workspace).resolve()
    pattern = _relative_pattern(workspace, args.pattern)
    # Walk only below the pattern's literal directory prefix: faster, and it lets a pattern
    # such as ".pseudoclaude/**/*.txt" reach a directory the walk would otherwise skip.
    parts = pattern.split("/")
    literal: list[str] = []
    for part in parts[:-1]:
        if _WILDCARDS & set(part):
            break
        literal.append(part)
    start = "/".join(literal) or "."
    resolve_in_workspace(root, start)  # refuses "../*", "/etc/*" and symlink escapes
    top = root / start  # unresolved, so relative paths keep the names the pattern uses
    if not top.is_dir():
        return f"no files match {args.pattern!r}"
    regex = glob_to_regex(pattern)
    matches = sorted(rel for p in walk_files(top) if regex.match(rel := p.relative_to(root).as_posix()))
    if not matches:
        return f"no files match {args.pattern!r}"
    lines = matches[:MAX_LISTED_FILES]
    if len(matches) > MAX_LISTED_FILES:
        lines.append(
            f"… {len(matches) - MAX_LISTED_FILES} more files not shown ({len(matches)} in all); "
            "narrow the pattern"
        )
    return "\n".join(lines)


# --- grep ------------------------------------------------------------------------------


class GrepArgs(ToolArgs):
    pattern: str = Field(description="Python regular expression, searched in each line.")
    path: str = Field(".", description="File or directory to search, relative to the workspace.")
    glob: str | None = Field(
        None,
        description=(
            "Only search files matching this glob: '*.py' matches file names, "
            "'pkg/**/*.py' paths relative to `path`."
        ),
    )


def grep(workspace: Path, args: GrepArgs) -> str:
    root = Path(workspace).resolve()
    try:
        regex = re.compile(args.pattern)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {args.pattern!r}: {exc}") from None
    target = resolve_in_workspace(root, args.path)
    if not target.exists():
        raise ToolError(f"{args.path} does not exist (paths are relative to the workspace)")
    if target.is_file():
        if is_binary(target):
            raise ToolError(f"{args.path} looks binary (NUL byte in its first 8 KB); not searched")
        files: Iterator[Path] = iter([target])
    else:
        files = _searchable_files(root, target, args.glob)
    out: list[str] = []
    for file in files:
        rel = display_path(root, file)
        try:
            with file.open(encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, start=1):
                    line = line.rstrip("\r\n")
                    if not regex.search(line):
                        continue
                    if len(out) == MAX_GREP_MATCHES:
                        out.append(
                            f"… stopped after {MAX_GREP_MATCHES} matches; narrow the pattern, "
                            "path or glob to see the rest"
                        )
                        return "\n".join(out)
                    if len(line) > MAX_GREP_LINE_CHARS:
                        line = line[:MAX_GREP_LINE_CHARS] + "…"
                    out.append(f"{rel}:{lineno}:{line}")
        except OSError:
            continue  # unreadable (permissions, vanished): searching the rest is more useful
    return "\n".join(out) if out else "no matches"


def _searchable_files(root: Path, top: Path, glob: str | None) -> Iterator[Path]:
    # A glob without "/" filters file names; with "/" it filters paths relative to `top`.
    regex = glob_to_regex(glob) if glob else None
    by_path = glob is not None and "/" in glob
    for path in walk_files(top):
        if regex is not None:
            subject = path.relative_to(top).as_posix() if by_path else path.name
            if not regex.match(subject):
                continue
        try:
            if path.is_symlink() and not path.resolve().is_relative_to(root):
                continue  # a symlink out of the workspace: its contents are not ours to show
            if not path.is_file() or is_binary(path):
                continue  # directories behind symlinks, FIFOs, sockets, binaries
        except (OSError, RuntimeError):
            continue  # vanished, unreadable, or a symlink loop
        yield path


def search_tools(workspace: Path) -> list[Tool]:
    return [
        Tool(
            name="list_files",
            description=(
                "List files (not directories) in the workspace whose path matches a glob, "
                "sorted. '*' stays within one directory, '**/' spans any depth: '**/*.py' finds "
                "Python files everywhere, '*.py' only at the top. Skips "
                f"{', '.join(sorted(SKIP_DIRS))} unless the pattern starts inside one. "
                f"At most {MAX_LISTED_FILES} paths."
            ),
            args=ListFilesArgs,
            handler=lambda a: list_files(workspace, a),
        ),
        Tool(
            name="grep",
            description=(
                "Search text files for a Python regular expression, line by line. `path` is a "
                "file or directory (default: the whole workspace); `glob` filters files. "
                "Output lines are path:line_number:line. Binary files and "
                f"{', '.join(sorted(SKIP_DIRS))} are skipped unless `path` points inside one. "
                f"Stops after {MAX_GREP_MATCHES} matches."
            ),
            args=GrepArgs,
            handler=lambda a: grep(workspace, a),
        ),
    ]
