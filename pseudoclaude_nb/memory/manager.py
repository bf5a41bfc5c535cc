"""The memory manager: both stores and the operations on them (the update after a run is ``update``).

It owns the rules of change: operations (``create``/``update``/``delete`` with level, name,
description, type, body) are validated one by one (``operations``), so an invalid one is
reported and skipped while the valid ones apply; ``update`` keeps ``created_at``; every
change ends with the store's ``MEMORY.md`` in step with its topics.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import InvalidOperation
from .index import prompt_index, sync_index
from .operations import Operation, parse_operations, validate_operations
from .store import (
    INDEX_NAME,
    LEVELS,
    MemoryStore,
    Status,
    Topic,
    now_stamp,
    project_memory_dir,
    user_memory_dir,
)
from .update import (
    POLICY_TEXT,
    BackgroundUpdate,
    Note,
    Policy,
    UpdateReport,
    asks_to_remember,
    transcript,
)

__all__ = [
    "POLICY_TEXT",
    "InvalidOperation",
    "MemoryManager",
    "Note",
    "Operation",
    "Policy",
    "UpdateReport",
    "asks_to_remember",
    "parse_operations",
    "transcript",
    "validate_operations",
]


class MemoryManager(BackgroundUpdate):
    """The project store of ``workspace`` and the user store under ``$PSEUDOCLAUDE_HOME``."""

    def __init__(self, workspace: Path, user_root: Path | None = None) -> None:
        self.workspace = Path(workspace)
        self.project = MemoryStore(project_memory_dir(self.workspace), "project")
        self.user = MemoryStore(user_root or user_memory_dir(), "user")
        # Store changes and index syncs, from magics, runs and the update thread, one at a time.
        self._lock = threading.RLock()
        self._init_updates()
        self._notices: list[str] = []
        self._said: set[str] = set()

    def shown(self, path: Path) -> str:
        """``path`` as the user reads it: relative to the workspace, or with ``~``, or absolute."""
        for base, prefix in ((self.workspace, None), (Path.home(), "~")):
            try:
                rel = path.relative_to(base)
            except ValueError:
                continue
            return str(Path(prefix) / rel) if prefix else str(rel)
        return str(path)

    def store(self, level: str) -> MemoryStore:
        if level not in LEVELS:
            raise InvalidOperation(f"unknown memory level {level!r}; use project or user")
        return self.project if level == "project" else self.user

    # --- reading -------------------------------------------------------------------------

    def topics(self) -> dict[str, list[Topic]]:
        """Both stores' topics, each index brought in step with its topics first."""
        out: dict[str, list[Topic]] = {}
        with self._lock:
            for store in (self.project, self.user):
                topics, rewritten = sync_index(store)
                if rewritten and topics:
                    self._notices.append(
                        f"rebuilt {store.level} memory index {self.shown(store.root / INDEX_NAME)}: "
                        "it was missing or disagreed with the topic files"
                    )
                for problem in store.problems:
                    text = f"memory file {self.shown(problem.path)} skipped: {problem.reason}"
                    if text not in self._said:  # once per manager, not at every run
                        self._said.add(text)
                        self._notices.append(text)
                out[store.level] = topics
        return out

    def prompt_index(self, now: dt.datetime | None = None) -> str | None:
        """The memory part of the system prompt; ``None`` when both stores are empty."""
        return prompt_index(self.topics(), now=now)

    def find(self, name: str, level: str | None = None) -> list[Topic]:
        levels = [level] if level else list(LEVELS)
        found = []
        for lv in levels:
            topic = self.store(lv).get(name)
            if topic is not None:
                found.append(topic)
        return found

    def take_notices(self) -> list[str]:
        """Index rebuilds and unreadable files seen since the last call (each said once)."""
        with self._lock:
            notices, self._notices = list(dict.fromkeys(self._notices)), []
        return notices

    # --- changing ----------------------------------------------------------------------------

    def apply(
        self, operations: Iterable[Operation], *, source: str, now: dt.datetime | None = None
    ) -> tuple[list[str], list[str]]:
        """Apply valid operations, project store first; returns (changes, failures).

        The stores are separate folders, not one transaction: a failure in one does not
        undo the other's changes, and each failed operation is reported.
        """
        stamp = now_stamp(now)
        changes, failures = [], []
        ops = list(operations)
        with self._lock:
            for level in LEVELS:
                mine = [op for op in ops if op.level == level]
                if not mine:
                    continue
                store = self.store(level)
                for op in mine:
                    try:
                        changes.append(self._apply_one(store, op, source, stamp))
                    except (InvalidOperation, OSError) as exc:
                        failures.append(f"{op.op} {level}/{op.name}: {exc}")
                try:
                    sync_index(store)
                except OSError as exc:
                    failures.append(f"{level} index: {exc}")
        return changes, failures

    def _apply_one(self, store: MemoryStore, op: Operation, source: str, stamp: str) -> str:
        existing = store.get(op.name)
        where = f"{store.level}/{op.name}"
        if op.op == "delete":
            if existing is None or not store.delete(op.name):
                raise InvalidOperation("there is no such topic to delete")
            return f"deleted {where}"
        if existing is None:
            if op.description is None or op.type is None or op.body is None:
                raise InvalidOperation("there is no such topic, and the update lacks what a new one needs")
            store.put(
                Topic(
                    name=op.name,
                    description=op.description,
                    type=op.type,
                    level=store.level,
                    source=source,
                    created_at=stamp,
                    updated_at=stamp,
                    status="active",
                    body=op.body,
                )
            )
            return f"created {where}"
        store.put(
            replace(
                existing,
                name=op.name,
                description=op.description if op.description is not None else existing.description,
                type=op.type if op.type is not None else existing.type,
                body=op.body if op.body is not None else existing.body,
                source=source,
                updated_at=stamp,
                status="active",  # rewritten: neither stale nor verified any more
            )
        )
        return f"updated {where}"

    def add(
        self, level: str, name: str, description: str, type: str, body: str, *, source: str = "user"
    ) -> str:
        """A topic from the user (``%memory add``); raises ``InvalidOperation`` with the reason."""
        return self._user_op(
            {
                "op": "create",
                "level": level,
                "name": name,
                "description": description,
                "type": type,
                "body": body,
            },
            source,
        )

    def edit(
        self,
        level: str,
        name: str,
        *,
        description: str | None = None,
        type: str | None = None,
        body: str | None = None,
    ) -> str:
        if not self.find(name, level):
            raise InvalidOperation(f"there is no {level} memory topic {name!r}; see %memory show")
        op = {"op": "update", "level": level, "name": self.find(name, level)[0].name}
        op.update(
            {k: v for k, v in (("description", description), ("type", type), ("body", body)) if v is not None}
        )
        return self._user_op(op, "user")

    def remove(self, level: str, name: str) -> str:
        return self._user_op({"op": "delete", "level": level, "name": name}, "user")

    def _user_op(self, raw: dict[str, Any], source: str) -> str:
        valid, ignored = validate_operations([raw])
        if ignored:
            raise InvalidOperation(ignored[0].split(": ", 1)[-1])
        changes, failures = self.apply(valid, source=source)
        if failures:
            raise InvalidOperation(failures[0])
        return changes[0]

    def set_status(self, level: str, name: str, status: Status, *, now: dt.datetime | None = None) -> Topic:
        """``verified`` (checked now: the age starts again) or ``stale`` (kept, flagged)."""
        with self._lock:
            store = self.store(level)
            topic = store.get(name)
            if topic is None:
                raise InvalidOperation(f"there is no {level} memory topic {name!r}; see %memory show")
            changed = replace(topic, status=status)
            if status == "verified":
                changed = replace(changed, updated_at=now_stamp(now))
            store.put(changed)
            sync_index(store)
        return changed

    def rebuild(self, levels: Iterable[str] = LEVELS) -> list[tuple[str, int, list[str]]]:
        """Rewrite ``MEMORY.md`` from the topics: (level, topics, problems) per store."""
        out = []
        with self._lock:
            for level in levels:
                store = self.store(level)
                (store.root / "MEMORY.md").unlink(missing_ok=True)
                topics, _ = sync_index(store)
                out.append((level, len(topics), [f"{p.path.name}: {p.reason}" for p in store.problems]))
        return out
