"""The memory update after a run: one model request in a background thread.

Updates of one manager run one at a time, in the order they were asked for, so two quick
runs cannot lose or reorder a change. Under the default policy (``explicit``) the request
is made only when a user message of the run asks to remember or forget something, and it
tells the model to save only that. A failed update is reported (``note``) and never touches
the conversation. It never imports a provider: the caller passes the one the run used.
``BackgroundUpdate`` is a part of ``MemoryManager``; it reads the stores through the
manager's ``topics`` and changes them only through its ``apply``.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from ..errors import InvalidOperation
from ..messages import Message, Usage
from ..providers.base import Provider, Request
from .index import HEADINGS, cap_lines, entry_line
from .operations import Operation, parse_operations, validate_operations
from .store import (
    Topic,
)

# A failure that must not reach the user's output is logged at debug, with its traceback:
# logging.getLogger("pseudoclaude_nb").setLevel(logging.DEBUG) (and a handler) shows it.
_log = logging.getLogger(__name__)

Policy = Literal["explicit", "auto", "off"]
Note = Callable[[str, str], None]  # (text, level "info" | "warning")
Spent = Callable[[Usage, str | None], None]  # (the update request's usage, its model)

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
    spent: Spent | None = None


class BackgroundUpdate:
    """The queue of updates and the thread that works it off (a part of ``MemoryManager``)."""

    def _init_updates(self) -> None:
        self._cond = threading.Condition()
        self._jobs: collections.deque[_Job] = collections.deque()
        self._pending = 0
        self._worker: threading.Thread | None = None
        self._reports: list[UpdateReport] = []
        self.last_report: UpdateReport | None = None

    # what the manager provides
    def topics(self) -> dict[str, list[Topic]]:
        raise NotImplementedError

    def apply(self, operations: list[Operation], *, source: str) -> tuple[list[str], list[str]]:
        raise NotImplementedError

    def update_async(
        self,
        messages: list[Message],
        *,
        provider: Provider,
        policy: str = "explicit",
        session_id: str | None = None,
        note: Note | None = None,
        spent: Spent | None = None,
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
        job = _Job(list(messages), provider, policy, source, session_id, note, spent)
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
        _count(job, answer.usage)
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


def _count(job: _Job, usage: Usage) -> None:
    """The update request's usage, to whoever counts it (the session's cost, issue 31)."""
    if job.spent is None:
        return
    try:
        job.spent(usage, job.provider.model)
    except Exception:  # noqa: BLE001 - the session may be closed by now; the update goes on
        _log.debug("a memory update's usage could not be counted", exc_info=True)


def _tell(note: Note | None, report: UpdateReport) -> None:
    if note is None or not (report.error or report.changes or report.ignored):
        return
    try:
        note(report.summary(), "warning" if report.error or report.ignored else "info")
    except Exception:  # noqa: BLE001 - the session may be closed by now; the report stays for %memory
        _log.debug("a memory update's report could not be said", exc_info=True)
