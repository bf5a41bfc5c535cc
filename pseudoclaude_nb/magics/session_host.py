"""What ``%sessions`` works with: the workspace, the current session, the history index — and
the agent only when an action needs it (issue 34).

Building the agent imports its whole world (the context manager, the providers, pydantic's
message models, the widgets: ~0.4–0.5 s in a fresh kernel), where ``%sessions list`` needs
the sidecars and ``resume --last`` one sidecar and a lock. So the kernel's ``%sessions``
holds a ``SessionHost``: before the agent is built it answers from the settings and the
files; once the agent exists (the first ``%agent``, ``%context``, …) every answer is the
agent's, as before.

``resume`` before the agent exists takes the session's writer lock at once (so no other
kernel can open it in between, and ``%sessions list`` shows it "current"), says what its
sidecar says (the counts and problems of a full replay), and leaves loading the
conversation to whatever builds the agent next: ``adopt`` releases the lock and resumes the
agent, which replays the log under its own lock. Between the two the lock is free for the
time of one ``flock`` call in this process.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..workspace import resolve_workspace, session_dir

if TYPE_CHECKING:
    from ..agent import Agent
    from ..history import HistoryIndex


@dataclass
class Resumed:
    """What ``%sessions resume`` says: the session, its effective messages, its last time, its problems."""

    session_id: str
    messages: int
    last_ts: float | None
    problems: list[str] = field(default_factory=list)


@dataclass
class _Pending:
    """A resume the agent has still to load: the session and the writer lock held for it."""

    path: Path
    lock_fd: int

    @property
    def id(self) -> str:
        return self.path.name


class SessionHost:
    """The kernel's sessions, with or without its agent (see the module's docstring)."""

    def __init__(
        self,
        settings: Any,
        notebook_file: str | None = None,
        *,
        build: Callable[[], Agent] | None = None,
        built: Callable[[], Agent | None] | None = None,
    ) -> None:
        self._settings = settings
        self.notebook_file = notebook_file
        self._build = build
        self._built = built or (lambda: None)
        self._history: HistoryIndex | None = None
        self._pending: _Pending | None = None

    @classmethod
    def over(cls, agent: Agent) -> SessionHost:
        """A host over an agent built already (the bench, tests, a power user's own ``Agent``)."""
        return cls(agent.settings, agent.notebook_file, build=lambda: agent, built=lambda: agent)

    # --- what every action reads ------------------------------------------------------------

    @property
    def settings(self) -> Any:
        agent = self._built()
        return agent.settings if agent is not None else self._settings

    @property
    def workspace(self) -> Path:
        agent = self._built()
        if agent is not None:
            return agent.workspace
        return resolve_workspace(self._settings.workspace or None, notebook_file=self.notebook_file)

    @property
    def current_id(self) -> str | None:
        """The current session's id: the agent's, or the one a resume left for it to load."""
        agent = self._built()
        if agent is not None:
            return agent.session.id if agent.session is not None else None
        return self._pending.id if self._pending is not None else None

    @property
    def history(self) -> HistoryIndex:
        """The history index of the workspace: the agent's once it exists, else the host's own."""
        agent = self._built()
        if agent is not None:
            return agent.history
        ws = self.workspace
        if self._history is None or self._history.workspace != ws:
            from ..history import HistoryIndex

            if self._history is not None:
                self._history.close()
            self._history = HistoryIndex(ws, background=True)  # as the agent makes its own
        return self._history

    def agent(self) -> Agent:
        """The kernel's agent, built now if need be (which also loads a pending resume)."""
        if self._build is None:
            raise RuntimeError("this SessionHost has no agent to build")
        return self._build()

    # --- the actions that change the current session ------------------------------------------

    def resume(self, session_id: str | None) -> Resumed:
        """Make ``session_id`` (``None``: the latest) current for the next ``%agent``."""
        agent = self._built()
        if agent is not None:
            loaded = agent.resume(session_id)
            sid = agent.session.id if agent.session is not None else session_id or ""
            return Resumed(sid, len(loaded.messages), loaded.last_ts, loaded.problems())
        from ..session import locks
        from ..session.catalog import session_id_or_latest, session_info
        from ..session.sidecar_meta import read_meta

        ws = self.workspace
        session_id = session_id_or_latest(ws, session_id)
        path = session_dir(ws, session_id)
        if self._pending is not None and self._pending.path == path:
            self.release()  # the pending session again: read afresh (our own lock would refuse us)
        # Lock first, then read: no other process can append between the two (as Agent.resume).
        # A refusal leaves a pending resume as it was, as the agent keeps its current session.
        fd = locks.acquire(path, session_id)
        try:
            info = session_info(path)  # the sidecar, caught up from its offset if it is stale
            meta = read_meta(path) or {}
        except BaseException:
            locks.release(fd)
            raise
        self.release()
        self._pending = _Pending(path, fd)
        state = meta.get("replay")
        last_ts = state.get("last_ts") if isinstance(state, dict) else None
        problems = meta.get("problems")
        return Resumed(
            session_id,
            info.effective_messages,
            last_ts if type(last_ts) in (int, float) else None,
            [p for p in problems if isinstance(p, str)] if isinstance(problems, list) else [],
        )

    def new_session(self) -> None:
        """The next ``%agent`` starts a new session."""
        self.release()
        agent = self._built()
        if agent is not None:
            agent.new_session()

    def release(self) -> None:
        """Drop a pending resume and its lock (``%sessions new``, another resume, unload)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            from ..session import locks

            locks.release(pending.lock_fd)

    def adopt(self, agent: Agent) -> None:
        """The agent is built now: it takes over the history's backlog and the pending resume."""
        if self._history is not None:
            marked = self._history.hand_over()
            self._history = None
            if marked:
                agent.history.schedule(*marked)
        pending, self._pending = self._pending, None
        if pending is not None:
            from ..session import locks

            locks.release(pending.lock_fd)
            agent.resume(pending.id)

    def close(self) -> None:
        self.release()
        if self._history is not None:
            self._history.close()
            self._history = None
