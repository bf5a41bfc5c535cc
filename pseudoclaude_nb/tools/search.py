"""The search tools: ``list_files`` (glob) and ``grep`` (regular expression), read-only.

Both walk the workspace without descending into tool and VCS clutter (``SKIP_DIRS``) unless
the pattern or path names such a directory explicitly, and both cap their output so one call
cannot flood the context. Neither follows a symlink out of the workspace. A file name that
is not UTF-8 is shown with ``\\xNN`` escapes and a note; the file tools accept it so written.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from ..errors import ToolError
from ..redact import redacted_head
from ..textsafe import escape_surrogates
from .files import is_binary
from .registry import ESCAPE_NOTE, Tool, ToolArgs
from .workspace import display_path, escaped_name, open_text, resolve_in_workspace

if TYPE_CHECKING:
    import regex as bounded_re

SKIP_DIRS = frozenset({".git", ".pseudoclaude", "__pycache__", ".ipynb_checkpoints", "node_modules"})
MAX_LISTED_FILES = 1000
MAX_GREP_MATCHES = 200
# A match in a minified file would otherwise put the whole file into one output line.
MAX_GREP_LINE_CHARS = 500

_WILDCARDS = frozenset("*?[")
# A catastrophic pattern ("(a+)+$" on a long line of a's) would run for hours: grep and
# list_files match with the ``regex`` module, whose matching stops after a timeout, and stop
# at this total budget per call. The walk itself is bounded too.
SEARCH_SECONDS = 2.0
MAX_WALKED_FILES = 200_000
MAX_GLOB_CHARS = 1_000
MAX_GREP_FILE_CHARS = 64 << 20  # a file is searched in one piece, up to this much
# Patterns whose meaning depends on the string being one line: matched line by line.
_LINE_ANCHORS = re.compile(r"\\[AZzG]")


class _Budget:
    """The time a search may still take; ``left()`` raises ``ToolError`` once it is spent."""

    def __init__(self, what: str, seconds: float | None = None) -> None:
        self.what = what
        self.deadline = time.monotonic() + (SEARCH_SECONDS if seconds is None else seconds)

    def left(self) -> float:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise self.error()
        return remaining

    def error(self) -> ToolError:
        return ToolError(
            f"{self.what} took too long (over {SEARCH_SECONDS:g} s) and was stopped: the pattern may "
            "backtrack catastrophically (nested repeats like '(a+)+'), or the search is too wide. "
            "Simplify the pattern or narrow the path"
        )


def glob_to_regex(pattern: str) -> bounded_re.Pattern[str]:
    """Compile a glob over ``/``-separated relative paths.

    ``*`` and ``?`` stay within one path component, ``**/`` matches zero or more directories,
    ``[...]`` is a character class (``[!...]`` negated). Hidden files are matched like others.
    """
    import regex as bounded_re  # the timeout-capable regex module: when a tool runs, not at import

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
    return bounded_re.compile("".join(out) + r"\Z", bounded_re.DOTALL)


def walk_files(top: Path) -> Iterator[Path]:
    """Files under ``top`` in a stable order, not descending into ``SKIP_DIRS`` below ``top``.

    ``top`` itself may be a skipped directory: naming it explicitly is how the model reads
    spilled results under ``.pseudoclaude``. Symlinked directories are not followed.
    """
    walked = 0
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            walked += 1
            if walked > MAX_WALKED_FILES:
                raise ToolError(
                    f"more than {MAX_WALKED_FILES:,} files under {top.name or '.'}; narrow the path or pattern"
                )
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
    # Unresolved, so relative paths keep the names the pattern uses; a folder named as shown
    # (``d\\xff/``) is the folder with that byte.
    top = escaped_name(root / start)
    if not top.is_dir():
        return f"no files match {args.pattern!r}"
    if len(pattern) > MAX_GLOB_CHARS:
        raise ToolError(f"the pattern is longer than {MAX_GLOB_CHARS} characters; shorten it")
    regex = glob_to_regex(pattern)
    budget = _Budget("list_files")
    escaped: set[str] = set()
    # Matched as shown, so a pattern copied from a listing (caf\\xe9*) finds the name again.
    shown = (_shown_name(p.relative_to(root).as_posix(), escaped) for p in walk_files(top))
    matches = sorted(name for name in shown if _glob_match(regex, name, budget))
    if not matches:
        return f"no files match {args.pattern!r}"
    escaped &= set(matches[:MAX_LISTED_FILES])  # counted when shown
    lines = matches[:MAX_LISTED_FILES]
    if len(matches) > MAX_LISTED_FILES:
        lines.append(
            f"… {len(matches) - MAX_LISTED_FILES} more files not shown ({len(matches)} in all); "
            "narrow the pattern"
        )
    return "\n".join(lines + _escape_note(escaped))


def _shown_name(name: str, escaped: set[str]) -> str:
    """A path as the model sees it: an undecodable byte (``os`` gives ``\\udcNN``) as ``\\xNN``,
    the form ``resolve_in_workspace`` accepts back. ``escaped`` collects the names changed."""
    shown, changed = escape_surrogates(name)
    if changed:
        escaped.add(shown)
    return shown


def _escape_note(escaped: set[str]) -> list[str]:
    if not escaped:
        return []
    what = "1 name was" if len(escaped) == 1 else f"{len(escaped)} names were"
    return [ESCAPE_NOTE.format(what=what)]


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


def _glob_match(regex: bounded_re.Pattern[str], subject: str, budget: _Budget) -> bool:
    try:
        return regex.match(subject, timeout=budget.left()) is not None
    except TimeoutError:
        raise budget.error() from None


def grep(workspace: Path, args: GrepArgs) -> str:
    import regex as bounded_re  # the timeout-capable regex module: when a tool runs, not at import

    root = Path(workspace).resolve()
    try:
        regex = bounded_re.compile(args.pattern)
        bounded_re.compile(args.pattern, bounded_re.MULTILINE)
    except (bounded_re.error, ValueError, OverflowError) as exc:
        raise ToolError(f"invalid regular expression {args.pattern!r}: {exc}") from None
    budget = _Budget("grep")
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
    cut: list[str] = []
    escaped: set[str] = set()
    by_line = _LINE_ANCHORS.search(args.pattern) is not None
    whole = bounded_re.compile(args.pattern, bounded_re.MULTILINE)
    for file in files:
        rel, odd = escape_surrogates(display_path(root, file))  # counted once shown
        try:
            with open_text(root, file) as f:
                text = f.read(MAX_GREP_FILE_CHARS)
                if f.read(1):
                    cut.append(rel)
                    if odd:
                        escaped.add(rel)
        except (OSError, ToolError):
            continue  # unreadable, vanished, hard-linked or swapped for a link: search the rest
        for lineno, line in _matching_lines(text, regex, whole, by_line, budget):
            if len(out) == MAX_GREP_MATCHES:
                out.append(
                    f"… stopped after {MAX_GREP_MATCHES} matches; narrow the pattern, "
                    "path or glob to see the rest"
                )
                return "\n".join(out + _escape_note(escaped))
            if len(line) > MAX_GREP_LINE_CHARS:
                line = redacted_head(line, MAX_GREP_LINE_CHARS) + "…"  # redacted before the cut
            out.append(f"{rel}:{lineno}:{line}")
            if odd:
                escaped.add(rel)
    if cut:
        out.append(
            f"(only the first {MAX_GREP_FILE_CHARS:,} characters of {', '.join(cut[:5])} were searched)"
        )
    return "\n".join(out + _escape_note(escaped)) if out else "no matches"


def _matching_lines(
    text: str,
    regex: bounded_re.Pattern[str],
    whole: bounded_re.Pattern[str],
    by_line: bool,
    budget: _Budget,
) -> Iterator[tuple[int, str]]:
    """(1-based number, line) of each line of ``text`` that ``regex`` finds something in.

    The file is scanned once (``whole``, multi-line) for candidates, in C; only the lines a
    candidate match touches are then searched one by one, so the result is that of a
    line-by-line search. Patterns with ``\\A``/``\\Z`` are searched line by line outright.
    """
    text = text.replace("\r\n", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    try:
        if by_line:
            for i, line in enumerate(lines):
                if regex.search(line, timeout=budget.left()):
                    yield i + 1, line
            return
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line) + 1)
        done = -1  # lines up to this index were searched already
        pos = 0
        while pos <= len(text):
            m = whole.search(text, pos, timeout=budget.left())
            if m is None:
                return
            first = _line_of(starts, m.start())
            last = _line_of(starts, max(m.start(), m.end() - 1)) if m.end() > m.start() else first
            for i in range(max(first, done + 1), min(last, len(lines) - 1) + 1):
                if regex.search(lines[i], timeout=budget.left()):
                    yield i + 1, lines[i]
            done = max(done, last)
            pos = max(m.end(), m.start() + 1)
    except TimeoutError:
        raise budget.error() from None


def _line_of(starts: list[int], offset: int) -> int:
    import bisect

    return bisect.bisect_right(starts, offset) - 1


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
