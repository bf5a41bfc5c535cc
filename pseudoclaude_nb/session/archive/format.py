"""The session archive's format: its names, limits and reports (SPEC §6.4).

An export holds ``manifest.json`` (format, version, session id, and every file with its
sha256 and size), ``conversation.jsonl``, ``meta.json`` and, unless left out,
``tool-results/`` and ``images/``. ``export`` writes one, ``import_check`` validates one,
the package's ``__init__`` imports it (and is where the public names are imported from).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

FORMAT = "pseudoclaude-session"
VERSION = 1
MANIFEST = "manifest.json"
CHUNK = 1 << 20
SPILL_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.~-]{0,199}")  # safe_name() + ".txt"; never hidden
IMAGE_NAME = re.compile(r"[0-9a-f]{64}\.(?:png|jpg|gif|webp)")  # issue-14: images/<sha256>.<ext>
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_~-]{0,79}")
SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class ImportLimits:
    max_members: int = 10_000
    max_member_bytes: int = 512 << 20
    max_total_bytes: int = 2 << 30
    max_manifest_bytes: int = 8 << 20
    # A member over min_ratio_bytes may inflate at most max_ratio times (text logs deflate
    # ~5-20x; 300 MB of one repeated byte from 292 KB is ~1,000x).
    max_ratio: int = 200
    min_ratio_bytes: int = 1 << 20
    max_manifest_depth: int = 32


@dataclass
class ExportReport:
    path: Path
    session_id: str
    files: int  # zip members, the manifest included
    bytes: int  # of the zip file
    redactions: Counter[str] = field(default_factory=Counter)


@dataclass
class ImportReport:
    session_id: str
    original_id: str
    files: int
    bytes: int  # uncompressed
    problems: list[str] = field(default_factory=list)  # what the loader had to recover

    @property
    def renamed(self) -> bool:
        return self.session_id != self.original_id
