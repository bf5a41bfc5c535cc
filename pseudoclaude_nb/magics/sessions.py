"""``%sessions``: list, show, resume and start sessions; trash, restore, purge, gc, export, import.

Thin: it parses, calls ``session`` (catalog, lifecycle, archive) and prints. Every mistake
or refusal is a ``UsageError`` whose text says what to do instead. The actions that move,
delete or copy whole sessions (trash, restore, purge, gc, export, import) are in
``session_lifecycle``; the listing, the readers, resume and fork are here.

It works through a ``SessionHost``, not the agent: ``list``, ``resume``, ``show``, ``search``
and the rest read sidecars, logs and the history index, and the agent (with its imports,
~0.4 s in a fresh kernel) is built only by the actions that need it — ``fork``, and the step
scrubber of a small log's timeline (issue 34). Keep the imports at the top of this module
light for the same reason: what one action needs is imported in that action
(``tests/test_startup_sessions.py`` checks).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from ..errors import PseudoClaudeError
from ..session.catalog import list_sessions
from ..workspace import LOG_NAME, session_dir
from . import session_lifecycle as lifecycle
from .args import expand_variables, parse, unknown, usage_line
from .frontend import in_notebook
from .session_host import SessionHost
from .session_text import (
    _count,
    _relative,
    _size,
    _status,
    _title,
    _when,
    _window,
    message_cells,
    notebook_changes,
    safe_line,
)
from .tables import Column, Note, Table, emit

if TYPE_CHECKING:
    from ..agent import Agent

ACTIONS = (
    "list",
    "show",
    "timeline",
    "resume",
    "new",
    "fork",
    "search",
    "reindex",
    "trash",
    "restore",
    "purge",
    "gc",
    "export",
    "import",
)
# Largest log whose timeline in %sessions show gets the step scrubber (see _show).
SCRUB_BYTES = 32 << 20
# Which options each action takes; any other combination is a UsageError, not silently ignored.
_OPTIONS = {
    "last": ("list", "resume"),
    "trash": ("list",),
    "all_trash": ("purge",),
    "yes": ("purge",),
    "days": ("gc",),
    "no_spills": ("export",),
    "all": ("search",),
    "limit": ("show",),
    "tail": ("show",),
    "at": ("fork",),
    "strategy": ("fork",),
}
# How many positional arguments each action takes: (at least, at most).
_ARITY = {
    "list": (0, 0),
    "show": (0, 1),
    "timeline": (0, 1),
    "resume": (0, 1),
    "new": (0, 0),
    "fork": (0, 1),
    "search": (1, 1_000),  # the words of the query
    "reindex": (0, 0),
    "trash": (0, 1),
    "restore": (1, 1),
    "purge": (0, 1),
    "gc": (0, 0),
    "export": (2, 2),
    "import": (1, 1),
}
_USAGE = {
    "restore": "%sessions restore ID (see %sessions trash)",
    "export": "%sessions export ID PATH [--no-spills]",
    "import": "%sessions import PATH",
    "purge": "%sessions purge ID|--all-trash [--yes]",
    "search": '%sessions search "text to find" [--all]',
    "fork": "%sessions fork [ID] [--at STEP] [--strategy NAME]",
}


@magics_class
class SessionMagics(Magics):
    # magics.register builds this class over the kernel's SessionHost, not over its agent.
    takes_host = True

    def __init__(self, shell: Any, host: SessionHost | Agent) -> None:
        super().__init__(shell)
        self._host = host if isinstance(host, SessionHost) else SessionHost.over(host)

    @magic_arguments()
    @argument("--last", action="store_true", help="with resume (or alone): the latest session")
    @argument("--trash", action="store_true", help="with list: the trashed sessions")
    @argument("--all-trash", action="store_true", help="with purge: every trashed session")
    @argument("--yes", action="store_true", help="with purge: really delete (without it, only say what)")
    @argument("--days", type=int, default=None, help="with gc: idle days before trashing (default 30)")
    @argument("--no-spills", action="store_true", help="with export: leave out tool-results/")
    @argument("--all", action="store_true", help="with search: every session, not only the current one")
    @argument("--limit", type=int, default=None, metavar="N", help="with show: the first N messages")
    @argument("--tail", type=int, default=None, metavar="N", help="with show: the last N messages")
    @argument(
        "--at",
        type=int,
        default=None,
        metavar="STEP",
        help="with fork: the step to fork at (default: the last)",
    )
    @argument(
        "--strategy",
        default=None,
        metavar="NAME",
        help="with fork: the strategy of the fork's runs (compact, rollover, api or MODULE:CLASS)",
    )
    @argument("action", nargs="?", default="list", help=" | ".join(ACTIONS))
    @argument("targets", nargs="*", help="a session id; for export ID PATH; for import PATH")
    # A search is for the text as typed (SPEC §20); the other actions' ids and paths expand
    # {x} and $x as IPython would (``%sessions resume {original}``): see below.
    @no_var_expand
    @line_magic
    def sessions(self, line: str) -> None:
        """Sessions of this workspace, stored in .pseudoclaude/sessions/<id>/.

        %sessions                     list them, newest activity first
        %sessions timeline [ID]       the log as a timeline (a widget in a notebook; the
                                      current session without ID)
        %sessions show ID             the effective conversation, and any recovery problems
                                      (--tail N: the last N messages, --limit N: the first N;
                                      without either, long ones show the first and last 20)
        %sessions resume ID           continue session ID with the next %agent
        %sessions resume --last       (or %sessions --last) continue the latest session
        %sessions new                 the next %agent starts a new session
        %sessions fork --at STEP      a new session holding the request of step STEP of the
                                      current session (or of session ID), made current;
                                      --strategy NAME for its runs; the original
                                      is not changed (steps: %context --at STEP)
        %sessions search TEXT [--all] full-text search of this session (--all: every session)
        %sessions reindex             rebuild .pseudoclaude/history.sqlite from the logs
        %sessions trash ID            move a session to .pseudoclaude/trash/ (undo with restore)
        %sessions trash               (or %sessions list --trash) list the trash
        %sessions restore ID          move a trashed session back
        %sessions purge ID --yes      delete a trashed session for good (--all-trash: all of them);
                                      without --yes it only says what it would delete
        %sessions gc [--days 30]      move sessions idle for more than N days to the trash
        %sessions export ID PATH      write a zip (secrets redacted) to share; --no-spills
                                      leaves out the spilled tool results
        %sessions import PATH         add an exported session (a new id if its id is taken)
        """
        # Intermixed, so options may come anywhere: "purge --yes ID" as well as "purge ID --yes".
        try:
            typed = parse(self.sessions, line, intermixed=True)
        except UsageError:  # e.g. "--tail $n": an option's value that only its expansion makes valid
            typed = None
        if typed is not None and typed.action == "search":
            args = typed
        else:
            args = parse(self.sessions, expand_variables(self.shell, line), intermixed=True)
        action = args.action
        if action not in ACTIONS:
            raise unknown("action", action, ACTIONS, usage=usage_line(self.sessions.parser))
        self._check_options(args)
        try:
            self._dispatch(action, args)
        except PseudoClaudeError as exc:
            raise UsageError(str(exc)) from None
        except OSError as exc:
            where = f" ({exc.filename})" if exc.filename else ""
            raise UsageError(
                f"%sessions {action} failed: {exc.strerror or exc}{where}; check the folder"
            ) from None

    def _check_options(self, args: Any) -> None:
        action = "resume" if args.last and args.action == "list" else args.action
        for option, allowed in _OPTIONS.items():
            value = getattr(args, option)
            if value not in (None, False) and action not in allowed:
                flag = "--" + option.replace("_", "-")
                raise UsageError(f"{flag} goes with %sessions {' or '.join(allowed)}, not {action}")
        low, high = _ARITY[action]
        n = len(args.targets)
        if not low <= n <= high:
            usage = _USAGE.get(action, f"%sessions {action}" + (" ID" if high else ""))
            wanted = "no" if high == 0 else str(low) if low == high else f"{low}-{high}"
            wanted = f"at least {low}" if high > 2 else wanted
            noun = "argument" if wanted.endswith(" 1") or wanted == "1" else "arguments"
            raise UsageError(f"%sessions {action} takes {wanted} {noun}, not {n}; usage: {usage}")

    def _dispatch(self, action: str, args: Any) -> None:
        target: str = args.targets[0] if args.targets else ""
        if args.last or action == "resume":
            if not target and not args.last:
                raise UsageError("%sessions resume needs an ID or --last")
            self._resume(None if args.last else target)
        elif action == "list" and args.trash:
            lifecycle.show_trash(self)
        elif action == "list":
            self._list()
        elif action == "show":
            self._show(target or self._current_id(), limit=args.limit, tail=args.tail)
        elif action == "timeline":
            self._timeline(session_dir(self._host.workspace, target or self._current_id()))
        elif action == "new":
            self._host.new_session()
            print("the next %agent starts a new session")
        elif action == "fork":
            self._fork(target, at=args.at, strategy=args.strategy)
        elif action == "search":
            from .history import search_parts

            emit(self.shell, *search_parts(self._host, " ".join(args.targets), all_sessions=args.all))
        elif action == "reindex":
            from .history import ReindexProgress, reindex_action

            progress = ReindexProgress(in_notebook(self.shell))
            try:
                text = reindex_action(self._host, progress)
            finally:
                progress.finish()
            print(text)
        elif action == "trash" and target:
            lifecycle.trash(self, target)
        elif action == "trash":
            lifecycle.show_trash(self)
        elif action == "restore":
            lifecycle.restore(self, target)
        elif action == "purge":
            lifecycle.purge_trashed(self, target or None, all_trash=args.all_trash, yes=args.yes)
        elif action == "gc":
            lifecycle.gc(self, 30 if args.days is None else args.days)
        elif action == "export":
            lifecycle.export(self, target, args.targets[1], spills=not args.no_spills)
        elif action == "import":
            lifecycle.import_archive(self, target)

    def _open_id(self) -> str | None:
        return self._host.current_id

    def _path(self, text: str) -> Path:
        """A path as typed: relative to the workspace (the notebook's folder)."""
        path = Path(text).expanduser()
        return path if path.is_absolute() else self._host.workspace / path

    def _current_id(self) -> str:
        current = self._host.current_id
        if current is None:
            raise UsageError("no current session; use %sessions show ID (see %sessions list)")
        return current

    def _list(self) -> None:
        ws = self._host.workspace
        sessions = list_sessions(ws)
        in_trash = lifecycle.trash_line(ws)
        if not sessions:
            print(f"no sessions yet in {ws}; start one with %agent")
            if in_trash:
                print(in_trash)
            return
        current = self._host.current_id
        table = Table(
            (
                Column("", gap=1),
                Column("id", mono=True),
                Column("last activity"),
                Column("messages", right=True),
                Column("size", right=True),
                Column("status"),
                Column("title"),
            )
        )
        for s in sessions:
            table.add(
                "*" if s.id == current else "",
                safe_line(s.id),
                _when(s.last_activity),
                f"{s.effective_messages}/{s.physical_messages}",
                _size(s.bytes),
                _status(s.status, s.id == current),
                _title(s.title),
            )
        notes = [Note("messages = effective/logged; * = current. %sessions show ID · %sessions resume ID")]
        lag_line = _index_lag(self._host, sizes={s.id: s.bytes for s in sessions})
        if lag_line:
            notes.append(Note(lag_line))
        if in_trash:
            notes.append(Note(in_trash))
        emit(self.shell, table, *notes)

    def _show(self, session_id: str, *, limit: int | None = None, tail: int | None = None) -> None:
        from ..session.catalog import whole_log

        ws = self._host.workspace
        path = session_dir(ws, session_id)
        for n in (limit, tail):
            if n is not None and n < 1:
                raise UsageError(f"--limit and --tail take a number of messages, at least 1, not {n}")
        # The counts and problems of the whole log are its sidecar's (a replay of 200 MB took ~1.2 s).
        logged = whole_log(path)
        state = _Shown.read(path, logged, limit=limit, tail=tail)
        replaces = "" if logged.replaces is None else f" · {logged.replaces} replaces"
        head: list[str] = [
            f"session {session_id} · {_relative(path / 'conversation.jsonl', ws)}",
            f"{state.count} effective messages of {logged.physical_messages} logged"
            f"{replaces} · {_size(state.bytes)} · model {safe_line(state.model or '?')}",
            *(f"! {safe_line(problem)}" for problem in logged.problems),
        ]
        table = Table((Column("#", right=True), Column("role"), Column("message")), indent="  ")
        for i in state.shown:
            if i is None:
                hidden = state.count - len(state.shown) + 1
                table.across(
                    f"… {hidden:,} more messages (%sessions show {session_id} --tail N or --limit N)"
                )
            else:
                table.add(*message_cells(i, state.messages[i]))
        changes = notebook_changes([(i, state.messages[i]) for i in state.shown if i is not None])
        emit(self.shell, *head, *([table] if state.shown else []), *([Note(changes)] if changes else []))
        if in_notebook(self.shell):
            self._timeline(path, state.bytes, timeline=state.timeline)

    def _timeline(self, path: Path, size: int | None = None, *, timeline: Any = None) -> None:
        """The physical log as a timeline: the widget in a notebook (choosing an entry shows it
        in full; below it the step scrubber: a step's request, as %context --at STEP shows
        it), else its text."""
        from ..session.timeline import build_timeline
        from ..widgets.timeline import timeline_text

        if timeline is None:
            timeline = build_timeline(path)
        if not in_notebook(self.shell):
            print(timeline_text(timeline))
            return
        # The scrubber replays the log from a step's nearest replace: past SCRUB_BYTES a
        # session points to --at instead.
        size = (path / LOG_NAME).stat().st_size if size is None else size
        scrub = size <= SCRUB_BYTES
        from ..widgets import SessionTimeline

        def now() -> dict[str, int] | None:
            # The scrubber's NOW figures are the agent's (its system prompt, tools, memory):
            # the agent is built when the scrubber first shows a step, not before.
            from .context_steps import now_tokens

            return now_tokens(self._host.agent())

        display(SessionTimeline(timeline, steps=scrub, now=now if scrub else None))
        if not scrub:
            print(
                f"   (no step scrubber for a log over {_size(SCRUB_BYTES)}: %context --at STEP shows a step)"
            )

    def _resume(self, session_id: str | None) -> None:
        resumed = self._host.resume(session_id)
        idle = ""
        if resumed.last_ts:
            hours = (time.time() - resumed.last_ts) / 3600
            idle = f", last active {hours:.1f} h ago" if hours >= 1 else ""
        print(
            f"resumed session {safe_line(resumed.session_id)}: {resumed.messages} messages{idle}; "
            "the next %agent continues it"
        )
        for problem in resumed.problems:
            print(f"! {safe_line(problem)}")

    def _fork(self, target: str, *, at: int | None, strategy: str | None) -> None:
        from ..session.fork import fork_session

        if not target and self._host.current_id is None:
            raise UsageError(
                "no current session to fork; use %sessions fork ID --at STEP (see %sessions list)"
            )
        if strategy is not None:
            from ..context.names import normalized
            from ..context.registry import load_strategy

            try:
                strategy = normalized(strategy)  # before anything is forked
            except ValueError as exc:
                raise UsageError(f"--strategy {exc}") from None
            load_strategy(strategy, self._host.workspace)  # one that does not load: said now
        ws = self._host.workspace
        source = session_dir(ws, target or self._current_id())
        report = fork_session(ws, source, at)
        agent = self._host.agent()  # the fork is made current with its strategy: the agent's part
        if strategy is not None:
            agent.settings.strategy = strategy  # the runs of this kernel, the fork's included
        strategy = agent.settings.strategy
        agent.resume(report.session_id)
        if agent.session is not None:
            agent.session.context.use(strategy)
        # Short lines, each session id whole on its line: a narrow output wraps a long line
        # anywhere, a session id too ("…resume 20261" / "207-…").
        print(
            f"forked session {safe_line(report.source_id)} at step {report.step} of {report.steps}\n"
            f"→ new session {report.session_id} (strategy {strategy})\n"
            f"  {_count(report.messages, 'message')}, {_count(report.pins, 'pin')}; the next %agent continues the fork\n"
            "  the original is unchanged; to go back to it:\n"
            f"  %sessions resume {safe_line(report.source_id)}"
        )
        for path in report.missing:
            print(f"! {safe_line(path)}: not copied (missing or altered in the original)")


LAG_COUNT_LISTED = 1 << 20  # bytes behind whose entries a listing counts


def _index_lag(host: Any, sizes: dict[str, int] | None = None) -> str:
    """How far the history index is behind the logs (the background indexer is told to catch up).

    ``host``: a ``SessionHost`` or an ``Agent`` (anything with ``history`` and ``workspace``);
    ``sizes``: the logs' sizes as the listing read them (no second stat of each log)."""
    index = host.history
    # More behind than LAG_COUNT_LISTED: the bytes are said, no log is read.
    lag = index.lag(count=LAG_COUNT_LISTED, sizes=sizes)
    if not lag:
        return ""
    ws = host.workspace  # resolved once, not once per session
    index.schedule(*(session_dir(ws, sid) for sid in lag))
    entries = sum(v.entries for v in lag.values() if v.counted)
    uncounted = sum(v.bytes for v in lag.values() if not v.counted)
    parts = [f"{entries:,} entries"] if entries else []
    if uncounted:
        parts.append(f"{_size(uncounted)} of log")
    sessions = f"{len(lag)} session{'s' if len(lag) != 1 else ''}"
    return f"history index: {' and '.join(parts)} behind in {sessions} (catching up in the background)"


# An effective conversation longer than this is listed by reading its shown messages by offset
# (``session.effective_rows``) rather than by a replay that builds every message (issue 48).
READ_BY_OFFSET = 1_000


class _Shown:
    """The messages ``%sessions show`` lists, and the head line's figures."""

    def __init__(
        self, count: int, messages: Any, shown: list[int | None], size: int, model: str | None
    ) -> None:
        self.count, self.messages, self.shown, self.bytes, self.model = count, messages, shown, size, model
        self.timeline: Any = None

    @classmethod
    def read(cls, path: Path, logged: Any, *, limit: int | None, tail: int | None) -> _Shown:
        if not logged.problems and logged.effective_messages > READ_BY_OFFSET:
            from ..session.effective_rows import effective_messages

            count = logged.effective_messages
            shown = _window(count, limit=limit, tail=tail)
            found = effective_messages(path, [i for i in shown if i is not None], expected=count)
            if found is not None:
                messages, timeline = found
                out = cls(count, messages, shown, (path / LOG_NAME).stat().st_size, logged.last_model)
                out.timeline = timeline
                return out
        from ..session.loader import load_session

        loaded = load_session(path)  # from the last replace
        shown = _window(len(loaded.messages), limit=limit, tail=tail)
        return cls(len(loaded.messages), loaded.messages, shown, loaded.bytes, loaded.last_model)
