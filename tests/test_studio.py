"""``%studio`` and the context studio, in process (the docked panel: tests/test_browser_studio.py).

The studio only reads: it follows whichever session is current, takes a run's events as a
listener, and shows a compaction that happened between two refreshes as the drop it was.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from pseudoclaude_nb.magics import current_agent
from tests.test_browser_studio import LOG, SCRIPT


def _setup(ip, workspace: Path) -> None:
    for name in "abc":
        (workspace / f"{name}.log").write_text(LOG)
    (workspace / "s.json").write_text(json.dumps(SCRIPT))
    for key, value in (("summary_reserve", 1000), ("safety_margin", 1000), ("recent_tokens", 600)):
        ip.run_line_magic("config", f"PseudoClaude.{key} = {value}")
    ip.run_line_magic("config", "PseudoClaude.notebook_context = False")


def test_the_studio_follows_the_session_and_shows_the_drop(ip, workspace: Path) -> None:
    from pseudoclaude_nb.widgets.studio import ContextStudio

    _setup(ip, workspace)
    agent = current_agent(ip)
    studio = ContextStudio(agent)
    assert "no session yet" in studio.head.value and studio.timeline is None
    with capture_output():
        agent.run("read the logs", new=True, provider="scripted", script="s.json", context_window=6000,
                  permission_mode="auto", listeners=[studio])  # fmt: skip
    state = studio.gauge.state
    assert state.compactions == 1 and state.last_drop is not None and state.last_drop[0] == "compacted"
    studio.refresh()  # after the cell
    assert agent.session.id in studio.head.value
    assert (
        studio.gauge.state.compactions == 1
        and studio.gauge.state.peak_tokens > studio.gauge.state.estimated_tokens
    )
    assert studio.timeline is not None and studio.timeline.timeline.count > 0
    assert "4 requests" in studio.cost.value or "5 requests" in studio.cost.value
    drawn = studio.timeline
    studio.refresh()  # nothing appended: the same timeline, where its scrubber is
    assert studio.timeline is drawn
    ip.run_line_magic("context", "pin keep answers short")
    studio.refresh()
    assert "keep answers short" in studio.pins.value


def test_a_compaction_between_refreshes_is_shown_as_a_drop(ip, workspace: Path) -> None:
    from pseudoclaude_nb.widgets.studio import ContextStudio

    _setup(ip, workspace)
    agent = current_agent(ip)
    with capture_output():
        agent.run("read the logs", new=True, provider="scripted", script="s.json", context_window=6000,
                  permission_mode="auto")  # fmt: skip
    studio = ContextStudio(agent)  # opened after the run: it saw no event
    before = studio.gauge.state
    studio.gauge.state = type(before)(**{**before.__dict__, "compactions": 0, "estimated_tokens": 9_999})
    studio.refresh()
    assert studio.gauge.state.last_drop == ("compacted", 9_999, studio.gauge.state.estimated_tokens)


def test_studio_magic_outside_a_notebook_and_its_mistakes(ip, workspace: Path) -> None:
    with capture_output() as out:
        ip.run_line_magic("studio", "")
        ip.run_line_magic("studio", "close")
    assert (
        out.stdout.startswith("context ▕") and "no context studio is open (%studio opens one)" in out.stdout
    )
    with pytest.raises(UsageError, match="use %studio, %studio --here or %studio close"):
        ip.run_line_magic("studio", "dock")
