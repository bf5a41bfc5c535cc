"""The memory manager: both stores, the operations on them, and the update after a run.

It owns the rules of change: operations (``create``/``update``/``delete`` with level, name,
description, type, body) are validated one by one, so an invalid one is reported and
skipped while the valid ones apply; ``update`` keeps ``created_at``; every change ends with
the store's ``MEMORY.md`` in step with its topics. The update after a run is one model
request in a background thread; updates of one manager run one at a time, in the order
they were asked for, so two quick runs cannot lose or reorder a change. Under the default
policy (``explicit``) the request is made only when a user message of the run asks to
remember or forget something, and it tells the model to save only that. A failed update is
reported (``note``) and never touches the conversation. It never imports a provider: the
caller passes the one the run used.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..errors import InvalidOperation
from ..messages import Message
from ..providers.base import Provider, Request
from .index import HEADINGS, cap_lines, entry_line, prompt_index, sync_index
from .store import (
    INDEX_NAME,
    LEVELS,
    MAX_BODY_BYTES,
    MAX_DESCRIPTION,
    MAX_NAME,
    Level,
    MemoryStore,
    MemoryType,
    Status,
    Topic,
    now_stamp,
    project_memory_dir,
    user_memory_dir,
)

Policy = Literal["explicit", "auto", "off"]
Note = Callable[[str, str], None]  # (text, level "info" | "warning")

# Under the default policy the update request is made only when a user message of the run
# asks to remember or forget; the model then decides what exactly. Asking after every run
# would cost a request each time for nothing, since "explicit" saves nothing unasked.
# "memory" alone is not a cue: "why is memory usage high?" asks nothing of the stores.
EXPLICIT_CUES = re.compile(
    r"\b(?:remember|memori[sz]e|forget)\b|\b(?:to|in|into|from) (?:your |the )?memor(?:y|ies)\b"
    r"|记住|记下|记得|忘记|忘掉|覚えて|忘れて|merk dir|vergiss|souviens|oublie|recuerda|olvida",
    re.IGNORECASE,
)

UPDATE_SYSTEM = """You maintain the long-term memory of PseudoClaude, a coding agent. Memory is a few short notes: future sessions see their index (name and description) in the system prompt and read a note in full only when needed. You get the current indexes and the messages of one finished run. Answer with only a JSON array of operations, and [] when nothing changes.

{policy}

Never save: the state of the current task (what failed, what was changed, what to do next), file contents, command output, guesses or unverified conclusions, secrets (keys, tokens, passwords).

Levels: "project" for this workspace (its tools, commands, conventions, layout); "user" for the person, across all their projects (their own preferences). Types: preference, fact, convention, reference.

Operations:
{{"op": "create", "level": "project", "name": "package manager", "description": "one line, at most 200 characters", "type": "preference", "body": "Markdown, at most 4 KB: the note itself, and when it applies"}}
{{"op": "update", "level": "project", "name": "<an existing name>", and only the fields that change}}
{{"op": "delete", "level": "user", "name": "<an existing name>"}}
Update an existing note rather than creating a near-duplicate; delete a note when the user asks to forget it."""

POLICY_TEXT = {
    "explicit": (
        "Policy: explicit. Save only what the user explicitly asked you to remember in this run "
        '("remember that…", "记住…"), and delete only what they asked you to forget. If the user '
        "did not explicitly ask, answer [] even when the run contains useful facts."
    ),
    "auto": (
        "Policy: auto. Save stable facts, preferences and conventions that will still hold in "
        "future sessions: stated by the user, or confirmed in the workspace during the run. "
        "When unsure, leave it out."
    ),
}

# What of a run the update request shows: user text in full (up to a point), the rest briefly.
_USER_CHARS, _ASSISTANT_CHARS, _CALL_CHARS, _RESULT_CHARS = 8_000, 2_000, 300, 500
_TRANSCRIPT_CHARS = 60_000
_INDEX_LINES = 200


class Operation(BaseModel):
    """One change to one topic. Unknown extra fields (a model's "reason") are ignored."""

    model_config = ConfigDict(extra="ignore")

    op: Literal["create", "update", "delete"]
    level: Level
    name: str = Field(min_length=1, max_length=MAX_NAME)
    description: str | None = Field(None, min_length=1, max_length=MAX_DESCRIPTION)
    type: MemoryType | None = None
    body: str | None = None

    @field_validator("name", "description", mode="before")
    @classmethod
    def _one_line(cls, value: Any) -> Any:
        return " ".join(value.split()) if isinstance(value, str) else value

    @field_validator("body")
    @classmethod
    def _short_body(cls, value: str | None) -> str | None:
        if value is not None and len(value.encode("utf-8")) > MAX_BODY_BYTES:
            raise ValueError(f"body is over {MAX_BODY_BYTES} bytes; memory keeps short notes")
        return value

    @model_validator(mode="after")
    def _complete(self) -> Operation:
        if self.op == "create":
            missing = [f for f in ("description", "type", "body") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"create needs {', '.join(missing)}")
        if self.op == "update" and self.description is None and self.type is None and self.body is None:
            raise ValueError("update changes nothing: give description, type or body")
        return self


def validate_operations(raw: Iterable[Any]) -> tuple[list[Operation], list[str]]:
    """The valid operations, and one line per invalid one saying why it was ignored."""
    valid, ignored = [], []
    for i, item in enumerate(raw, 1):
        try:
            if not isinstance(item, dict):
                raise InvalidOperation(f"not an object: {json.dumps(item, ensure_ascii=False)[:80]}")
            valid.append(Operation.model_validate(item))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'operation'}: {e['msg']}" for e in exc.errors()
            )
            ignored.append(f"operation {i} ({_label(item)}): {problems}")
        except InvalidOperation as exc:
            ignored.append(f"operation {i}: {exc}")
    return valid, ignored


def _label(item: dict[str, Any]) -> str:
    return f"{item.get('op', '?')} {item.get('level', '?')}/{item.get('name', '?')}"


def parse_operations(text: str) -> list[Any]:
    """The JSON array in a model's answer (fences and chatter around it are tolerated)."""
    start, end = text.find("["), text.rfind("]")
    obj_start = text.find("{")
    if obj_start != -1 and (start == -1 or obj_start < start):
        # {"operations": [...]} is a common wrapping.
        try:
            data = json.loads(text[obj_start : text.rfind("}") + 1])
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("operations"), list):
            return data["operations"]
    if start == -1 or end < start:
        raise InvalidOperation(f"the answer holds no JSON array of operations: {text.strip()[:120]!r}")
    try:
        data = json.loads(text[start : end + 1])
    except ValueError as exc:
        raise InvalidOperation(f"the answer's operations are not valid JSON: {exc}") from None
    if not isinstance(data, list):
        raise InvalidOperation("the answer's operations are not a JSON array")
    return data


def asks_to_remember(messages: Iterable[Message]) -> bool:
    """Whether a user message (not a tool result) asks to remember or forget something."""
    return any(
        m.role == "user" and m.tool_result is None and EXPLICIT_CUES.search(m.content) for m in messages
    )


def transcript(messages: Iterable[Message]) -> str:
    """The run, briefly: what the update request shows the model."""
    lines = []
    for m in messages:
        if m.tool_result is not None:
            lines.append(f"[tool result] {_clip(m.tool_result.content, _RESULT_CHARS)}")
        elif m.role == "user":
            lines.append(f"[user] {_clip(m.content, _USER_CHARS)}")
        else:
            if m.content:
                lines.append(f"[assistant] {_clip(m.content, _ASSISTANT_CHARS)}")
            for call in m.tool_calls:
                args = json.dumps(call.arguments, ensure_ascii=False)
                lines.append(f"[assistant calls {call.name}] {_clip(args, _CALL_CHARS)}")
    text = "\n".join(lines)
    if len(text) > _TRANSCRIPT_CHARS:
        # The request is at the start, the outcome at the end: keep both.
        head, tail = _TRANSCRIPT_CHARS // 3, _TRANSCRIPT_CHARS * 2 // 3
        text = f"{text[:head]}\n[… {len(text) - head - tail:,} characters cut …]\n{text[-tail:]}"
    return text


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit:,} more characters]"


@dataclass
class UpdateReport:
    """What one update after a run did: changes made, operations ignored, or why it failed."""

    session_id: str | None
    changes: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    error: str | None = None

    def summary(self) -> str:
        if self.error:
            return f"memory update failed: {self.error}"
        parts = []
        if self.changes:
            parts.append("memory updated: " + ", ".join(self.changes))
        if self.ignored:
            parts.append(
                f"{len(self.ignored)} invalid memory operation(s) ignored: " + "; ".join(self.ignored)
            )
        return " · ".join(parts) or "memory update: nothing to change"


@dataclass
class _Job:
    messages: list[Message]
    provider: Provider
    policy: str
    source: str
    session_id: str | None
    note: Note | None


class MemoryManager:
    """The project store of ``workspace`` and the user store under ``$PSEUDOCLAUDE_HOME``."""

    def __init__(self, workspace: Path, user_root: Path | None = None) -> None:
        self.workspace = Path(workspace)
        self.project = MemoryStore(project_memory_dir(self.workspace), "project")
        self.user = MemoryStore(user_root or user_memory_dir(), "user")
        # Store changes and index syncs, from magics, runs and the update thread, one at a time.
        self._lock = threading.RLock()
        self._cond = threading.Condition()
        self._jobs: collections.deque[_Job] = collections.deque()
        self._pending = 0
        self._worker: threading.Thread | None = None
        self._reports: list[UpdateReport] = []
        self._notices: list[str] = []
        self._said: set[str] = set()
        self.last_report: UpdateReport | None = None

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

    # --- the update after a run -------------------------------------------------------------

    def update_async(
        self,
        messages: list[Message],
        *,
        provider: Provider,
        policy: str = "explicit",
        session_id: str | None = None,
        note: Note | None = None,
    ) -> bool:
        """Queue the update for a run's new ``messages``; False when the policy asks for none.

        The request is made in a background thread; ``wait()`` blocks until the queue is
        empty. The source of what it saves is the run's first user message.
        """
        if policy not in POLICY_TEXT or not messages:
            return False
        if policy == "explicit" and not asks_to_remember(messages):
            return False
        first_user = next((m for m in messages if m.role == "user" and m.tool_result is None), messages[0])
        source = f"{session_id}/{first_user.id}" if session_id else first_user.id
        job = _Job(list(messages), provider, policy, source, session_id, note)
        with self._cond:
            self._jobs.append(job)
            self._pending += 1
            if self._worker is None:
                # Daemon: an update still running when the kernel exits is lost, not awaited.
                self._worker = threading.Thread(target=self._drain, name="pseudoclaude-memory", daemon=True)
                self._worker.start()
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every queued update has finished; False if ``timeout`` ran out first."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending == 0, timeout)

    @property
    def pending(self) -> int:
        with self._cond:
            return self._pending

    def take_reports(self) -> list[UpdateReport]:
        with self._cond:
            reports, self._reports = self._reports, []
        return reports

    def _drain(self) -> None:
        while True:
            with self._cond:
                # Deciding to stop under the same lock producers take: no job is ever stranded.
                if not self._jobs:
                    self._worker = None
                    self._cond.notify_all()
                    return
                job = self._jobs.popleft()
            try:
                report = self._update(job)
            except Exception as exc:  # noqa: BLE001 - a background failure is reported, never raised
                report = UpdateReport(job.session_id, error=f"{type(exc).__name__}: {exc}")
            _tell(job.note, report)
            with self._cond:
                self.last_report = report
                self._reports.append(report)
                self._pending -= 1
                self._cond.notify_all()

    def _update(self, job: _Job) -> UpdateReport:
        report = UpdateReport(job.session_id)
        request = self.update_request(job.messages, job.policy)
        try:
            answer = job.provider.complete(request)
        except Exception as exc:  # noqa: BLE001 - whatever the provider raises
            report.error = f"the model request failed: {exc}"
            return report
        try:
            raw = parse_operations(answer.text)
        except InvalidOperation as exc:
            report.error = str(exc)
            return report
        valid, report.ignored = validate_operations(raw)
        report.changes, failures = self.apply(valid, source=job.source)
        report.ignored += failures
        return report

    def update_request(self, messages: list[Message], policy: str) -> Request:
        indexes = []
        for level, topics in self.topics().items():
            lines = [HEADINGS[level]] + [entry_line(t, dt.datetime.now(dt.timezone.utc)) for t in topics]
            if not topics:
                lines.append("(empty)")
            indexes.append(
                "\n".join(
                    cap_lines(lines, set(range(1, len(lines))), max_lines=_INDEX_LINES, max_bytes=25_000)
                )
            )
        content = (
            "Current memory:\n\n"
            + "\n\n".join(indexes)
            + "\n\nMessages of the run, oldest first:\n\n"
            + transcript(messages)
            + "\n\nAnswer with the JSON array of operations only."
        )
        return Request(
            system=UPDATE_SYSTEM.format(policy=POLICY_TEXT[policy]),
            messages=[Message(role="user", content=content)],
            max_tokens=4096,
            purpose="memory",
        )


def _tell(note: Note | None, report: UpdateReport) -> None:
    if note is None or not (report.error or report.changes or report.ignored):
        return
    try:
        note(report.summary(), "warning" if report.error or report.ignored else "info")
    except Exception:  # noqa: BLE001, S110 - the session may be closed by now; the report stays
        pass
