"""``%sessions search`` and ``%sessions reindex``: the actions, as text for the magic to print.

Thin: the index lives in ``session.history``; these only choose the scope and phrase the answer.
"""

from __future__ import annotations

import time

from ..agent import Agent
from ..errors import ConfigError
from ..session.history_query import Hit

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
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(h.ts)) if h.ts else "?"
        what = {"text": "said", "tool_call": "called a tool", "tool_result": "tool result", "spill": "spilled result"}
        where = f"session {h.session_id} · " if all_sessions else ""
        lines.append(f"{i:>3}. {where}{h.role} {what.get(h.kind, h.kind)} · {when}")
        if h.ref:
            lines.append(f"     in {h.ref}, line {h.line}")
        lines.append(f"     {h.snippet}")
    return "\n".join(lines)


def reindex_action(agent: Agent) -> str:
    """Rebuild ``history.sqlite`` from every session log."""
    stats = agent.history.rebuild()
    noun = "session" if stats.sessions == 1 else "sessions"
    text = f"reindexed {stats.sessions} {noun} ({stats.rows:,} rows) into {agent.history.path} in {stats.seconds:.1f} s"
    return _with_notices(agent, text)


def _with_notices(agent: Agent, text: str) -> str:
    notices, agent.history.notices[:] = list(agent.history.notices), []
    return "\n".join([*(f"! {n}" for n in notices), text])
