"""``%sessions search`` and ``%sessions reindex``: the actions, as text for the magic to print.

Thin: the index lives in ``session.history``; these only choose the scope and phrase the answer.
"""

from __future__ import annotations

from ..agent import Agent
from ..errors import ConfigError
from ..session.history_query import render_hits

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
    text = render_hits(hits, query, scope)
    if not hits and not all_sessions:
        text += " Add --all to search every session."
    return _with_notices(agent, text)


def reindex_action(agent: Agent) -> str:
    """Rebuild ``history.sqlite`` from every session log."""
    stats = agent.history.rebuild()
    noun = "session" if stats.sessions == 1 else "sessions"
    text = f"reindexed {stats.sessions} {noun} ({stats.rows:,} rows) into {agent.history.path} in {stats.seconds:.1f} s"
    return _with_notices(agent, text)


def _with_notices(agent: Agent, text: str) -> str:
    notices, agent.history.notices[:] = list(agent.history.notices), []
    return "\n".join([*(f"! {n}" for n in notices), text])
