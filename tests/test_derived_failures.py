"""Derived data that cannot be kept never fails a run, and is never silent either.

The session's sidecar (``meta.json``) and its timeline index are rebuilt from the log by
any reader, so the writer swallows their failures; a bug there is said as a warning at the
end of the run that met it (the writer's notices), and the log itself stays whole.
"""

from __future__ import annotations

import json
from pathlib import Path

from pseudoclaude_nb.runner import Notice
from pseudoclaude_nb.session import load_session, sidecar, timeline
from pseudoclaude_nb.session.timeline import index as timeline_index
from tests.scripts import script, turn
from tests.scripts import scripted_agent as make_agent


def _script(workspace: Path) -> str:
    path = workspace / "s.json"
    path.write_text(json.dumps(script(turn("answer"))), encoding="utf-8")
    return str(path)


def _warnings(events: list) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice) and e.level == "warning"]


def test_a_sidecar_that_cannot_be_updated_is_said_at_the_runs_end(workspace: Path, agents, monkeypatch):
    agent = make_agent(workspace, _script(workspace))
    agents.append(agent)

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the sidecar")

    monkeypatch.setattr(sidecar, "refresh", broken)
    events: list = []
    summary = agent.run("question", listeners=[events.append])

    assert summary.status == "done"
    (said,) = [t for t in _warnings(events) if "meta.json" in t]
    assert f"session {agent.session.id}" in said and "RuntimeError: a bug in the sidecar" in said
    monkeypatch.undo()
    assert [m.content for m in load_session(agent.session.dir).messages] == ["question", "answer"]
    # Said once: the next run, whose sidecar updates again, says nothing of it.
    events.clear()
    agent.run("again", listeners=[events.append])
    assert not [t for t in _warnings(events) if "meta.json" in t]


def test_a_timeline_index_that_cannot_be_kept_is_said_at_the_runs_end(workspace: Path, agents, monkeypatch):
    agent = make_agent(workspace, _script(workspace))
    agents.append(agent)
    monkeypatch.setattr(timeline_index, "MIN_BYTES", 0)  # kept after every run, not every 4 MB

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(timeline, "_keep", broken)
    events: list = []
    assert agent.run("question", listeners=[events.append]).status == "done"

    (said,) = [t for t in _warnings(events) if "timeline index" in t]
    assert f"session {agent.session.id}" in said and "No space left on device" in said
