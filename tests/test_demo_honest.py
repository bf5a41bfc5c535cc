"""The demo says nothing that did not happen (issue 44), through ``%agent`` in a real IPython shell.

In mode ``ask`` the tour asks once for all of it: answered no (or with no one to answer) it
stops at that first refusal, says so and that the tour needs ``--mode auto``, and writes
nothing; answered yes it plays to the end without asking again. Sentences that depend on what
a tool did follow what it did: with a window too large to compact, or a spill limit too large
to spill, the end says nothing was replaced or spilled.
"""

from __future__ import annotations

from pathlib import Path

from IPython.utils.capture import capture_output

from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.providers.demo_script import DEMO_PROMPT

# Sentences of the tour that claim an effect; none may be said where it did not happen.
CLAIMS = ("Both files are in place", "spilled", "Done — all 4 tests pass", "replaced by a summary")


class OneAnswer:
    """The person at the keyboard: answers every question with ``answer``, counting them."""

    def __init__(self, answer: str | None) -> None:
        self.answer, self.prompts = answer, []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if self.answer is None:
            raise EOFError  # no stdin
        return self.answer


def _demo(ip, answer: str | None, options: str = "--mode ask") -> tuple[str, OneAnswer]:
    user = OneAnswer(answer)
    current_agent(ip).ask = user
    with capture_output() as out:
        ip.run_line_magic("agent", f'--provider demo {options} --new "{DEMO_PROMPT}"')
    return out.stdout, user


def test_ask_mode_answered_no_stops_the_tour_at_once_and_claims_nothing(ip, workspace: Path) -> None:
    text, user = _demo(ip, "n")
    assert len(user.prompts) == 1  # one question for the whole tour
    assert "The demo tour writes 4 files (stats.py, test_stats.py" in user.prompts[0]
    assert "allow all of it for this run? [y/N]" in user.prompts[0]
    assert (
        "The tour stops here: `write_file` of `stats.py` was refused (the user did not allow the tour)"
        in text
    )
    assert "--mode auto" in text
    assert not [claim for claim in CLAIMS if claim in text]
    assert not (workspace / "stats.py").exists() and not (workspace / "test_stats.py").exists()


def test_ask_mode_with_no_one_to_answer_stops_the_same_way(ip, workspace: Path) -> None:
    text, user = _demo(ip, None)
    assert len(user.prompts) == 1
    assert "(permission mode 'ask' needs an answer but this kernel has no stdin)" in text
    assert "--mode auto" in text
    assert not [claim for claim in CLAIMS if claim in text]


def test_ask_mode_answered_yes_once_plays_the_whole_tour(ip, workspace: Path) -> None:
    text, user = _demo(ip, "y")
    assert len(user.prompts) == 1  # not one per change: nine changes, one question
    assert "Done — all 4 tests pass" in text and "replaced by a summary" in text
    assert "return sum(xs) / len(xs)" in (workspace / "stats.py").read_text()


def test_a_window_too_large_to_compact_is_told_as_such(ip, workspace: Path) -> None:
    text, _ = _demo(ip, None, "--mode auto --context-window 400000")
    assert "Done — all 4 tests pass" in text
    assert "replaced by a summary" not in text
    assert "This window (400,000 tokens) never reached the Layer 2 line, so nothing was replaced" in text


def test_nothing_spilled_is_told_as_such(ip, workspace: Path) -> None:
    ip.run_line_magic("config", "PseudoClaude.spill_bytes = 10_000_000")
    text, _ = _demo(ip, None, "--mode auto --context-window 400000")
    assert "came back whole" in text and "stayed whole in my context (nothing was spilled)" in text
    assert "so the host **spilled** it" not in text and "was spilled to" not in text
