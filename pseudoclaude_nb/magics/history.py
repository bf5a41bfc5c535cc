"""``%sessions search`` and ``%sessions reindex``: the actions, as text for the magic to print.

Thin: the index lives in ``session.history``; these only choose the scope and phrase the answer.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from ..agent import Agent
from ..errors import ConfigError
from ..session.history import ProgressCallback
from ..session.history_query import Hit
from ..textsafe import printable

SEARCH_LIMIT = 20


def search_action(agent: Agent, query: str, all_sessions: bool = False) -> str:
    """Matches for ``query`` in the current session, or with ``all_sessions`` in every one."""
    if not query.strip():
        raise ConfigError('%sessions search needs a query: %sessions search "text to find" [--all]')
    if all_sessions:
        session_id, scope = None, "all sessions of this workspace"
    elif agent.session is not None:
        session_id, scope = agent.session.id, f"session {agent.session.id}"
    else:
        raise ConfigError(
            "no current session to search; add --all to search every session, or %sessions resume ID first"
        )
    hits = agent.history.search(query, session_id=session_id, limit=SEARCH_LIMIT)
    text = hits_for_people(hits, query, scope, all_sessions=all_sessions)
    if not hits and not all_sessions:
        text += " Add --all to search every session."
    return _with_notices(agent, text)


def hits_for_people(hits: list[Hit], query: str, scope: str, *, all_sessions: bool = False) -> str:
    """The matches as a person reads them: the scope said once, no 32-hex ids.

    (The model's ``search_history`` tool gets ``render_hits``, with the full ids it needs.)
    """
    if not hits:
        return f"no match for {query!r} in {scope}."
    lines = [f"{len(hits)} match{'es' if len(hits) != 1 else ''} for {query!r} in {scope}:"]
    for i, h in enumerate(hits, 1):
        try:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(h.ts)) if h.ts else "?"
        except (OverflowError, ValueError, OSError):  # a time no calendar holds
            when = "?"
        what = {
            "text": "said",
            "tool_call": "called a tool",
            "tool_result": "tool result",
            "spill": "spilled result",
        }
        where = f"session {h.session_id} · " if all_sessions else ""
        # The snippet and the names come from logs, maybe a cloned repository's: escaped.
        said = printable(f"{where}{h.role} {what.get(h.kind, h.kind)}", one_line=True)
        lines.append(f"{i:>3}. {said} · {when}")
        if h.ref:
            lines.append(f"     in {printable(str(h.ref), one_line=True)}, line {h.line}")
        lines.append(f"     {printable(h.snippet, one_line=True)}")
    return "\n".join(lines)


def reindex_action(agent: Agent, progress: ProgressCallback | None = None) -> str:
    """Rebuild ``history.sqlite`` from every session log; ``progress`` is told (bytes done, bytes in all)."""
    stats = agent.history.rebuild(progress=progress)
    noun = "session" if stats.sessions == 1 else "sessions"
    mb = stats.log_bytes / 1e6
    rate = f", {mb / stats.seconds:,.1f} MB/s" if stats.seconds > 0 and mb >= 1 else ""
    size = f"; index {stats.index_bytes / 1e6:,.1f} MB" + (
        f" ({stats.index_bytes / stats.log_bytes:.2f}× the logs)" if stats.log_bytes else ""
    )
    text = (
        f"reindexed {stats.sessions} {noun} ({stats.rows:,} rows, {mb:,.1f} MB of logs) into "
        f"{agent.history.path} in {stats.seconds:.1f} s{rate}{size}"
    )
    return _with_notices(agent, text)


class ReindexProgress:
    """The rebuild's progress: a bar in a notebook, one rewritten text line in a terminal."""

    def __init__(self, notebook: bool, out: TextIO | None = None) -> None:
        self.notebook = notebook
        self.out = out if out is not None else sys.stdout
        self.bar: Any = None
        self._last = -1.0

    def __call__(self, done: int, total: int) -> None:
        fraction = done / total if total else 1.0
        if self.notebook:
            if self.bar is None:
                import ipywidgets
                from IPython.display import display

                self.bar = ipywidgets.FloatProgress(min=0.0, max=1.0, description="reindex")
                self.label = ipywidgets.Label()
                display(ipywidgets.HBox([self.bar, self.label]))
            self.bar.value = fraction
            self.label.value = f"{done / 1e6:,.1f} of {total / 1e6:,.1f} MB"
            return
        if fraction - self._last < 0.01 and done < total:
            return  # a line per percent is enough
        self._last = fraction
        width = 30
        filled = int(width * fraction)
        self.out.write(
            f"\rreindex [{'#' * filled}{'.' * (width - filled)}] {fraction:4.0%} "
            f"{done / 1e6:,.1f} of {total / 1e6:,.1f} MB"
        )
        self.out.flush()

    def finish(self) -> None:
        if self.notebook and self.bar is not None:
            self.bar.bar_style = "success"
            self.bar.value = 1.0
        elif not self.notebook and self._last >= 0:
            self.out.write("\n")
            self.out.flush()


def _with_notices(agent: Agent, text: str) -> str:
    notices, agent.history.notices[:] = list(agent.history.notices), []
    return "\n".join([*(f"! {n}" for n in notices), text])
