"""Memory: a few curated long-lived notes, per project and per user (SPEC §10).

Layout: ``store`` (topic files with their front-matter header, atomic and redacted writes,
the private user folder), ``index`` (``MEMORY.md`` generated from the topics, and the capped
index for the system prompt), ``operations`` (the changes, validated one by one), ``manager``
(both stores and applying operations), ``update`` (the update after a run, in a background
thread). Only the index goes into requests; bodies are read with ``read_memory``.
"""

from __future__ import annotations

from .index import prompt_index, render_index, sync_index
from .manager import InvalidOperation, MemoryManager
from .operations import Operation, parse_operations, validate_operations
from .store import (
    LEVELS,
    STATUSES,
    TYPES,
    MemoryStore,
    Topic,
    project_memory_dir,
    pseudoclaude_home,
    slugify,
    user_memory_dir,
)
from .update import UpdateReport, asks_to_remember

__all__ = [
    "LEVELS",
    "STATUSES",
    "TYPES",
    "InvalidOperation",
    "MemoryManager",
    "MemoryStore",
    "Operation",
    "Topic",
    "UpdateReport",
    "asks_to_remember",
    "parse_operations",
    "project_memory_dir",
    "prompt_index",
    "pseudoclaude_home",
    "render_index",
    "slugify",
    "sync_index",
    "user_memory_dir",
    "validate_operations",
]
