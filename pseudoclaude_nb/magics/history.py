"""``%sessions search`` and ``%sessions reindex``: the actions, as text or tables for the magic to show.

Thin: the index lives in ``history``; these only choose the scope and phrase the answer.
Each takes the kernel's ``SessionHost`` (or an ``Agent``, as callers did before the host):
neither needs the agent built (issue 34).
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import ConfigError
from .session_host import SessionHost
from .tables import Column, Part, Table, bundle, json_unescaped

if TYPE_CHECKING:
    from ..agent import Agent
    from ..history import ProgressCallback
    from ..history.query import Hit

SEARCH_LIMIT = 20


def double_quoted(query: str) -> str:
    """A query wrapped in single quotes as the phrase it means. IPython hands a magic its words
    with their quotes, and the index reads only double quotes as a phrase: ``'is not the same'``
    was searched with its quotes, matched nothing, and verified every row its words are in."""
    if len(query) >= 2 and query[0] == query[-1] == "'" and "'" not in query[1:-1] and '"' not in query:
        return f'"{query[1:-1]}"'
    return query


def _host(where: SessionHost | Agent) -> SessionHost:
    return where if isinstance(where, SessionHost) else SessionHost.over(where)


def search_action(agent: SessionHost | Agent, query: str, all_sessions: bool = False) -> str:
    """Matches for ``query`` in the current session, or with ``all_sessions`` in every one, as text."""
    return bundle(*search_parts(agent, query, all_sessions))["text/plain"]


def search_parts(agent: SessionHost | Agent, query: str, all_sessions: bool = False) -> list[Part]:
    """The matches as ``tables`` parts: the notices, the scope said once, a table of hits."""
    host = _host(agent)
    if not query.strip():
        raise ConfigError('%sessions search needs a query: %sessions search "text to find" [--all]')
    query = double_quoted(query.strip())
    if all_sessions:
        session_id, scope = None, "all sessions of this workspace"
    elif host.current_id is not None:
        session_id, scope = host.current_id, f"session {host.current_id}"
    else:
        raise ConfigError(
            "no current session to search; add --all to search every session, or %sessions resume ID first"
        )
    history = host.history
    hits = history.search(query, session_id=session_id, limit=SEARCH_LIMIT)
    parts = hits_for_people(hits, query, scope, all_sessions=all_sessions)
    if not hits and not all_sessions and isinstance(parts[-1], str):
        parts[-1] += " Add --all to search every session."
    notices = history.take_notices()
    return [*(f"! {n}" for n in notices), *parts]


_WHAT = {
    "text": "said",
    "tool_call": "called a tool",
    "tool_result": "tool result",
    "spill": "spilled result",
}


def hits_for_people(hits: list[Hit], query: str, scope: str, *, all_sessions: bool = False) -> list[Part]:
    """The matches as a person reads them: the scope said once, no 32-hex ids, a table of hits.

    (The model's ``search_history`` tool gets ``render_hits``, with the full ids it needs.)
    """
    if not hits:
        return [f"no match for {query!r} in {scope}."]
    columns = [Column("#", right=True), Column("when"), Column("who"), Column("match")]
    if all_sessions:
        columns.insert(1, Column("session", mono=True))
    table = Table(tuple(columns), indent="  ")
    for i, h in enumerate(hits, 1):
        try:
            when = time.strftime("%Y-%m-%d %H:%M", time.localtime(h.ts)) if h.ts else "?"
        except (OverflowError, ValueError, OSError):  # a time no calendar holds
            when = "?"
        # A tool call is indexed as its name and its arguments as JSON: read back, a proposed
        # cell's "a\nb" shows as two lines, not as an escaped string.
        snippet = json_unescaped(h.snippet) if h.kind == "tool_call" else h.snippet
        if h.ref:
            snippet = f"in {h.ref}, line {h.line}\n{snippet}"
        cells = [str(i), when, f"{h.role} {_WHAT.get(h.kind, h.kind)}", snippet]
        if all_sessions:
            cells.insert(1, h.session_id)
        table.add(*cells)  # the snippet and the names come from logs: tables escapes them
    return [f"{len(hits)} match{'es' if len(hits) != 1 else ''} for {query!r} in {scope}:", table]


def reindex_action(agent: SessionHost | Agent, progress: ProgressCallback | None = None) -> str:
    """Rebuild ``history.sqlite`` from every session log; ``progress`` is told (bytes done, bytes in all)."""
    history = _host(agent).history
    stats = history.rebuild(progress=progress)
    noun = "session" if stats.sessions == 1 else "sessions"
    mb = stats.log_bytes / 1e6
    rate = f", {mb / stats.seconds:,.1f} MB/s" if stats.seconds > 0 and mb >= 1 else ""
    size = f"; index {stats.index_bytes / 1e6:,.1f} MB" + (
        f" ({stats.index_bytes / stats.log_bytes:.2f}× the logs)" if stats.log_bytes else ""
    )
    text = (
        f"reindexed {stats.sessions} {noun} ({stats.rows:,} rows, {mb:,.1f} MB of logs) into "
        f"{history.path} in {stats.seconds:.1f} s{rate}{size}"
    )
    return _with_notices(history, text)


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


def _with_notices(history: Any, text: str) -> str:
    notices = history.take_notices()
    return "\n".join([*(f"! {n}" for n in notices), text])
