"""Mode ``ask``: while the user answers the permission prompt, the tool line says it waits
for permission (not "running"), and the tool's time starts when the answer comes.

Real runs (the scripted provider, the real bash tool, the real Permissions) with a fake
``input`` that looks at what the user sees when the prompt is out, then takes its time.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from IPython.core import display_functions
from IPython.utils.capture import capture_output

from pseudoclaude_nb.events import PermissionAnswered, PermissionAsked, ToolFinished, ToolStarted
from pseudoclaude_nb.magics.render import NotebookRenderer, TerminalRenderer
from tests.scripts import script, scripted_agent, turn

THINK = 1.3  # seconds the user takes to answer: longer than one tick of the tool line
SLEEP = "sleep 0.2"


class FakeUser:
    """``input`` for the prompt: notes what was on screen, thinks, answers."""

    def __init__(self, answer: str, seen: Callable[[], str]) -> None:
        self.answer, self.seen, self.prompts, self.screens = answer, seen, [], []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        self.screens.append(self.seen())
        if self.answer == "interrupt":
            raise KeyboardInterrupt
        time.sleep(THINK)
        return self.answer


def _agent(workspace: Path, user: FakeUser, agents: list):
    path = workspace / "ask.json"
    path.write_text(json.dumps(script(turn("Sleeping:", ("bash", {"command": SLEEP})), turn("Slept."))))
    agent = scripted_agent(workspace, str(path), permission_mode="ask")
    agent.ask = user
    agents.append(agent)
    return agent


def test_terminal_says_waiting_for_permission_and_times_only_the_tool(workspace: Path, agents) -> None:
    out = io.StringIO()
    user = FakeUser("y", out.getvalue)
    events: list = []
    agent = _agent(workspace, user, agents)
    summary = agent.run("sleep a bit", listeners=[TerminalRenderer(out=out), events.append])
    assert summary.status == "done"
    (screen,) = user.screens
    # When the prompt is out, the call's line says it waits, on a line of its own.
    assert screen.endswith(f"→ bash('{SLEEP}') … ‖ waiting for permission\n")
    assert "running" not in screen
    after = out.getvalue()[len(screen) :]
    assert after.startswith(f"→ bash('{SLEEP}') … ✓")
    # The tool's time is the command's, not the user's thinking time.
    (finished,) = [e for e in events if isinstance(e, ToolFinished)]
    assert 0.1 < finished.seconds < THINK - 0.3
    assert f"({finished.seconds:.1f} s)" in after
    kinds = [
        type(e)
        for e in events
        if isinstance(e, (ToolStarted, PermissionAsked, PermissionAnswered, ToolFinished))
    ]
    assert kinds == [ToolStarted, PermissionAsked, PermissionAnswered, ToolFinished]
    assert [e.allowed for e in events if isinstance(e, PermissionAnswered)] == [True]


def test_a_refused_call_ends_its_line_at_once(workspace: Path, agents) -> None:
    out = io.StringIO()
    user = FakeUser("n", out.getvalue)
    events: list = []
    agent = _agent(workspace, user, agents)
    agent.run("sleep a bit", listeners=[TerminalRenderer(out=out), events.append])
    assert f"→ bash('{SLEEP}') … ✗ refused: the user did not allow" in out.getvalue()
    assert [e.allowed for e in events if isinstance(e, PermissionAnswered)] == [False]


@pytest.mark.script_may_remain  # interrupted at the prompt: the run never asks for the rest
def test_interrupted_at_the_prompt_the_line_says_the_call_never_ran(workspace: Path, agents) -> None:
    out = io.StringIO()
    agent = _agent(workspace, FakeUser("interrupt", out.getvalue), agents)
    summary = agent.run("sleep a bit", listeners=[TerminalRenderer(out=out)])
    assert summary.status == "interrupted"
    assert "‖ waiting for permission\n■ interrupted while waiting for permission\n" in out.getvalue()


def test_notebook_line_waits_without_ticking_then_runs_from_the_answer(
    ip, workspace: Path, agents, monkeypatch
) -> None:
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    lines: list[tuple[float, str]] = []  # (when, text/plain) of every tool-line state shown
    real_display = display_functions.display

    def spy(*objs, **kwargs):
        data = objs[0] if objs and isinstance(objs[0], dict) else {}
        if data.get("text/plain", "").startswith("→ bash("):
            lines.append((time.monotonic(), data["text/plain"]))
        return real_display(*objs, **kwargs)

    monkeypatch.setattr(display_functions, "display", spy)
    user = FakeUser("y", lambda: lines[-1][1] if lines else "")
    agent = _agent(workspace, user, agents)
    with capture_output():
        summary = agent.run("sleep a bit", listeners=[NotebookRenderer()])
    assert summary.status == "done"
    assert user.screens == [f"→ bash('{SLEEP}') ‖ waiting for permission"]
    texts = [text for _, text in lines]
    asked = texts.index(f"→ bash('{SLEEP}') ‖ waiting for permission")
    answered = next(i for i, (_, t) in enumerate(lines) if i > asked and "… running" in t)
    # No tick while the user thinks (THINK is longer than a tick): the line stays "waiting".
    assert all("waiting" in t for t in texts[asked:answered])
    assert texts[answered] == f"→ bash('{SLEEP}') … running 0 s"
    assert lines[answered][0] - lines[asked][0] >= THINK - 0.05
    assert texts[-1].startswith(f"→ bash('{SLEEP}') ✓")
