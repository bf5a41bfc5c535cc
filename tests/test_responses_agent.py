"""``%agent`` over the OpenAI Responses API, as a person runs it (issue 43).

The magics in a real IPython shell, real httpx, and a local server whose streams follow the
documented shapes (``tests/fakes/openai_responses_server``). What is checked is what a person
sees (the run's lines, ``%context``), what the log holds, and what each request carried: the
tool loop, server state (only new items after ``previous_response_id``; a forgotten id sends
the whole input once; a compaction, a resume, a fork or a strategy switch starts a new chain),
``--strategy api`` (the compaction item kept verbatim, sent back first, undone), ``%compact``
through ``/responses/compact``, and the bad input of the issue.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.session import load_session
from tests.fakes import FakeServer
from tests.fakes import openai_responses_server as wire
from tests.scripts import run_magic

KEY = "sk-proj-agent-9c3e"
AGENT = "agent --provider openai --model gpt-5.5 --mode auto --no-memory"


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    with FakeServer("openai-responses") as server:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        yield server


@pytest.fixture
def shell(ip, fake, workspace: Path):
    (workspace / "stats.py").write_text("def mean(xs):\n    return sum(xs) / len(xs)\n")
    run_magic(ip, "config PseudoClaude.openai_api = 'responses'")  # the fake is not api.openai.com
    return ip


def entries(ip) -> list[dict]:
    path = current_agent(ip).session.dir / "conversation.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def bodies(fake: FakeServer, path: str = "/v1/responses") -> list[dict]:
    return [r.body for r in fake.requests if r.path == path]


READ = ("call_r1", "read_file", {"path": "stats.py"})
LONG = "notes on the mean of a list of numbers, " * 60  # long enough that a summary frees room


def test_a_tool_loop_runs_over_responses_and_the_log_keeps_call_ids_usage_and_cost(shell, fake) -> None:
    fake.play(
        wire.answer(
            "Reading it.",
            [READ],
            reasoning=wire.reasoning_item("Look first."),
            u=wire.usage(2_000, 40, reasoning=25),
        ),
        wire.answer("mean() divides by len.", response_id="resp_2", u=wire.usage(2_400, 30, cached=1_536)),
    )
    out = run_magic(shell, f'{AGENT} "what does stats.py do?"')
    assert "mean() divides by len." in out and "$" in out  # the end line prices the run
    first, second = bodies(fake)
    assert [i["type"] for i in second["input"]] == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
    ]
    assert second["input"][3]["call_id"] == second["input"][4]["call_id"] == "call_r1"
    assert "def mean" in second["input"][4]["output"]
    assert second["store"] is False and "previous_response_id" not in second
    log = entries(shell)
    calls = [c for e in log if e["type"] == "message" for c in e["tool_calls"]]
    assert calls == [{"id": "call_r1", "name": "read_file", "arguments": {"path": "stats.py"}}]
    usages = [e for e in log if e["type"] == "usage"]
    assert usages[0]["reasoning_output_tokens"] == 25
    assert (usages[1]["input_tokens"], usages[1]["cache_read_input_tokens"]) == (864, 1_536)


def test_the_non_streamed_summary_goes_through_responses_too(shell, fake) -> None:
    fake.play(
        wire.answer("Noted."), wire.response("Summary: the user looked at stats.py.", u=wire.usage(900, 60))
    )
    run_magic(shell, f'{AGENT} "remember stats.py: {LONG}"')
    run_magic(shell, "config PseudoClaude.recent_tokens = 1")
    out = run_magic(shell, "compact")
    assert "compacted" in out
    summary = bodies(fake)[-1]
    assert summary["stream"] is False and summary["store"] is False and "tools" not in summary


# --- server state ---------------------------------------------------------------------------------


def _state_on(shell) -> None:
    run_magic(shell, "config PseudoClaude.openai_server_state = True")


def test_server_state_sends_only_the_new_items_after_the_stored_response(shell, fake) -> None:
    _state_on(shell)
    fake.play(
        wire.answer("Reading it.", [READ], response_id="resp_1"),
        wire.answer("It averages.", response_id="resp_2"),
        wire.answer("Yes, empty lists fail.", response_id="resp_3"),
    )
    run_magic(shell, f'{AGENT} "what does stats.py do?"')
    run_magic(shell, f'{AGENT} "does it fail on []?"')
    first, second, third = bodies(fake)
    assert first["store"] is True and "previous_response_id" not in first and len(first["input"]) == 1
    assert second["previous_response_id"] == "resp_1"
    assert [i["type"] for i in second["input"]] == ["function_call_output"]
    assert third["previous_response_id"] == "resp_2"  # the next %agent run continues the chain
    assert [(i["type"], i["role"]) for i in third["input"]] == [("message", "user")]
    assert "does it fail on []?" in third["input"][0]["content"]


def test_a_forgotten_response_gets_the_whole_input_once_said_and_a_new_chain(shell, fake) -> None:
    _state_on(shell)
    fake.play(
        wire.answer("Hello.", response_id="resp_1"),
        wire.forgotten("resp_1"),
        wire.answer("Still here.", response_id="resp_9"),
        wire.answer("And again.", response_id="resp_10"),
    )
    run_magic(shell, f'{AGENT} "hi"')
    out = run_magic(shell, f'{AGENT} "are you there?"')
    assert "no longer holds the stored response" in out and "resp_1" in out
    _, refused, resent = bodies(fake)
    assert refused["previous_response_id"] == "resp_1"
    assert "previous_response_id" not in resent and resent["store"] is True
    assert [i.get("role") for i in resent["input"]] == ["user", "assistant", "user"]
    run_magic(shell, f'{AGENT} "ok"')
    chained = bodies(fake)[-1]
    assert chained["previous_response_id"] == "resp_9" and len(chained["input"]) == 1
    notes = [e["text"] for e in entries(shell) if e["type"] == "note"]
    assert any("no longer holds" in n for n in notes)  # the log says so too


@pytest.mark.parametrize("change", ["compact", "undo", "resume", "fork", "strategy"])
def test_a_compaction_resume_fork_or_strategy_switch_starts_a_new_chain(shell, fake, change: str) -> None:
    _state_on(shell)
    fake.play(wire.answer("One.", response_id="resp_1"), wire.answer("Two.", response_id="resp_2"))
    run_magic(shell, f'{AGENT} "first: {LONG}"')
    run_magic(shell, f'{AGENT} "second"')
    assert bodies(fake)[-1]["previous_response_id"] == "resp_1"
    session_id = current_agent(shell).session.writer.id
    extra = ""
    if change in ("compact", "undo"):
        fake.play(wire.response("Summary: two greetings.", u=wire.usage(300, 20)))
        run_magic(shell, "config PseudoClaude.recent_tokens = 1")
        assert "compacted" in run_magic(shell, "compact")
        if change == "undo":  # a request after the compaction, then the undo: the server holds neither
            fake.play(wire.answer("On the summary.", response_id="resp_s"))
            run_magic(shell, f'{AGENT} "after the summary"')
            assert "undid the compaction" in run_magic(shell, "compact --undo")
    elif change == "resume":
        run_magic(shell, "sessions new")
        extra = f" --session {session_id}"
    elif change == "fork":
        assert "forked" in run_magic(shell, "sessions fork --at 2")
    else:
        extra = " --strategy rollover"
    fake.play(wire.answer("Three.", response_id="resp_3"), wire.answer("Four.", response_id="resp_4"))
    run_magic(shell, f'{AGENT}{extra} "third"')
    restarted = bodies(fake)[-1]
    assert "previous_response_id" not in restarted and restarted["store"] is True
    again = extra if change == "strategy" else ""  # a second --session would resume once more
    run_magic(shell, f'{AGENT}{again} "fourth"')
    assert bodies(fake)[-1]["previous_response_id"] == "resp_3"  # and the new chain goes on


# --- --strategy api ----------------------------------------------------------------------------------

ITEM = wire.compaction_item("gAAAAB-compacted-state-7==")
API = f"{AGENT} --strategy api"


def _compacting(shell, fake) -> None:
    fake.play(
        wire.answer("Planned the stats module.", u=wire.usage(90_000, 20)),
        wire.answer(
            "Continuing: mean() is next.", compaction=ITEM, response_id="resp_c", u=wire.usage(3_000, 25)
        ),
    )
    run_magic(shell, f'{API} "plan a stats module"')
    out = run_magic(shell, f'{API} "go on"')
    assert "compacted (server)" in out


def test_strategy_api_asks_for_compaction_keeps_the_item_verbatim_and_sends_it_back_first(
    shell, fake
) -> None:
    _compacting(shell, fake)
    sent = bodies(fake)[0]
    threshold = current_agent(shell).session.context.state().threshold  # the api strategy acts_at
    assert sent["context_management"] == [{"type": "compaction", "compact_threshold": threshold}]
    messages = current_agent(shell).session.conversation.messages()
    assert [m.content for m in messages] == ["Continuing: mean() is next."]
    log = entries(shell)
    assert [e["reason"] for e in log if e["type"] == "replace"] == ["compact"]
    assert [(e["trigger"], e["ok"]) for e in log if e["type"] == "compact"] == [("server", True)]
    fake.play(wire.answer("Done."))
    run_magic(shell, f'{API} "finish"')
    last = fake.requests[-1]
    assert last.body["input"][0] == ITEM and orjson.dumps(ITEM) in last.raw
    assert [i.get("type") for i in last.body["input"]] == ["compaction", "message", "message"]
    context = run_magic(shell, "context")
    assert "server compaction at" in context and ITEM["encrypted_content"] not in context
    assert (
        load_session(current_agent(shell).session.dir).messages[0].reasoning[0].data
        == orjson.dumps(ITEM).decode()
    )


def test_undo_of_a_server_compaction_restores_the_history_without_the_item(shell, fake) -> None:
    _compacting(shell, fake)
    out = run_magic(shell, "compact --undo")
    assert "undid the compaction" in out
    fake.play(wire.answer("Back."))
    run_magic(shell, f'{API} "and now?"')
    sent = bodies(fake)[-1]
    assert "compaction" not in [i.get("type") for i in sent["input"]]
    assert sent["input"][0]["content"].endswith("plan a stats module")


def test_compact_under_api_uses_responses_compact_with_preview_apply_and_undo(shell, fake) -> None:
    fake.play(wire.answer("One."), wire.answer("Two."))
    run_magic(shell, f'{API} "first: {LONG}"')
    run_magic(shell, f'{API} "second"')
    run_magic(shell, "config PseudoClaude.recent_tokens = 1")
    fake.play(wire.compacted(["first"], ITEM, u=wire.usage(4_000, 200)))
    preview = run_magic(shell, "compact --preview")
    assert "opaque" in preview and len(current_agent(shell).session.conversation.messages()) == 4
    request = [r for r in fake.requests if r.path == "/v1/responses/compact"][0]
    assert [i.get("role") for i in request.body["input"]] == ["user", "assistant", "user"]
    assert request.body["model"] == "gpt-5.5"
    applied = run_magic(shell, "compact --apply")
    assert "compacted" in applied
    messages = current_agent(shell).session.conversation.messages()
    assert messages[0].content == "first" and messages[1].reasoning[0].origin == "openai"
    spend = [e for e in entries(shell) if e["type"] == "spend"]
    assert spend and spend[-1]["input_tokens"] == 4_000  # the compaction request is priced
    fake.play(wire.answer("Three."))
    run_magic(shell, f'{API} "third"')
    sent = bodies(fake)[-1]["input"]
    assert [i.get("type") for i in sent][:2] == ["message", "compaction"] and sent[1] == ITEM
    assert "undid the compaction" in run_magic(shell, "compact --undo")


# --- bad input ----------------------------------------------------------------------------------


def test_arguments_that_are_not_json_end_the_run_clearly_keep_nothing_and_log_the_spend(shell, fake) -> None:
    fake.play(wire.answer("", [("call_x", "read_file", '{"path": "stats.py"')], u=wire.usage(1_500, 12)))
    out = run_magic(shell, f'{AGENT} "read it"')
    assert "broken arguments JSON" in out
    messages = current_agent(shell).session.conversation.messages()
    assert [m.role for m in messages] == ["user"]  # no half-received call
    spend = [e for e in entries(shell) if e["type"] == "spend"]
    assert [(e["purpose"], e["input_tokens"]) for e in spend] == [("refused", 1_500)]


def test_a_stream_without_response_completed_ends_the_run_clearly_and_keeps_nothing(shell, fake) -> None:
    fake.play(wire.cut("Half", [READ]))
    out = run_magic(shell, f'{AGENT} "read it"')
    assert "ended without response.completed" in out and "run %agent again" in out
    assert [m.role for m in current_agent(shell).session.conversation.messages()] == ["user"]
