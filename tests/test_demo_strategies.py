"""The offline demo under each strategy, through the real demo path (issue 17).

``python -m pseudoclaude_nb demo --strategy …`` runs the magics in a real IPython shell,
so what is checked here is what a newcomer reads: under rollover the reminder comes after
real work (not at step 1, as it did when the 15,000-token threshold was applied to the
demo's 17,000-token base limit), the model hands off with ``new_context``, and the
narration says so; under compact it says a summary replaced the older turns.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pseudoclaude_nb.context.rollover_budget import reminder_threshold_for
from pseudoclaude_nb.context.settings import CompactSettings
from pseudoclaude_nb.providers.demo_script import build_demo_script
from pseudoclaude_nb.providers.scripted import load_script
from pseudoclaude_nb.tools.rollover import NewContextArgs
from tests.demo_support import run_demo


def _demo(tmp_path: Path, strategy: str) -> tuple[str, list[dict]]:
    env = dict(os.environ, IPYTHONDIR=str(tmp_path / "ipython"))
    proc = run_demo(tmp_path, "--workspace", "ws", "--strategy", strategy, env=env)
    log_line = next(line for line in proc.stdout.splitlines() if line.startswith("session log: "))
    log = Path(log_line.removeprefix("session log: "))
    return proc.stdout, [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def _lines_before(out: str, marker: str) -> list[str]:
    lines = out.splitlines()
    return lines[: next(i for i, line in enumerate(lines) if marker in line)]


def test_rollover_demo_is_reminded_after_work_and_hands_off_to_a_fresh_window(tmp_path: Path) -> None:
    out, log = _demo(tmp_path, "rollover")
    assert "✓ done · 11 steps" in out
    # The reminder: once per window, not before the first log page was read (step 7).
    reminders = [i for i, line in enumerate(out.splitlines()) if "context rollover reminder" in line]
    assert len(reminders) == 1, out
    before = _lines_before(out, "context rollover reminder")
    assert sum(line.startswith("→ ") for line in before) == 7  # every call up to the first page
    assert "→ read_file(path='sample_run.log', offset=2001" in before[-1]
    assert "context rollover fallback" not in out  # the model answered the reminder: no pruning
    # The model's own handoff, committed before the next step; no summary anywhere.
    assert "↻ rolled over to a new window with the model's handoff" in out
    # issue 31: the handoff says what it costs the prompt cache, before it is committed
    assert any("[info] this handoff invalidates ~" in line for line in _lines_before(out, "↻ rolled over"))
    assert "% of the steps' input) · cost $" in out and " as if claude-sonnet-4-5 (cache saved $" in out
    # The hand-off line comes while new_context runs; its result still reads as its own line.
    assert "\n↻ the model handed off (new_context, 3 related files)" in out
    assert "\n→ new_context(handoff=" in out.split("↻ the model handed off")[1]
    assert "compacted" not in out
    commits = [e for e in log if e["type"] == "rollover" and e.get("phase") == "commit"]
    assert [c["reason"] for c in commits] == ["model"]
    assert not [e for e in log if e["type"] == "compact"]
    # The narration tells what happened under rollover, and nothing that did not.
    final = [e for e in log if e["type"] == "message" and e["role"] == "assistant"][-1]["content"]
    assert "handed off to a fresh window with `new_context`" in final
    assert "replaced by a summary" not in final and "replaced by a summary" not in out
    # The task is still done for real, in the new window.
    assert "2997 ok rows, 3 warning rows skipped" in json.dumps(log)
    assert "remind 6,800 · base 17,000 · hard 30,000" in out  # %context after the run


def test_compact_demo_says_a_summary_replaced_the_older_turns(tmp_path: Path) -> None:
    out, log = _demo(tmp_path, "compact")
    assert "⟳ compacted (auto)" in out and "rolled over" not in out
    assert "[info] this compaction invalidates ~" in _lines_before(out, "⟳ compacted (auto)")[-1]
    final = [e for e in log if e["type"] == "message" and e["role"] == "assistant"][-1]["content"]
    assert "replaced by a summary" in final and "new_context" not in final
    assert not [e for e in log if e["type"] == "rollover"]


def test_the_agent_magic_plays_the_strategys_script(ip, capsys) -> None:
    """``%agent --strategy rollover`` with the demo provider gets the rollover script too."""
    from pseudoclaude_nb.magics import current_agent
    from pseudoclaude_nb.providers.demo_script import DEMO_PROMPT

    ip.run_line_magic("agent", f'--provider demo --mode auto --new --strategy rollover "{DEMO_PROMPT}"')
    out = capsys.readouterr().out
    assert out.count("context rollover reminder") == 1
    assert "with the model's handoff" in out
    agent = current_agent(ip)
    assert agent.session.context.shared.rollovers == 1 and agent.session.context.shared.compactions == 0


# --- the rollover script itself ---------------------------------------------------------------


def test_the_rollover_script_hands_off_with_a_valid_new_context_call() -> None:
    script = build_demo_script("rollover")
    parsed, _ = load_script(script)
    calls = [c for t in parsed.turns for c in t.tool_calls if c.name == "new_context"]
    assert len(calls) == 1
    args = NewContextArgs.model_validate(calls[0].arguments)
    assert {f.path for f in args.related_files} == {"stats.py", "test_stats.py", "sample_run.log"}
    assert all(r.source == "user" for r in args.handoff.confirmed_requirements)
    assert build_demo_script("rollover") == script  # fresh and deterministic
    assert build_demo_script() == build_demo_script("compact")
    # No summary in the run; one for a %compact after it, about the finished task.
    (summary,) = script["summaries"]
    assert "ran 4 tests: OK" in summary and "Not fixed yet" not in summary


def test_an_unknown_strategy_has_no_demo_script() -> None:
    with pytest.raises(ValueError, match="rollover"):
        build_demo_script("nonsense")


# --- the reminder threshold, per window -----------------------------------------------------------


@pytest.mark.parametrize(
    ("window", "remind", "base"),
    [
        (50_000, 6_800, 17_000),  # the demo: 60 % of 17,000 = 10,200 before the base limit
        (60_000, 12_000, 27_000),  # notebook 05: 60 % of 27,000 is over 15,000, so 15,000
        (200_000, 152_000, 167_000),  # the articles' table
    ],
)
def test_the_reminder_is_at_most_sixty_percent_of_the_base_limit(window: int, remind: int, base: int) -> None:
    marks = CompactSettings(context_window=window).rollover_limits
    assert (marks["remind"], marks["base"]) == (remind, base)
    budget = CompactSettings(context_window=window).budget(remind - 1)
    assert budget.remind_at == remind


def test_a_smaller_configured_threshold_is_kept() -> None:
    assert reminder_threshold_for(17_000, 5_000) == 5_000
    assert (
        CompactSettings(context_window=50_000, reminder_threshold=5_000).rollover_limits["remind"] == 12_000
    )
    assert reminder_threshold_for(0) == 0 and reminder_threshold_for(-5) == 0


def test_the_reminder_threshold_is_a_setting_context_shows(ip, capsys) -> None:
    ip.run_line_magic("config", "PseudoClaude.strategy = 'rollover'")
    ip.run_line_magic("config", "PseudoClaude.context_window = 100000")
    ip.run_line_magic("config", "PseudoClaude.reminder_threshold = 4000")
    capsys.readouterr()
    ip.run_line_magic("context", "")
    out = capsys.readouterr().out
    assert "remind 63,000 · base 67,000 · hard 80,000" in out
