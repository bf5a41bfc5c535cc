"""``%sessions``: list, show, resume and start sessions of this workspace."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ..agent import Agent
from ..errors import PseudoClaudeError
from ..messages import Message
from ..session import list_sessions, load_session
from ..session.paths import session_dir

ACTIONS = ("list", "show", "resume", "new")


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "?"


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def message_line(i: int, m: Message, width: int = 100) -> str:
    if m.tool_result is not None:
        flag = " error" if m.tool_result.is_error else ""
        body = f"tool result{flag} [{m.tool_result.call_id}] {len(m.tool_result.content):,} chars: {m.tool_result.content}"
    else:
        body = m.content
        if m.tool_calls:
            calls = ", ".join(c.name for c in m.tool_calls)
            body = (body + " " if body else "") + f"⇢ calls {calls}"
    body = " ".join(body.split())
    if len(body) > width:
        body = body[: width - 1] + "…"
    return f"{i:>4}  {m.role:<9} {body}"


@magics_class
class SessionMagics(Magics):
    def __init__(self, shell: Any, agent: Agent) -> None:
        super().__init__(shell)
        self._agent = agent

    @magic_arguments()
    @argument("--last", action="store_true", help="with resume (or alone): the latest session")
    @argument("action", nargs="?", default="list", help="list | show ID | resume ID | resume --last | new")
    @argument("target", nargs="?", help="a session id")
    @line_magic
    def sessions(self, line: str) -> None:
        """Sessions of this workspace, stored in .pseudoclaude/sessions/<id>/.

        %sessions                 list them, newest activity first
        %sessions show ID         the effective conversation, and any recovery problems
        %sessions resume ID       continue session ID with the next %agent
        %sessions resume --last   (or %sessions --last) continue the latest session
        %sessions new             the next %agent starts a new session
        """
        args = parse_argstring(self.sessions, line)
        action = args.action
        if action not in ACTIONS:
            raise UsageError(f"unknown action {action!r}; use one of: {', '.join(ACTIONS)}")
        try:
            if action == "list" and not args.last:
                self._list()
            elif action == "show":
                self._show(args.target or self._current_id())
            elif action == "resume" or args.last:
                if not args.target and not args.last:
                    raise UsageError("%sessions resume needs an ID or --last")
                self._resume(None if args.last else args.target)
            elif action == "new":
                self._agent.new_session()
                print("the next %agent starts a new session")
        except PseudoClaudeError as exc:
            raise UsageError(str(exc)) from None

    def _current_id(self) -> str:
        if self._agent.session is None:
            raise UsageError("no current session; use %sessions show ID (see %sessions list)")
        return self._agent.session.id

    def _list(self) -> None:
        sessions = list_sessions(self._agent.workspace)
        if not sessions:
            print(f"no sessions yet in {self._agent.workspace}; start one with %agent")
            return
        current = self._agent.session.id if self._agent.session else None
        print(f"  {'id':<21} {'last activity':<16} {'messages':>9} {'size':>9}  {'status':<10} title")
        for s in sessions:
            mark = "*" if s.id == current else " "
            counts = f"{s.effective_messages}/{s.physical_messages}"
            print(
                f"{mark} {s.id:<21} {_when(s.last_activity):<16} {counts:>9} {_size(s.bytes):>9}"
                f"  {s.status:<10} {s.title}"
            )
        print("messages = effective/logged; * = current. %sessions show ID · %sessions resume ID")

    def _show(self, session_id: str) -> None:
        path = session_dir(self._agent.workspace, session_id)
        loaded = load_session(path)
        print(f"session {session_id} · {path / 'conversation.jsonl'}")
        model = loaded.last_model or "?"
        print(
            f"{len(loaded.messages)} effective messages of {loaded.physical_messages} logged"
            f" · {loaded.replaces} replaces · {_size(loaded.bytes)} · model {model}"
        )
        for problem in loaded.problems():
            print(f"! {problem}")
        for i, m in enumerate(loaded.messages):
            print(message_line(i, m))

    def _resume(self, session_id: str | None) -> None:
        loaded = self._agent.resume(session_id)
        sid = self._agent.session.id if self._agent.session else session_id
        idle = ""
        if loaded.last_ts:
            hours = (time.time() - loaded.last_ts) / 3600
            idle = f", last active {hours:.1f} h ago" if hours >= 1 else ""
        print(f"resumed session {sid}: {len(loaded.messages)} messages{idle}; the next %agent continues it")
        for problem in loaded.problems():
            print(f"! {problem}")
