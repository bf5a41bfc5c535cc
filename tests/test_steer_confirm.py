"""Approve, edit or reject a replace at the moment it happens (issue 29, part 2).

With ``confirm_compaction`` on, a run pauses before a Layer 2 replace (automatic or forced)
and before a rollover commit, and asks its ``confirm`` callback (a notebook or terminal
passes one; the default reads ``input``). Scripted runs through the real ``Agent`` cross the
Layer 2 line with a 6,000-token window (threshold 5,000), and the rollover hard limit with
the 100,000-token window of ``test_rollover_e2e``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import StdinNotImplementedError, UsageError

from pseudoclaude_nb.context.confirm import Decision, Proposal, Review, describe, text_ask
from pseudoclaude_nb.events import Compacted, Notice, RolloverCommitted
from pseudoclaude_nb.session import load_session
from pseudoclaude_nb.widgets.confirm import proposal_html
from tests.scripts import read_log, turn, write_script
from tests.scripts import scripted_agent as make_agent

WINDOW = 6_000  # Layer 2 line at 5,000 with the reserves below
SMALL = dict(summary_reserve=500, safety_margin=500, recent_tokens=200)
TOO_LONG = {"error": "context_too_long"}
SECRET = "AKIA" + "QWERTYUIOPASDFGH"  # an AWS access key id: the log's redaction knows it


class Person:
    """A ``confirm`` callback that answers from a list and keeps what it was shown."""

    def __init__(self, *answers: Decision) -> None:
        self.answers = list(answers)
        self.asked: list[Proposal] = []

    def __call__(self, proposal: Proposal) -> Decision:
        self.asked.append(proposal)
        return self.answers.pop(0)


def of_type(entries: list[dict], kind: str) -> list[dict]:
    return [e for e in entries if e["type"] == kind]


def notices(events: list) -> list[str]:
    return [e.text for e in events if isinstance(e, Notice)]


def over_the_line(workspace: Path, agents: list, **settings):
    """An agent whose next run starts above the Layer 2 line (a long first answer)."""
    agent = make_agent(workspace, **{**SMALL, "confirm_compaction": True, **settings})
    agents.append(agent)
    path = write_script(workspace, "first", turn("long answer: " + "a" * 20_000), context_window=WINDOW)
    assert agent.run("first", script=path).status == "done"
    return agent


def second_run(workspace: Path, agent, *turns: dict, summaries=("the summary",), **run):
    path = write_script(
        workspace, "second", *(turns or (turn("done"),)), context_window=WINDOW, summaries=list(summaries)
    )
    events: list = []
    summary = agent.run("second", script=path, listeners=[events.append], **run)
    assert summary.status == "done", summary.error
    return events


def reads(n: int) -> list[dict]:
    return [turn("checking", ("read_file", {"path": "small.txt"}, f"s{k}")) for k in range(n)]


# --- Layer 2 --------------------------------------------------------------------------------------


def test_approve_commits_the_replace_as_before(workspace: Path, agents):
    agent = over_the_line(workspace, agents)
    person = Person(Decision("approve"))
    events = second_run(workspace, agent, confirm=person)

    [asked] = person.asked
    assert (asked.kind, asked.trigger, asked.text) == ("compact", "auto", "the summary")
    assert asked.after < asked.before and asked.replaced == 2 and asked.kept == 1
    assert [(e.trigger, e.ok) for e in events if isinstance(e, Compacted)] == [("auto", True)]
    entries = read_log(agent.session.dir)
    assert [e["reason"] for e in of_type(entries, "replace")] == ["compact"]
    assert [(e["trigger"], e["ok"]) for e in of_type(entries, "compact")] == [("auto", True)]
    sent = agent.last_provider.requests[-1].messages
    assert sent[0].content.startswith("<summary>\nthe summary\n</summary>")


def test_edit_commits_the_persons_text_framed_and_redacted(workspace: Path, agents):
    agent = over_the_line(workspace, agents)
    mine = f"My own summary: keep the stats module; key {SECRET} must not leak."
    person = Person(Decision("edit", mine))
    events = second_run(workspace, agent, confirm=person)

    assert [(e.trigger, e.ok) for e in events if isinstance(e, Compacted)] == [("auto", True)]
    assert any("edited text" in text for text in notices(events))
    first = agent.session.conversation.messages()[0]
    assert first.content.startswith(f"<summary>\n{mine}\n</summary>")  # framed like the model's
    assert agent.last_provider.requests[-1].messages[0].content == first.content
    # The log's summary message holds the edited text, redacted like every line.
    text = (agent.session.dir / "conversation.jsonl").read_text(encoding="utf-8")
    assert "My own summary: keep the stats module" in text and "the summary\n" not in text
    assert SECRET not in text
    loaded = load_session(agent.session.dir)
    assert "My own summary" in loaded.messages[0].content


def test_reject_replaces_nothing_asks_once_per_run_and_spares_the_breaker(workspace: Path, agents):
    agent = over_the_line(workspace, agents)
    (workspace / "small.txt").write_text("tiny\n", encoding="utf-8")
    person = Person(Decision("reject"))
    failures = agent.session.context.shared.breaker.failures
    events = second_run(workspace, agent, *reads(2), turn("done"), confirm=person)

    assert len(person.asked) == 1  # three steps above the line, one question
    entries = read_log(agent.session.dir)
    assert of_type(entries, "replace") == [] and of_type(entries, "compact") == []
    assert any("rejected by the person" in e["text"] for e in of_type(entries, "note"))
    assert any("rejected by you" in text and "goes on without it" in text for text in notices(events))
    assert agent.session.context.shared.breaker.failures == failures == 0
    assert agent.session.context.shared.compactions == 0
    assert [r.purpose for r in agent.last_provider.requests].count("summary") == 1

    # The next run asks again.
    again = Person(Decision("approve"))
    path = write_script(workspace, "third", turn("ok"), context_window=WINDOW, summaries=["later summary"])
    assert agent.run("third", script=path, confirm=again).status == "done"
    assert len(again.asked) == 1 and agent.session.context.shared.compactions == 1


@pytest.mark.parametrize("default", ["approve", "reject"])
@pytest.mark.parametrize("error", [StdinNotImplementedError, EOFError, OSError])
def test_without_stdin_the_configured_default_applies_with_a_notice(workspace: Path, agents, default, error):
    agent = over_the_line(workspace, agents, confirm_default=default)
    calls: list[str] = []

    def no_stdin(prompt: str) -> str:
        calls.append(prompt)
        raise error("stdin is not available")

    agent.ask = no_stdin  # the default confirm reads the agent's ask (input in a kernel)
    events = second_run(workspace, agent)

    assert len(calls) == 1
    said = [t for t in notices(events) if "nobody can answer" in t]
    assert len(said) == 1 and f"confirm_default = '{default}'" in said[0]
    compacts = [(e.trigger, e.ok) for e in events if isinstance(e, Compacted)]
    assert compacts == ([("auto", True)] if default == "approve" else [("auto", False)])
    assert agent.session.context.shared.breaker.failures == 0
    # Nobody answered, so nothing may say the person rejected it: the default did.
    texts = [*notices(events), *(e.error or "" for e in events if isinstance(e, Compacted))]
    assert not any("by you" in t for t in texts), texts
    logged = [e["text"] for e in of_type(read_log(agent.session.dir), "note")]
    assert not any("rejected by the person" in t for t in logged), logged
    if default == "reject":
        assert any("rejected by PseudoClaude.confirm_default (nobody could answer)" in t for t in texts)
        assert any("rejected by PseudoClaude.confirm_default" in t for t in logged)


def test_the_forced_compaction_is_asked_too(workspace: Path, agents):
    agent = over_the_line(workspace, agents, confirm_compaction=False)
    agent.settings.confirm_compaction = True
    agent.settings.safety_margin = agent.settings.summary_reserve = 100  # no automatic compaction
    person = Person(Decision("edit", "forced, edited"))
    path = write_script(workspace, "second", TOO_LONG, turn("after"), context_window=60_000, summaries=["x"])
    assert agent.run("second", script=path, confirm=person).status == "done"
    assert [p.trigger for p in person.asked] == ["forced"]
    assert agent.last_provider.requests[-1].messages[0].content.startswith("<summary>\nforced, edited\n")


@pytest.mark.script_may_remain  # "never": the rejected compaction stops the run
def test_a_rejected_forced_compaction_stops_with_advice_and_no_breaker_count(workspace: Path, agents):
    agent = over_the_line(workspace, agents)
    agent.settings.safety_margin = agent.settings.summary_reserve = 100
    person = Person(Decision("reject"))
    path = write_script(workspace, "second", TOO_LONG, turn("never"), context_window=60_000, summaries=["x"])
    events: list = []
    summary = agent.run("second", script=path, confirm=person, listeners=[events.append])
    assert summary.status == "error" and "%compact" in str(summary.error)
    assert len(person.asked) == 1
    assert any("rejected by you" in t and "too long" in t for t in notices(events))
    # Nothing compacted; the one replace takes out the prompt that got no answer (issue 32).
    assert [e["reason"] for e in of_type(read_log(agent.session.dir), "replace")] == ["edit"]
    assert agent.session.context.shared.breaker.failures == 0


@pytest.mark.script_may_remain  # "never": the rejected compaction stops the run
def test_after_a_rejection_a_prompt_too_long_is_not_asked_again(workspace: Path, agents):
    agent = over_the_line(workspace, agents)
    person = Person(Decision("reject"))
    path = write_script(
        workspace, "second", TOO_LONG, turn("never"), context_window=WINDOW, summaries=["x", "y"]
    )
    summary = agent.run("second", script=path, confirm=person)
    assert summary.status == "error" and "%compact" in str(summary.error)
    assert [p.trigger for p in person.asked] == ["auto"]
    assert [e["reason"] for e in of_type(read_log(agent.session.dir), "replace")] == ["edit"]


def test_confirm_off_never_asks(workspace: Path, agents):
    agent = over_the_line(workspace, agents, confirm_compaction=False)
    person = Person()
    agent.ask = lambda prompt: pytest.fail(f"asked: {prompt}")
    events = second_run(workspace, agent, confirm=person)
    assert person.asked == []
    assert [(e.trigger, e.ok) for e in events if isinstance(e, Compacted)] == [("auto", True)]


def test_the_option_turns_it_on_for_one_run(workspace: Path, agents):
    agent = over_the_line(workspace, agents, confirm_compaction=False)
    person = Person(Decision("reject"))
    second_run(workspace, agent, confirm=person, confirm_compaction=True)
    assert len(person.asked) == 1
    assert agent.settings.confirm_compaction is False


# --- rollover ---------------------------------------------------------------------------------------

ROLLOVER_WINDOW = 100_000  # hard limit 80,000


def used(tokens: int, t: dict) -> dict:
    return {**t, "usage": {"input_tokens": tokens, "output_tokens": 50}}


def rollover_agent(workspace: Path, agents: list, *turns: dict):
    (workspace / "budget.py").write_text("def evaluate_budget(state):\n    return 'continue'\n")
    path = write_script(workspace, "rollover", *turns, context_window=ROLLOVER_WINDOW)
    agent = make_agent(workspace, path, strategy="rollover", confirm_compaction=True)
    agents.append(agent)
    return agent


def test_rollover_commit_approved(workspace: Path, agents):
    agent = rollover_agent(
        workspace,
        agents,
        used(85_000, turn("Big read done.", ("read_file", {"path": "budget.py"}))),
        turn("Fresh."),
    )
    person = Person(Decision("approve"))
    events: list = []
    assert agent.run("fix budget.py", confirm=person, listeners=[events.append]).status == "done"
    [asked] = person.asked
    assert (asked.kind, asked.trigger) == ("rollover", "hard-limit")
    assert "Big read done." in asked.text and asked.after < asked.before
    assert [e.reason for e in events if isinstance(e, RolloverCommitted)] == ["hard-limit"]
    assert len(agent.last_provider.requests[1].messages) == 1


def test_rollover_commit_edited_keeps_the_anchors_and_the_pinned_request(workspace: Path, agents):
    agent = rollover_agent(
        workspace,
        agents,
        used(85_000, turn("Big read done.", ("read_file", {"path": "budget.py"}))),
        turn("Fresh."),
    )
    person = Person(Decision("edit", "Only this: the rule must remind once."))
    assert agent.run("fix budget.py", confirm=person).status == "done"
    text = agent.last_provider.requests[1].messages[0].content
    assert "<handoff>\nOnly this: the rule must remind once.\n</handoff>" in text
    assert "<original_request>\nfix budget.py\n</original_request>" in text
    assert "session_id: " in text and "Big read done." not in text


def test_rollover_commit_rejected_keeps_the_window_and_asks_once(workspace: Path, agents):
    agent = rollover_agent(
        workspace,
        agents,
        used(85_000, turn("Big read done.", ("read_file", {"path": "budget.py"}))),
        used(86_000, turn("Another read.", ("read_file", {"path": "budget.py"}))),
        turn("Still in the old window."),
    )
    person = Person(Decision("reject"))
    events: list = []
    summary = agent.run("fix budget.py", confirm=person, listeners=[events.append])
    assert summary.status == "done", summary.error
    assert len(person.asked) == 1
    assert not [e for e in events if isinstance(e, RolloverCommitted)]
    assert any("rollover rejected by you" in t for t in notices(events))
    entries = read_log(agent.session.dir)
    assert of_type(entries, "rollover") == [] and of_type(entries, "replace") == []
    assert agent.last_provider.requests[-1].messages[0].content.endswith("fix budget.py")


def test_a_rollover_rejected_by_the_default_does_not_say_you_rejected_it(workspace: Path, agents):
    agent = rollover_agent(
        workspace,
        agents,
        used(85_000, turn("Big read done.", ("read_file", {"path": "budget.py"}))),
        used(86_000, turn("Another read.", ("read_file", {"path": "budget.py"}))),
        turn("Still in the old window."),
    )
    agent.settings.confirm_default = "reject"

    def no_stdin(prompt: str) -> str:
        raise EOFError("stdin is not available")

    agent.ask = no_stdin
    events: list = []
    assert agent.run("fix budget.py", listeners=[events.append]).status == "done"
    said = notices(events)
    assert any("rollover rejected by PseudoClaude.confirm_default (nobody could answer)" in t for t in said)
    assert not any("by you" in t for t in said), said
    logged = [e["text"] for e in of_type(read_log(agent.session.dir), "note")]
    assert any("rollover rejected by PseudoClaude.confirm_default" in t for t in logged), logged


# --- the prompt ---------------------------------------------------------------------------------------

PLAN = Proposal("compact", "auto", "old <b>summary</b>", 5_500, 1_200, 2, 1, 5_000, 100)


def lines(*answers: str):
    queue = list(answers)
    return lambda prompt: queue.pop(0)


def test_text_answers(tmp_path: Path, capsys):
    assert text_ask(lines("a"))(PLAN) == Decision("approve")
    assert text_ask(lines("  R "))(PLAN) == Decision("reject")
    assert text_ask(lines("e one line"))(PLAN) == Decision("edit", "one line")
    assert text_ask(lines("e", "first", "second", "."))(PLAN) == Decision("edit", "first\nsecond")
    edited = tmp_path / "summary.md"
    edited.write_text("from a file\nwith two lines\n", encoding="utf-8")
    assert text_ask(lines(f"e {edited}"))(PLAN) == Decision("edit", "from a file\nwith two lines\n")
    assert text_ask(lines("what?", "", "a"))(PLAN) == Decision("approve")
    out = capsys.readouterr().out
    assert "old <b>summary</b>" in out and "~5,500 → ~1,200 tokens" in out
    with pytest.raises(EOFError):
        text_ask(lines(*["?"] * 5))(PLAN)


def test_an_empty_edit_keeps_the_proposed_text():
    events: list = []
    review = Review(lambda p: Decision("edit", "  "))
    assert review.decide(PLAN, events.append) == Decision("approve")
    assert any("empty" in t for t in notices(events))


def test_the_notebook_view_escapes_the_text_and_states_before_and_after():
    markup = proposal_html(PLAN)
    assert "old &lt;b&gt;summary&lt;/b&gt;" in markup and "<b>summary</b>" not in markup
    assert "~5,500 → ~1,200 tokens" in markup and "2 messages" in markup
    assert "the recent tail of 1 messages" in describe(PLAN)


def test_the_magic_option_asks_through_input(ip, workspace: Path, monkeypatch):
    from pseudoclaude_nb.magics import current_agent
    from tests.scripts import run_magic

    agent = current_agent(ip)
    for name, value in {**SMALL, "fsync": False, "permission_mode": "auto"}.items():
        setattr(agent.settings, name, value)
    first = write_script(workspace, "first", turn("long answer: " + "a" * 20_000), context_window=WINDOW)
    run_magic(ip, f"agent --provider scripted --script {first} first")
    prompts: list[str] = []
    answers = iter(["e", "typed in the notebook", "."])
    monkeypatch.setattr("builtins.input", lambda prompt="": prompts.append(prompt) or next(answers))
    second = write_script(workspace, "second", turn("done"), context_window=WINDOW, summaries=["model's"])
    out = run_magic(ip, f"agent --confirm-compaction --provider scripted --script {second} second")
    assert "Compaction: [a] approve" in prompts[0] and "model's" in out
    assert agent.session.conversation.messages()[0].content.startswith("<summary>\ntyped in the notebook\n")
    assert agent.settings.confirm_compaction is False


def test_compact_apply_edit_commits_the_file_as_the_summary(ip, workspace: Path):
    from pseudoclaude_nb.magics import current_agent
    from tests.scripts import run_magic

    path = write_script(workspace, "chat", turn("answer " + "words " * 300), summaries=["MODEL-SUMMARY"])
    for i in range(6):
        run_magic(ip, f"agent --provider scripted --script {path} question {i}")
    ip.run_line_magic("config", "PseudoClaude.recent_tokens = 500")
    mine = workspace.parent / "mine.md"
    mine.write_text(f"## Confirmed requirements\n- written by me, key {SECRET}\n", encoding="utf-8")
    with pytest.raises(UsageError, match="--edit goes with --apply"):
        ip.run_line_magic("compact", f"--edit {mine}")
    run_magic(ip, "compact --preview")
    with pytest.raises(UsageError, match="cannot read it"):
        ip.run_line_magic("compact", f"--apply --edit {workspace / 'missing.md'}")
    out = run_magic(ip, f"compact --apply --edit {mine}")
    assert out.startswith("compacted: ~")
    agent = current_agent(ip)
    first = agent.session.conversation.messages()[0].content
    assert (
        first.startswith("<summary>\n## Confirmed requirements\n- written by me")
        and "MODEL-SUMMARY" not in first
    )
    log = (agent.session.dir / "conversation.jsonl").read_text(encoding="utf-8")
    assert "written by me" in log and SECRET not in log
