"""Compaction end to end (SPEC §7, §8, §16): scripted sessions through ``Agent``.

One long session shows, in order: a spill file and its preview in the next request; a
batch snapshot (replace marker + snapshot entries) and the anchor reset after it; the
breaker opening after three automatic failures; a resume restoring ledger, anchor and
breaker; the breaker closing after a manual success. The runner's forced path (the
provider refuses the prompt as too long) has its own tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.context.estimate import estimate_request, estimate_tokens
from pseudoclaude_nb.events import Compacted, CompactStarted, ContextState, Notice, Spilled, StepFinished
from pseudoclaude_nb.messages import Message, ToolCall, pairing_problems
from pseudoclaude_nb.providers import ScriptedProvider
from pseudoclaude_nb.session import load_session
from pseudoclaude_nb.session.entries import encode, message_entry
from tests.scripts import read_log as log_entries
from tests.scripts import script, turn, write_script
from tests.scripts import scripted_agent as make_agent

TOO_LONG = {"error": "context_too_long"}
PREVIEW_START = "[Tool result too large"
SKIPPED = "automatic compaction skipped"


# --- helpers ------------------------------------------------------------------------------------


def of_type(entries: list[dict], kind: str) -> list[dict]:
    return [e for e in entries if e["type"] == kind]


def events_of(events: list, kind: type) -> list:
    return [e for e in events if isinstance(e, kind)]


def text_file(workspace: Path, name: str, lines: int, width: int = 99) -> None:
    (workspace / name).write_text(("y" * width + "\n") * lines, encoding="utf-8")


def result_of(messages: list[Message], call_id: str) -> Message:
    [msg] = [m for m in messages if m.tool_result is not None and m.tool_result.call_id == call_id]
    return msg


def same_messages(a: list[Message], b: list[Message]) -> bool:
    return [m.to_dict() for m in a] == [m.to_dict() for m in b]


def check_log(agent: Agent) -> None:
    loaded = load_session(agent.session.dir)
    assert pairing_problems(loaded.messages) == []
    assert same_messages(loaded.messages, agent.session.conversation.messages())


def first_after(events: list, marker: type, kind: type):
    """The first event of ``kind`` after the first event of type ``marker``."""
    start = next(i for i, e in enumerate(events) if isinstance(e, marker))
    return next(e for e in events[start:] if isinstance(e, kind))


def last_usage_anchor(entries: list[dict]) -> tuple[int, int]:
    u = of_type(entries, "usage")[-1]
    total = (
        u["input_tokens"]
        + u["cache_creation_input_tokens"]
        + u["cache_read_input_tokens"]
        + u["output_tokens"]
    )
    return total, u["messages"]


# --- the runner's forced path ---------------------------------------------------------------------


def history(workspace: Path, agent: Agent) -> None:
    """A first run that leaves something old enough to summarize."""
    path = write_script(workspace, "first", turn("answer one: " + "a" * 8_000))
    assert agent.run("first question", script=path).status == "done"


def test_prompt_too_long_leads_to_one_forced_compaction_and_one_retry(workspace: Path, agents):
    agent = make_agent(workspace, recent_tokens=100)
    agents.append(agent)
    history(workspace, agent)
    path = write_script(
        workspace, "second", TOO_LONG, turn("done after compacting"), summaries=["the summary"]
    )
    events: list = []
    summary = agent.run("second question", script=path, listeners=[events.append])

    assert summary.status == "done", summary.error
    assert summary.final_text == "done after compacting"
    assert [(e.trigger, e.ok) for e in events_of(events, Compacted)] == [("forced", True)]
    assert [e.trigger for e in events_of(events, CompactStarted)] == ["forced"]
    provider = agent.last_provider
    assert [r.purpose for r in provider.requests] == ["agent", "summary", "agent"]
    refused, retried = provider.requests[0], provider.requests[2]
    assert refused.messages[0].content == "first question"
    assert retried.messages[0].content.startswith("<summary>\nthe summary\n</summary>")
    assert retried.messages[-1].content == "second question"
    assert pairing_problems(retried.messages) == []
    entries = log_entries(agent.session.dir)
    assert [(e["trigger"], e["ok"]) for e in of_type(entries, "compact")] == [("forced", True)]
    assert [e["reason"] for e in of_type(entries, "replace")] == ["compact"]
    assert agent.session.context.shared.compactions == 1
    check_log(agent)


@pytest.mark.script_may_remain  # "never reached" and "unused": the test shows the run stops after one retry
def test_prompt_too_long_twice_stops_with_advice(workspace: Path, agents):
    agent = make_agent(workspace, recent_tokens=100)
    agents.append(agent)
    history(workspace, agent)
    path = write_script(
        workspace, "second", TOO_LONG, TOO_LONG, turn("never reached"), summaries=["the summary", "unused"]
    )
    events: list = []
    summary = agent.run("second question", script=path, listeners=[events.append])

    assert summary.status == "error"
    message = str(summary.error)
    for advice in ("%compact", "%sessions new", "--strategy rollover"):
        assert advice in message
    assert "too long" in message
    provider = agent.last_provider
    assert provider.turns_used == 2  # the request and its one retry
    assert provider.summaries_used == 1  # one compaction
    assert len(events_of(events, Compacted)) == 1
    entries = log_entries(agent.session.dir)
    assert [(e["trigger"], e["ok"]) for e in of_type(entries, "compact")] == [("forced", True)]
    assert pairing_problems(agent.session.conversation.messages()) == []
    check_log(agent)


@pytest.mark.script_may_remain  # "never reached" and "unused": no retry, no summary
def test_prompt_too_long_with_nothing_to_summarize_stops_with_advice(workspace: Path, agents):
    agent = make_agent(workspace)
    agents.append(agent)
    path = write_script(workspace, "s", TOO_LONG, turn("never reached"), summaries=["unused"])
    summary = agent.run("the very first question", script=path)
    assert summary.status == "error"
    # Only advice that can help (issue 32): nothing to compact, the session is new already.
    message = str(summary.error)
    assert "%compact" not in message and "%sessions new" not in message and "a shorter prompt" in message
    assert agent.last_provider.turns_used == 1  # no retry without a successful compaction
    assert agent.last_provider.summaries_used == 0
    [entry] = of_type(log_entries(agent.session.dir), "compact")
    assert (entry["trigger"], entry["ok"]) == ("forced", False)
    assert not agent.session.context.shared.breaker.failures  # forced attempts are not automatic ones
    check_log(agent)


def test_prompt_too_long_after_tool_results_keeps_pairing(workspace: Path, agents):
    text_file(workspace, "notes.txt", 10)
    agent = make_agent(workspace, recent_tokens=100)
    agents.append(agent)
    history(workspace, agent)
    path = write_script(
        workspace,
        "second",
        turn(
            "reading", ("read_file", {"path": "notes.txt"}, "r1"), ("read_file", {"path": "notes.txt"}, "r2")
        ),
        TOO_LONG,
        turn("read both"),
        summaries=["the summary"],
    )
    summary = agent.run("read notes twice", script=path)
    assert summary.status == "done", summary.error
    retried = agent.last_provider.requests[-1].messages
    assert pairing_problems(retried) == []
    # The tail kept the whole tool exchange: the call with both results.
    calls = [m for m in retried if m.tool_calls]
    assert [c.id for c in calls[-1].tool_calls] == ["r1", "r2"]
    assert {m.tool_result.call_id for m in retried if m.tool_result} == {"r1", "r2"}
    check_log(agent)


# --- one long session ------------------------------------------------------------------------------

WINDOW = 70_000  # with the reserves below: threshold 68,000
SETTINGS = dict(summary_reserve=1_000, safety_margin=1_000, recent_tokens=2_000)
BATCH_LINES = (380, 400, 420, 440, 460)  # read_file outputs of ≈ 41–49 KB: together ≈ 225 KB


def test_a_session_through_both_layers_and_a_resume(workspace: Path, agents):
    text_file(workspace, "big.txt", 1_200)  # ≈ 128 KB through read_file
    text_file(workspace, "small.txt", 3)
    for i, lines in enumerate(BATCH_LINES):
        text_file(workspace, f"part{i}.txt", lines)
    agent = make_agent(workspace, **SETTINGS)
    agents.append(agent)

    # 1. A single large result: a spill file, and its preview in the next request.
    path = write_script(
        workspace,
        "run1",
        turn("reading", ("read_file", {"path": "big.txt", "limit": 5_000}, "call_big")),
        turn("big.txt is long"),
        context_window=WINDOW,
    )
    events1: list = []
    assert agent.run("read big.txt", script=path, listeners=[events1.append]).status == "done"
    session = agent.session.dir
    [spill] = of_type(log_entries(session), "spill")
    assert spill["call_id"] == "call_big" and spill["bytes"] > 100_000
    spill_file = session / spill["path"]
    assert spill_file.stat().st_size == spill["bytes"]
    sent = result_of(agent.last_provider.requests[1].messages, "call_big").tool_result.content
    assert sent.startswith(PREVIEW_START)
    assert str(spill_file.relative_to(workspace.resolve())) in sent
    assert [e.reason for e in events_of(events1, Spilled)] == ["single"]

    # 2. A batch over 200,000 bytes: the largest spilled, a snapshot replace, the anchor reset.
    calls = [("read_file", {"path": f"part{i}.txt"}, f"c{i}") for i in range(5)]
    path = write_script(
        workspace, "run2", turn("reading the parts", *calls), turn("read them"), context_window=WINDOW
    )
    events2: list = []
    assert agent.run("read the parts", script=path, listeners=[events2.append]).status == "done"
    entries = log_entries(session)
    [replace] = of_type(entries, "replace")
    assert replace["reason"] == "snapshot"
    snapshot = [e for e in of_type(entries, "message") if e.get("replace_id") == replace["replace_id"]]
    assert len(snapshot) == replace["count"] == 11  # run 1's four, then the user, the calls, 5 results
    assert [e["call_id"] for e in of_type(entries, "spill")] == ["call_big", "c4"]
    assert entries.index(of_type(entries, "spill")[1]) < entries.index(replace)
    request = agent.last_provider.requests[1]
    assert sum(len(m.tool_result.content.encode()) for m in request.messages if m.tool_result) <= 200_000
    assert result_of(request.messages, "c4").tool_result.content.startswith(PREVIEW_START)
    usage_before = events_of(events2, StepFinished)[0].usage
    after_replace = first_after(events2, Spilled, ContextState)
    # Right after the replace the anchor is the estimate of the new messages, not the last usage.
    assert after_replace.anchor_tokens == estimate_request(request.system, request.messages, request.tools)
    assert after_replace.estimated_tokens == after_replace.anchor_tokens
    assert after_replace.anchor_tokens != usage_before.prompt_total + usage_before.output_tokens
    assert after_replace.estimated_tokens < after_replace.threshold == 68_000
    check_log(agent)

    # 3. Over the threshold, and every summary fails: three automatic failures open the breaker;
    #    then automatic compaction is skipped, visibly, once per run.
    reads = [("read_file", {"path": "part3.txt"}, "d0"), ("read_file", {"path": "part4.txt"}, "d1")]
    checks = [turn("checking", ("read_file", {"path": "small.txt"}, f"s{k}")) for k in range(4)]
    path = write_script(
        workspace,
        "run3",
        turn("reading two more", *reads),
        *checks,
        turn("checked"),
        context_window=WINDOW,
        summaries=["", "", ""],
    )
    events3: list = []
    assert agent.run("read two more", script=path, listeners=[events3.append]).status == "done"
    compacted = events_of(events3, Compacted)
    assert [(e.trigger, e.ok) for e in compacted] == [("auto", False)] * 3
    assert all("empty summary" in e.error for e in compacted)
    assert agent.last_provider.summaries_used == 3
    notices = [n for n in events_of(events3, Notice) if SKIPPED in n.text]
    assert len(notices) == 1
    # The gauge: closed until the third failure, open from then on.
    third = events3.index(compacted[2])
    states = [(i, e) for i, e in enumerate(events3) if isinstance(e, ContextState)]
    assert all(not s.breaker_open for i, s in states if i < third)
    assert all(s.breaker_open for i, s in states if i > third)
    assert any(i > events3.index(notices[0]) for i, _ in states)
    assert agent.session.context.shared.breaker.open
    assert [(e["trigger"], e["ok"]) for e in of_type(log_entries(session), "compact")] == [
        ("auto", False)
    ] * 3
    check_log(agent)

    # 4. Resume in a new agent: ledger, anchor and breaker come back from the log.
    session_id = agent.session.id
    agent.close()
    second = make_agent(workspace, **SETTINGS)
    agents.append(second)
    loaded = second.resume(session_id)
    context = second.session.context
    entries = log_entries(session)
    assert context.shared.anchor == last_usage_anchor(entries) == loaded.usage_anchor
    assert context.shared.breaker.open and context.shared.breaker.failures == 3
    assert context.shared.compactions == 0
    assert context.shared.ledger.decision("call_big") == context.shared.ledger.decision("c4") == "spilled"
    for cid in ("c0", "c1", "c2", "c3", "d0", "d1", "s0", "s3"):
        assert context.shared.ledger.decision(cid) == "kept"
    assert context.shared.ledger.spilled == 2

    # The restored breaker is what the next run obeys: no automatic attempt, one notice.
    path = write_script(workspace, "run4", turn("still here"), context_window=WINDOW)
    events4: list = []
    assert second.run("are you there?", script=path, listeners=[events4.append]).status == "done"
    assert events_of(events4, Compacted) == []
    assert [r.purpose for r in second.last_provider.requests] == ["agent"]
    assert len([n for n in events_of(events4, Notice) if SKIPPED in n.text]) == 1

    # 5. A manual compaction still works, and its success closes the breaker.
    good = ScriptedProvider(script(summaries=["## Confirmed requirements\n- read the files (the user)"]))
    before = second.session.conversation.messages()
    result = context.summarize(good, trigger="manual")
    assert result.ok, result.error
    assert not context.shared.breaker.open and context.shared.breaker.failures == 0
    new = second.session.conversation.messages()
    assert len(new) < len(before)
    assert new[0].content.startswith("<summary>\n## Confirmed requirements")
    last = second.last_provider.requests[-1]
    assert context.shared.anchor == (estimate_request(last.system, new, last.tools), len(new))
    entries = log_entries(session)
    assert [e["reason"] for e in of_type(entries, "replace")] == ["snapshot", "compact"]
    assert [(e["trigger"], e["ok"]) for e in of_type(entries, "compact")] == [("auto", False)] * 3 + [
        ("manual", True)
    ]
    assert entries[-1]["type"] == "compact"
    check_log(second)

    # The next run starts from the summary, below the threshold: no automatic compaction.
    path = write_script(workspace, "run5", turn("continuing from the summary"), context_window=WINDOW)
    events5: list = []
    assert second.run("go on", script=path, listeners=[events5.append]).status == "done"
    sent = second.last_provider.requests[0].messages
    assert sent[0].content.startswith("<summary>")
    assert pairing_problems(sent) == []
    assert events_of(events5, Compacted) == [] and events_of(events5, Notice) == []
    assert events_of(events5, ContextState)[0].breaker_open is False

    # 6. Resume once more: the breaker stays closed, the anchor is the usage after the replace.
    second.close()
    third = make_agent(workspace, **SETTINGS)
    agents.append(third)
    loaded = third.resume(session_id)
    context = third.session.context
    entries = log_entries(session)
    assert context.shared.anchor == last_usage_anchor(entries) == loaded.usage_anchor
    assert context.shared.anchor[1] == len(loaded.messages)
    assert not context.shared.breaker.open and context.shared.breaker.failures == 0
    assert context.shared.compactions == 1
    assert context.shared.ledger.decision("call_big") == context.shared.ledger.decision("c4") == "spilled"
    for msg in loaded.messages:
        if msg.tool_result is not None:
            assert context.shared.ledger.decision(msg.tool_result.call_id) is not None

    # Nothing in the log is a raw spilled body.
    sizes = [len(line) for line in (session / "conversation.jsonl").read_bytes().split(b"\n")]
    assert max(sizes) <= 64 * 1024
    assert spill_file.read_text(encoding="utf-8") not in (session / "conversation.jsonl").read_text(
        encoding="utf-8"
    )


def test_resume_of_a_session_compacted_before_its_last_usage(workspace: Path, agents):
    agent = make_agent(workspace, recent_tokens=100)
    agents.append(agent)
    history(workspace, agent)
    path = write_script(workspace, "second", turn("short answer"))
    assert agent.run("second question", script=path).status == "done"
    # A compaction right after the last usage: the anchor on resume must not be that usage.
    assert agent.session.context.summarize(ScriptedProvider(script(summaries=["s"])), trigger="manual").ok
    session_id = agent.session.id
    agent.close()
    other = make_agent(workspace)
    agents.append(other)
    loaded = other.resume(session_id)
    assert loaded.usage_anchor is None
    assert other.session.context.shared.anchor is None
    assert other.session.context.shared.compactions == 1
    estimate = other.session.context.shared.estimate()  # the whole conversation, estimated once
    assert estimate >= estimate_tokens(loaded.messages)
    assert other.session.context.shared.anchor == (estimate, len(loaded.messages))


def test_resume_after_a_crash_still_restores_the_breaker(workspace: Path, agents):
    agent = make_agent(workspace, summary_reserve=500, safety_margin=500, recent_tokens=200)
    agents.append(agent)
    path = write_script(workspace, "first", turn("long answer: " + "a" * 20_000), context_window=6_000)
    assert agent.run("first", script=path).status == "done"
    (workspace / "small.txt").write_text("tiny\n", encoding="utf-8")
    checks = [turn("checking", ("read_file", {"path": "small.txt"}, f"s{k}")) for k in range(2)]
    path = write_script(
        workspace, "second", *checks, turn("done"), context_window=6_000, summaries=["", "", ""]
    )
    assert agent.run("check", script=path).status == "done"
    assert agent.session.context.shared.breaker.open
    session = agent.session.dir
    agent.close()
    # A crash while a tool ran: an assistant tool call without its result ends the log.
    crashed = Message(role="assistant", content="", tool_calls=(ToolCall(id="lost", name="bash"),))
    with open(session / "conversation.jsonl", "ab") as f:
        f.write(encode(message_entry(crashed)))

    other = make_agent(workspace)
    agents.append(other)
    loaded = other.resume(session.name)
    assert loaded.truncated_tool_calls
    assert other.session.context.shared.breaker.open
