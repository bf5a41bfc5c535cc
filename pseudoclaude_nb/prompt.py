"""The system prompt: fixed instructions, the workspace, ``PSEUDOCLAUDE.md``, the user's pins
and the memory index.

Built from named sections so ``%context`` can show what each costs. The pins come after
the fixed sections (they change more often); the memory index (and never a note's body) is
the last section, present only when memory is on for the run.
"""

from __future__ import annotations

import os
from pathlib import Path

from .errors import PseudoClaudeError
from .tools.workspace import open_resolved, resolve_in_workspace

BASE = """You are PseudoClaude, a coding agent working inside a Jupyter notebook.
You act through tools in the workspace folder `{workspace}` (where your commands run); paths
are relative to it and cannot leave it. Read before you edit, keep changes small, run the tests you touch, and
say plainly what you changed and what you could not verify. Tool results may be shortened
or moved to files; when a result says so, read the file it names with offsets or grep it."""

PROJECT_FILE = "PSEUDOCLAUDE.md"
# Project instructions are the user's, but a runaway file must not eat the window.
PROJECT_FILE_CAP = 25_000
MEMORY_SECTION = "memory index"
PINS_SECTION = "pins"  # ``%context`` shows this section as its own part

PINS_HEAD = """## Pinned by the user (kept verbatim)
The user pinned these. They are in every request, unchanged, through every compaction and
context rollover, so a summary or a handoff need not repeat them. Follow them unless the
user says otherwise."""


def read_project_file(workspace: Path) -> tuple[str | None, str | None]:
    """(the head of ``PSEUDOCLAUDE.md``, why it was not read): (None, None) when there is none.

    The file comes with the workspace (a clone), so it is read as the file tools read: through
    the workspace boundary, from an fd of the workspace without following a link out of it,
    a regular file with one name only. A ``PSEUDOCLAUDE.md`` that links to ``~/.ssh/id_rsa``
    would otherwise put that file in every request, sent to whatever host the workspace's
    ``.env`` names. At most ``PROJECT_FILE_CAP`` bytes are read, whatever its size.
    """
    root = Path(workspace)
    if not os.path.lexists(root / PROJECT_FILE):
        return None, None
    try:
        fd = open_resolved(root, resolve_in_workspace(root, PROJECT_FILE))
    except (PseudoClaudeError, OSError) as exc:
        return None, f"{PROJECT_FILE} was not read into the prompt: {_why(exc)}"
    try:
        chunks, left = [], PROJECT_FILE_CAP
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 16))):
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        return None, f"{PROJECT_FILE} was not read into the prompt: {_why(exc)}"
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="ignore"), None


def _why(exc: BaseException) -> str:
    text = str(exc).removeprefix("refused: ")
    if "outside the workspace" in text:
        return (
            f"{text.split('; use a path')[0]} (project instructions must be a file of the workspace itself)"
        )
    return text


def system_sections(workspace: Path) -> list[tuple[str, str]]:
    """(title, text) pairs, in prompt order."""
    return project_sections(workspace, read_project_file(Path(workspace))[0])


def project_sections(workspace: Path, project: str | None) -> list[tuple[str, str]]:
    """``system_sections`` with ``PSEUDOCLAUDE.md``'s head as ``read_project_file`` gave it (a
    run's plan reads it once, for the prompt and for the warning when it was not read)."""
    # The folder's name, not its path: the prompt (and every token count) is the same wherever
    # the folder lives, and a home folder's path, often the person's name, is not sent.
    sections = [("instructions", BASE.format(workspace=Path(workspace).name or workspace))]
    if project is not None:
        sections.append((PROJECT_FILE, f"## Project instructions ({PROJECT_FILE})\n{project.strip()}"))
    return sections


def pins_section(texts: list[str]) -> str:
    """The pins as one section, each numbered as ``%context pins`` numbers it."""
    return "\n\n".join([PINS_HEAD, *(f"[{n}] {text}" for n, text in enumerate(texts, 1))])


def with_pins(sections: list[tuple[str, str]], texts: list[str]) -> list[tuple[str, str]]:
    """``sections`` plus the pins' section, when there are pins."""
    return [*sections, (PINS_SECTION, pins_section(texts))] if texts else list(sections)


def with_memory(sections: list[tuple[str, str]], memory_index: str | None) -> list[tuple[str, str]]:
    """``sections`` plus the memory index last (it changes more often than the rest: caching)."""
    return [*sections, (MEMORY_SECTION, memory_index)] if memory_index else list(sections)


def without_memory(sections: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [s for s in sections if s[0] != MEMORY_SECTION]


def join_sections(sections: list[tuple[str, str]]) -> str:
    return "\n\n".join(text for _, text in sections)


def build_system_prompt(workspace: Path) -> str:
    return join_sections(system_sections(workspace))
