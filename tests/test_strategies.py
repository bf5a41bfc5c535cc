"""Your own strategy (issue 45): the example of ``docs/strategies.md``, saved as a file in a
workspace, run by ``%agent --strategy MODULE:CLASS`` in a real IPython shell; it shows on the
gauge, ``%context`` and the timeline, and ``%compact --preview``, ``--apply`` and ``--undo``
work on what it does. The host keeps tool calls with their results, refuses unknown ids and
logs every change as a replace naming the strategy."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pseudoclaude_nb.magics import agent as agent_magics
from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.magics.render import TerminalRenderer
from pseudoclaude_nb.messages import pairing_problems
from pseudoclaude_nb.session import load_session
from pseudoclaude_nb.widgets import ContextGauge
from tests.scripts import read_log, script, turn
from tests.scripts import run_magic as run

DOCS = Path(__file__).resolve().parents[1] / "docs" / "strategies.md"
WINDOW = 20_000  # half of it: the example's line
READS = 5


def example() -> str:
    """The first Python block after "## An example" in docs/strategies.md: what a reader copies."""
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(r"## An example.*?```python\n(.*?)```", text, re.S)
    assert found is not None
    return found.group(1)


def workspace_with_example(workspace: Path) -> Path:
    (workspace / "last_two.py").write_text(example(), encoding="utf-8")
    # Each read is ~1,400 tokens: a few of them pass half the window.
    (workspace / "notes.txt").write_text("".join(f"note {i:04d} " + "y" * 40 + "\n" for i in range(100)))
    turns = [turn("", ("read_file", {"path": "notes.txt"})) for _ in range(READS)] + [turn("read them all")]
    path = workspace.parent / "reads.json"
    path.write_text(json.dumps(script(*turns, context_window=WINDOW)))
    return path


class _Both:
    """The terminal renderer and a gauge, as the notebook renderer holds one."""

    def __init__(self, gauge: ContextGauge) -> None:
        self.text, self.gauge = TerminalRenderer(), gauge

    def __call__(self, event: object) -> None:
        self.text(event)  # type: ignore[arg-type]
        self.gauge(event)


def test_the_docs_example_runs_under_agent_from_a_file_in_the_workspace(
    ip, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = workspace_with_example(workspace)
    gauge = ContextGauge()
    monkeypatch.setattr(agent_magics, "renderer_for", lambda shell, quiet=False: _Both(gauge))
    out = run(
        ip, f"agent --strategy last_two:LastTwoResults --provider scripted --script {path} --mode auto go"
    )
    assert "✓ done" in out, out
    # The host kept each call with its result, and said so; the strategy's drops were announced.
    assert "✂ last-two-results dropped" in out
    assert "a call and its results stay together" in out
    agent = current_agent(ip)
    messages = agent.session.conversation.messages()
    assert pairing_problems(messages) == []
    assert sum(m.tool_result is not None for m in messages) <= 2
    # The gauge under %agent drew the strategy's own line, at half the window.
    assert "last-two-results 10,000" in gauge.static_bundle()["text/plain"]
    # The log: every drop is one replace naming the strategy; the dropped messages stay in it.
    log = read_log(agent.session.dir)
    drops = [e for e in log if e["type"] == "replace" and e["reason"] == "drop"]
    assert drops and all(e["strategy"] == "last-two-results" for e in drops)
    assert sum(e["type"] == "message" and e.get("tool_result") is not None for e in log) >= READS
    assert load_session(agent.session.dir).messages == messages  # resume follows the drops
    # %context and --json name the strategy and its line; the timeline shows the drop markers.
    assert "last-two-results at 10,000" in run(ip, "context")
    assert json.loads(run(ip, "context --json"))["strategy"] == "last-two-results"
    assert "replace (drop)" in run(ip, "sessions timeline")


def test_the_docs_example_can_be_previewed_applied_and_undone(ip, workspace: Path) -> None:
    path = workspace_with_example(workspace)
    run(ip, f"agent --strategy last_two:LastTwoResults --provider scripted --script {path} --mode auto go")
    agent = current_agent(ip)
    results = lambda: sum(m.tool_result is not None for m in agent.session.conversation.messages())  # noqa: E731
    assert results() <= 2
    # The last drop taken back: the results it took out are in the conversation again.
    assert "undid the drop of" in run(ip, "compact --undo")
    restored = results()
    assert restored > 2
    log = (agent.session.dir / "conversation.jsonl").read_bytes()
    shown = run(ip, "compact --preview")
    assert "last-two-results drop preview (nothing was written)" in shown and "drop" in shown
    assert (agent.session.dir / "conversation.jsonl").read_bytes() == log  # a preview writes nothing
    assert results() == restored
    assert "dropped" in run(ip, "compact --apply") and results() == 2
    assert "undid the drop of" in run(ip, "compact --undo") and results() == restored
    assert pairing_problems(agent.session.conversation.messages()) == []


def test_the_public_api_imports_nothing_heavy() -> None:
    """A strategy file imports ``pseudoclaude_nb.strategies``: it must load in a blink (no
    pydantic, no providers, no agent)."""
    import subprocess
    import sys

    code = (
        "import sys, pseudoclaude_nb.strategies as s; "
        "print(sorted(m for m in ('pydantic', 'pseudoclaude_nb.agent', 'pseudoclaude_nb.context.host') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_demo_plays_compacts_story_under_a_strategy_of_your_own(workspace: Path) -> None:
    from pseudoclaude_nb.providers import make_provider
    from pseudoclaude_nb.providers.demo_script import build_demo_script

    demo = make_provider("demo", strategy="last_two:LastTwoResults")  # was a ValueError
    turns = [t.text for t in demo.script.turns]  # type: ignore[attr-defined]
    assert turns == [t["text"] for t in build_demo_script("compact")["turns"]]
