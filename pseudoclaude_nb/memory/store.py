"""One memory store: a folder of topic files, each a front-matter header and a Markdown body.

It owns the topic files of one level (project: ``<workspace>/.pseudoclaude/memory/``; user:
``$PSEUDOCLAUDE_HOME/memory/``) and nothing else: ``MEMORY.md`` is derived from the topics by
``index``, operations are validated by ``manager``. Every write is atomic (temporary file,
fsync, ``os.replace``) and redacted; the user store is private (folder 0700, files 0600)
because it follows the person across projects.

A topic file::

    ---
    name: package manager
    description: This project uses pnpm, never npm
    type: preference
    level: project
    source: 20261130-142030-a1b2/9f0c…   (session id / message uuid, or "user")
    created_at: 2026-11-30T14:20:30Z
    updated_at: 2026-11-30T14:20:30Z
    status: active
    ---
    Markdown body.

Values are plain when that is unambiguous YAML, else JSON-quoted (JSON strings are YAML too).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import stat
import unicodedata
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, get_args

from .. import safeio
from ..redact import redact_text
from ..workspace import state_dir

Level = Literal["project", "user"]
MemoryType = Literal["preference", "fact", "convention", "reference"]
Status = Literal["active", "stale", "verified"]
LEVELS: tuple[str, ...] = get_args(Level)
TYPES: tuple[str, ...] = get_args(MemoryType)
STATUSES: tuple[str, ...] = get_args(Status)

INDEX_NAME = "MEMORY.md"
HEADER_FIELDS = ("name", "description", "type", "level", "source", "created_at", "updated_at", "status")
# Memory holds short notes: the read_memory tool shows at most 4 KB of a body anyway.
MAX_NAME = 100
MAX_DESCRIPTION = 200
MAX_BODY_BYTES = 4096
SLUG_CHARS = 60
# Names Windows refuses as file names, whatever the extension.
_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}
# Plain YAML values that a YAML reader would take for something other than a string.
_YAML_WORDS = {"true", "false", "null", "yes", "no", "on", "off", "~"}
_NUMBER = re.compile(r"[-+]?(\d[\d_]*)?\.?\d+([eE][-+]?\d+)?")
PRIVATE_DIR, PRIVATE_FILE, SHARED_FILE = 0o700, 0o600, 0o644


def pseudoclaude_home() -> Path:
    """``$PSEUDOCLAUDE_HOME``, default ``~/.pseudoclaude`` (read on every call: tests move it)."""
    configured = os.environ.get("PSEUDOCLAUDE_HOME")
    return Path(configured).expanduser() if configured else Path.home() / ".pseudoclaude"


def project_memory_dir(workspace: Path) -> Path:
    return state_dir(workspace) / "memory"


def user_memory_dir() -> Path:
    return pseudoclaude_home() / "memory"


def now_stamp(now: dt.datetime | None = None) -> str:
    """UTC, to the second: ``2026-11-30T14:20:30Z``."""
    moment = (now or dt.datetime.now(dt.timezone.utc)).astimezone(dt.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_stamp(text: str) -> dt.datetime | None:
    try:
        moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def slugify(name: str) -> str:
    """The file name (without ``.md``) of the topic called ``name``; the topic's identity.

    Letters and digits of any script are kept (a Chinese name gets a Chinese file name),
    lower-cased; every other run of characters becomes one ``-``. Never empty, never a
    dot file, never ``memory`` (``memory.md`` is ``MEMORY.md`` on case-insensitive disks),
    never a Windows device name, at most 60 characters.
    """
    # Slugged from the *redacted* name: a file name is written to disk (and project memory
    # is committed with the repository), so a secret in a topic's name must not reach it.
    text = unicodedata.normalize("NFKC", redact_text(name)).casefold()
    slug = re.sub(r"[^\w]+|_+", "-", text).strip("-")[:SLUG_CHARS].strip("-")
    if not slug:
        return "topic-" + hashlib.sha1(redact_text(name).encode("utf-8")).hexdigest()[:8]
    if slug in _RESERVED or slug == INDEX_NAME.split(".")[0].lower():
        slug += "-topic"
    return slug


@dataclass(frozen=True)
class Topic:
    name: str
    description: str
    type: MemoryType
    level: Level
    source: str
    created_at: str
    updated_at: str
    status: Status
    body: str = ""

    @property
    def slug(self) -> str:
        return slugify(self.name)

    @property
    def file_name(self) -> str:
        return f"{self.slug}.md"

    @property
    def updated(self) -> dt.datetime | None:
        return parse_stamp(self.updated_at)

    def header(self) -> dict[str, str]:
        return {field: getattr(self, field) for field in HEADER_FIELDS}

    def to_text(self) -> str:
        lines = ["---", *(f"{k}: {_yaml_value(v)}" for k, v in self.header().items()), "---"]
        return "\n".join(lines) + "\n" + _newlines(self.body).strip("\n") + "\n"

    @classmethod
    def from_text(cls, text: str) -> Topic:
        """Parse a topic file; ``ValueError`` says what is wrong with it."""
        # Only "\n" ends a line: str.splitlines would also split a body at \x1e or \u2028.
        lines = _newlines(text.removeprefix("\ufeff")).split("\n")
        if not lines or lines[0].strip() != "---":
            raise ValueError("the file does not start with a '---' header")
        try:
            end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
        except StopIteration:
            raise ValueError("the header has no closing '---'") from None
        header: dict[str, str] = {}
        for line in lines[1:end]:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, sep, value = line.partition(":")
            if not sep:
                raise ValueError(f"header line {line!r} is not 'key: value'")
            header[key.strip()] = _parse_value(value)
        missing = [f for f in ("name", "description") if not header.get(f)]
        if missing:
            raise ValueError(f"the header lacks {', '.join(missing)}")
        kind = header.get("type", "fact")
        level = header.get("level", "project")
        status = header.get("status", "active")
        for field, value, allowed in (
            ("type", kind, TYPES),
            ("level", level, LEVELS),
            ("status", status, STATUSES),
        ):
            if value not in allowed:
                raise ValueError(f"{field} {value!r} is not one of {', '.join(allowed)}")
        created = header.get("created_at", "")
        return cls(
            name=header["name"],
            description=header["description"],
            type=kind,  # type: ignore[arg-type]
            level=level,  # type: ignore[arg-type]
            source=header.get("source", "user"),
            created_at=created,
            updated_at=header.get("updated_at") or created,
            status=status,  # type: ignore[arg-type]
            body="\n".join(lines[end + 1 :]).strip("\n"),
        )


def _newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _yaml_value(value: str) -> str:
    value = " ".join(value.split())  # one line, whatever the caller passed
    plain = (
        bool(value)
        and (value[0].isalnum() or value[0] == "_")
        and ": " not in value
        and " #" not in value
        and not value.endswith(":")
        and value.lower() not in _YAML_WORDS
        and not _NUMBER.fullmatch(value)
    )
    return value if plain else json.dumps(value, ensure_ascii=False)


def _parse_value(raw: str) -> str:
    value = raw.strip()
    if value.startswith('"'):
        try:
            loaded = json.loads(value)
        except ValueError:
            return value
        return loaded if isinstance(loaded, str) else value
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


MAX_TOPIC_FILE = 1 << 20  # a topic is a few KB; a bigger file is reported, not read


def read_topic_file(path: Path) -> str:
    """A topic file's text: no link followed, regular files only, at most ``MAX_TOPIC_FILE`` bytes."""
    return safeio.read_text(path, limit=MAX_TOPIC_FILE)


@dataclass(frozen=True)
class Problem:
    """A file in the store that is not a readable topic (hand-edited, half-copied…)."""

    path: Path
    reason: str


class MemoryStore:
    """The topic files of one level. Reads tolerate bad files (reported in ``problems``)."""

    def __init__(self, root: Path, level: Level) -> None:
        self.root = Path(root)
        self.level: Level = level
        self.private = level == "user"
        self.problems: list[Problem] = []

    def __repr__(self) -> str:
        return f"MemoryStore({self.level}, {self.root})"

    # --- reading -------------------------------------------------------------------------

    def topic_files(self) -> list[Path]:
        if not self.root.is_dir() or self.root.is_symlink():
            return []
        return sorted(
            p for p in self.root.glob("*.md") if p.name != INDEX_NAME and not p.name.startswith(".")
        )

    def topics(self) -> list[Topic]:
        """Every readable topic; unreadable files are listed in ``self.problems``."""
        topics, problems = [], []
        for path in self.topic_files():
            try:
                topic = Topic.from_text(read_topic_file(path))
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                problems.append(Problem(path, str(exc)))
                continue
            if topic.slug != path.stem:
                # Renamed by hand: the file name wins, so the topic stays reachable by it.
                problems.append(Problem(path, f"its name {topic.name!r} belongs in {topic.file_name}"))
            topics.append(replace(topic, level=self.level))
        self.problems = problems
        return topics

    def path_of(self, name: str) -> Path:
        return self.root / f"{slugify(name)}.md"

    def locate(self, name: str) -> Path | None:
        """The file of the topic called ``name`` (or whose file is ``name``.md), if any.

        Usually ``<slug>.md``; a file renamed by hand is found by the name in its header.
        """
        path = self.path_of(name)
        if path.is_file():
            return path
        wanted = slugify(name)
        for candidate in self.topic_files():
            if candidate.stem == name:
                return candidate
            try:
                if Topic.from_text(read_topic_file(candidate)).slug == wanted:
                    return candidate
            except (OSError, UnicodeDecodeError, ValueError):
                continue
        return None

    def get(self, name: str) -> Topic | None:
        path = self.locate(name)
        if path is None:
            return None
        try:
            return replace(Topic.from_text(read_topic_file(path)), level=self.level)
        except (OSError, UnicodeDecodeError, ValueError):
            return None

    # --- writing ---------------------------------------------------------------------------

    def ensure_dir(self) -> Path:
        # No link followed below the workspace or $PSEUDOCLAUDE_HOME: a symlinked memory/
        # folder is refused (safeio), so memory never lands outside them.
        if self.private:
            fd = safeio.open_dir(self.root, create=True, mode=PRIVATE_DIR)
            try:
                # mkdir's mode passes through the umask, and an old folder may be wider.
                if stat.S_IMODE(os.fstat(fd).st_mode) != PRIVATE_DIR:
                    os.fchmod(fd, PRIVATE_DIR)
            finally:
                os.close(fd)
        else:
            safeio.make_dirs(self.root, mode=0o755)
        return self.root

    def write_file(self, path: Path, text: str) -> None:
        """Atomically, redacted, with the store's file mode."""
        self.ensure_dir()
        if self.private:
            mode = PRIVATE_FILE
        else:
            # Project memory is meant to be shared like the code.
            umask = os.umask(0)
            os.umask(umask)
            mode = SHARED_FILE & ~umask
        safeio.write_atomic(path, redact_text(text), mode=mode)

    def put(self, topic: Topic) -> Path:
        """Write ``topic`` to ``<slug>.md`` (a copy renamed by hand is replaced, not duplicated)."""
        previous = self.locate(topic.name)
        path = self.root / topic.file_name
        self.write_file(path, topic.to_text())
        if previous is not None and previous != path:
            previous.unlink(missing_ok=True)
        return path

    def delete(self, name: str) -> bool:
        path = self.locate(name)
        if path is None:
            return False
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        return True
