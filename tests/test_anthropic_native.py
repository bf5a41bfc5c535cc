"""Anthropic's own features, as a person uses them (issue 43): the real ``anthropic`` SDK against a
local server whose answers follow the documented shapes (``tests/fakes/anthropic_server``).

On-demand compaction behind ``%compact`` (``--preview``, ``--apply``, ``--undo``) under
``--strategy api``; ``pause_after_compaction`` so ``confirm_compaction`` asks before the run goes
on; ``applied_edits`` in the run's lines and ``%context``; ``cache_ttl``; the cache diagnosis in
``%context``; and the compaction iterations' cache tokens priced at their own rates.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pseudoclaude_nb.cost import price_of
from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.messages import Usage
from pseudoclaude_nb.session import load_session
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as wire
from tests.scripts import run_magic

KEY = "sk-ant-native-4411"
MODEL = "claude-sonnet-4-6"
AGENT = f"agent --provider anthropic --model {MODEL} --mode auto --no-memory"
API = f"{AGENT} --strategy api"
LONG = "notes on the stats module and its mean function, " * 60
BLOCK = {
    "type": "compaction",
    "content": "Summary: a stats module; mean() is done.",
    "encrypted_content": "Eu8-opaque==",
}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    with FakeServer("anthropic") as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


def entries(ip) -> list[dict]:
    path = current_agent(ip).session.dir / "conversation.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def betas(request) -> list[str]:
    return request.headers.get("anthropic-beta", "").split(",")


# --- on-demand compaction behind %compact ------------------------------------------------------------


def _two_runs(ip, fake) -> None:
    fake.play(wire.answer("Planned."), wire.answer("Noted."))
    run_magic(ip, f'{API} "plan: {LONG}"')
    run_magic(ip, f'{API} "go on"')
    run_magic(ip, "config PseudoClaude.recent_tokens = 1")


def test_compact_under_api_asks_the_api_for_a_summary_of_the_older_turns(ip, fake) -> None:
    _two_runs(ip, fake)
    fake.play(
        wire.on_demand(
            "Summary: a stats module was planned.", usage={"input_tokens": 900, "output_tokens": 80}
        )
    )
    out = run_magic(ip, "compact --preview")
    assert "Summary: a stats module was planned." in out and "nothing was written" in out
    sent = fake.requests[-1]
    assert sent.body["compaction"] == {"type": "summarize"} and "context_management" not in sent.body
    assert "compact-2026-09-04" in betas(sent)
    # The recent tail stays out of the compaction request (compaction that keeps recent turns).
    assert [m["role"] for m in sent.body["messages"]] == ["user", "assistant", "user"]
    assert len(current_agent(ip).session.conversation.messages()) == 4  # a preview replaces nothing
    assert "compacted" in run_magic(ip, "compact --apply")
    messages = current_agent(ip).session.conversation.messages()
    assert messages[0].reasoning[0].origin == "on-demand" and messages[-1].content == "Noted."
    spend = [e for e in entries(ip) if e["type"] == "spend"]
    assert spend[-1]["input_tokens"] == 900  # the compaction request is priced

    fake.play(wire.answer("Continuing."))
    run_magic(ip, f'{API} "next"')
    last = fake.requests[-1]
    block = last.body["messages"][0]["content"][0]
    assert block["type"] == "compaction" and block["signature"] == "EqQBCkYIBhgCKkB-signed-summary=="
    # The API takes no compaction edit beside an on-demand block (the SDK's runner checks it too).
    edits = [e["type"] for e in last.body.get("context_management", {}).get("edits", [])]
    assert "compact_20260112" not in edits and "compact-2026-09-04" in betas(last)
    assert "undid the compaction" in run_magic(ip, "compact --undo")
    assert not any(
        r.kind == "compaction" for m in current_agent(ip).session.conversation.messages() for r in m.reasoning
    )


def test_a_failed_on_demand_compaction_replaces_nothing_and_says_why(ip, fake) -> None:
    _two_runs(ip, fake)
    fake.play(wire.on_demand(None))
    out = run_magic(ip, "compact")
    assert "left no summary" in out and len(current_agent(ip).session.conversation.messages()) == 4


def test_over_the_line_with_an_on_demand_block_the_run_compacts_on_demand_itself(ip, fake) -> None:
    _two_runs(ip, fake)
    fake.play(wire.on_demand("Summary one."))
    run_magic(ip, "compact")
    fake.play(wire.answer("Big answer.", usage={"input_tokens": 190_000, "output_tokens": 10}))
    run_magic(ip, f'{API} "more"')
    fake.play(wire.on_demand("Summary two."), wire.answer("After the second summary."))
    out = run_magic(ip, f'{API} "and more"')
    assert "compacted (auto)" in out
    compaction, answer = fake.requests[-2], fake.requests[-1]
    assert compaction.body["compaction"] == {"type": "summarize"}
    assert answer.body["messages"][0]["content"][0]["content"] == "Summary two."


# --- pause_after_compaction ------------------------------------------------------------------------


def _paused_run(ip, fake, answer: str) -> str:
    run_magic(ip, "config PseudoClaude.confirm_compaction = True")
    current_agent(ip).ask = lambda prompt: answer
    fake.play(wire.answer("Planned.", usage={"input_tokens": 90_000, "output_tokens": 20}))
    run_magic(ip, f'{API} "plan a stats module"')
    fake.play(
        wire.paused(
            BLOCK, iterations=[{"type": "compaction", "input_tokens": 150_000, "output_tokens": 700}]
        ),
        wire.answer("Continuing after the summary."),
    )
    return run_magic(ip, f'{API} "go on"')


def test_a_paused_server_compaction_is_asked_and_approved_before_the_run_goes_on(ip, fake) -> None:
    out = _paused_run(ip, fake, "a")
    paused, resumed = fake.requests[-2], fake.requests[-1]
    edit = paused.body["context_management"]["edits"][-1]
    assert edit["type"] == "compact_20260112" and edit["pause_after_compaction"] is True
    assert "awaits your answer" in out and "Summary: a stats module" in out
    assert "Continuing after the summary." in out
    assert resumed.body["messages"][0]["content"][0] == BLOCK  # the approved block, verbatim
    assert [m.content for m in current_agent(ip).session.conversation.messages()][
        -1
    ] == "Continuing after the summary."
    assert [e["reason"] for e in entries(ip) if e["type"] == "replace"] == ["compact"]


def test_an_edited_pause_puts_the_persons_summary_in_place_of_the_block(ip, fake) -> None:
    out = _paused_run(ip, fake, "e the stats module has mean(); median() comes next")
    assert "edited" in out and "Continuing after the summary." in out
    first = fake.requests[-1].body["messages"][0]
    assert "median() comes next" in json.dumps(first)  # the person's text, not the provider's block
    assert all(b.get("type") != "compaction" for b in first["content"] if isinstance(b, dict))
    replaces = [e for e in entries(ip) if e["type"] == "replace"]
    assert [(e["reason"], e.get("strategy")) for e in replaces] == [("compact", "api")]
    compacts = [e for e in entries(ip) if e["type"] == "compact"]
    assert [(e["trigger"], e["ok"]) for e in compacts] == [("server", True)]
    assert current_agent(ip).session.context.shared.compactions == 1


def test_a_rejected_pause_drops_the_block_and_the_run_goes_on_without_compaction(ip, fake) -> None:
    out = _paused_run(ip, fake, "r")
    assert "rejected by you" in out and "Continuing after the summary." in out
    resumed = fake.requests[-1]
    assert all(
        b.get("type") != "compaction"
        for m in resumed.body["messages"]
        for b in m["content"]
        if isinstance(b, dict)
    )
    edits = [e["type"] for e in resumed.body.get("context_management", {}).get("edits", [])]
    assert "compact_20260112" not in edits  # no more compaction in this run
    assert any("rejected" in e["text"] for e in entries(ip) if e["type"] == "note")
    paid = [e for e in entries(ip) if e["type"] == "usage" and e.get("compaction_input_tokens")]
    assert paid and paid[0]["compaction_input_tokens"] == 150_000  # the rejected compaction was paid


# --- what the provider says: applied edits, cache diagnosis ----------------------------------------


EDITS = [{"type": "clear_tool_uses_20250919", "cleared_tool_uses": 3, "cleared_input_tokens": 12_000}]


def test_applied_edits_show_in_the_run_and_in_context(ip, fake) -> None:
    run_magic(ip, "config PseudoClaude.api_clear_tool_results = 30000")
    fake.play(wire.answer("Done.", applied_edits=EDITS))
    out = run_magic(ip, f'{API} "hello"')
    assert "context editing cleared 3 old tool results (~12,000 input tokens)" in out
    usage = [e for e in entries(ip) if e["type"] == "usage"][-1]
    assert (usage["cleared_tool_uses"], usage["cleared_input_tokens"]) == (3, 12_000)
    assert "context editing cleared 3 old tool results (~12,000 tokens) from the last request" in run_magic(
        ip, "context"
    )


def test_the_cache_diagnosis_is_asked_for_and_its_reason_shows_in_context(ip, fake) -> None:
    miss = {"cache_miss_reason": {"type": "messages_changed", "cache_missed_input_tokens": 4_321}}
    fake.play(
        wire.answer("One.", message_id="msg_one"), wire.answer("Two.", message_id="msg_two", diagnostics=miss)
    )
    run_magic(ip, f'{AGENT} "first"')
    run_magic(ip, f'{AGENT} "second"')
    first, second = fake.requests[-2:]
    assert first.body["diagnostics"] == {"previous_message_id": None}  # opted in on the first turn
    assert second.body["diagnostics"] == {"previous_message_id": "msg_one"}
    assert "cache-diagnosis-2026-04-07" in betas(second)
    usage = [e for e in entries(ip) if e["type"] == "usage"][-1]
    assert (usage["cache_miss_reason"], usage["cache_missed_input_tokens"]) == ("messages_changed", 4_321)
    context = run_magic(ip, "context")
    assert "cache miss on the last request: messages changed (~4,321 tokens it could have read)" in context


def test_no_cache_line_when_the_api_gave_no_diagnosis(ip, fake) -> None:
    fake.play(wire.answer("One."))
    run_magic(ip, f'{AGENT} "first"')
    assert "cache miss on the last request" not in run_magic(ip, "context")


# --- the cache TTL -------------------------------------------------------------------------------


def test_cache_ttl_one_hour_marks_every_breakpoint_and_prices_the_hour_writes(ip, fake) -> None:
    run_magic(ip, "config PseudoClaude.cache_ttl = '1h'")
    fake.play(
        wire.answer(
            "One.",
            usage={"input_tokens": 10, "cache_creation_input_tokens": 5_000, "output_tokens": 5},
            cache_creation={"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 5_000},
        )
    )
    run_magic(ip, f'{AGENT} "first"')
    body = fake.requests[-1].body
    assert body["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    usage = [e for e in entries(ip) if e["type"] == "usage"][-1]
    assert usage["cache_creation_1h_input_tokens"] == 5_000
    assert "1-hour" not in run_magic(ip, "context")  # well within the hour: the cache is read


def test_a_bad_cache_ttl_is_refused_and_the_value_in_force_stays(ip) -> None:
    run_magic(ip, "config PseudoClaude.cache_ttl = '1d'")
    assert current_agent(ip).settings.cache_ttl == "5m"


# --- prices ---------------------------------------------------------------------------------------


def test_compaction_iterations_cache_tokens_are_priced_at_their_own_rates() -> None:
    rates = price_of(MODEL).rates  # type: ignore[union-attr]
    usage = Usage(
        compaction_input_tokens=1_000_000,
        compaction_cache_read_input_tokens=1_000_000,
        compaction_cache_creation_input_tokens=1_000_000,
        compaction_output_tokens=1_000_000,
    )
    assert rates.dollars(usage) == pytest.approx(
        rates.input + rates.cache_read + rates.cache_write + rates.output
    )
    # before issue 43 both cache counts were billed as input: 3 x input + output
    assert rates.dollars(usage) < 3 * rates.input + rates.output


def test_the_stream_keeps_a_compaction_iterations_cache_tokens_apart(ip, fake) -> None:
    iterations = [
        {
            "type": "compaction",
            "input_tokens": 2_000,
            "cache_read_input_tokens": 140_000,
            "cache_creation_input_tokens": 6_000,
            "output_tokens": 800,
        },
        {"type": "message", "input_tokens": 3_000, "output_tokens": 20},
    ]
    fake.play(wire.answer("Continuing.", compaction=BLOCK, iterations=iterations))
    run_magic(ip, f'{API} "go"')
    usage = [e for e in entries(ip) if e["type"] == "usage"][-1]
    assert (usage["compaction_input_tokens"], usage["compaction_cache_read_input_tokens"]) == (2_000, 140_000)
    assert (usage["compaction_cache_creation_input_tokens"], usage["compaction_output_tokens"]) == (
        6_000,
        800,
    )
    loaded = load_session(current_agent(ip).session.dir)
    assert loaded.messages[0].reasoning[0].kind == "compaction"


def test_resume_keeps_the_on_demand_block_and_sends_it_first(ip, fake, workspace: Path) -> None:
    _two_runs(ip, fake)
    fake.play(wire.on_demand("Summary: planned."))
    run_magic(ip, "compact")
    session_id = current_agent(ip).session.writer.id
    run_magic(ip, "sessions new")
    fake.play(wire.answer("Resumed."))
    run_magic(ip, f'{API} --session {session_id} "where were we?"')
    first = fake.requests[-1].body["messages"][0]["content"][0]
    assert first["type"] == "compaction" and first["content"] == "Summary: planned."


def test_the_non_streamed_answer_keeps_applied_edits_and_the_diagnosis_too(fake) -> None:
    from pseudoclaude_nb.messages import Message
    from pseudoclaude_nb.providers.anthropic import AnthropicProvider
    from pseudoclaude_nb.providers.base import Request
    from tests.fakes import Reply

    answer = wire.message("ok").body | {
        "context_management": {"applied_edits": EDITS},
        "diagnostics": {"cache_miss_reason": {"type": "system_changed", "cache_missed_input_tokens": 900}},
    }
    fake.play(Reply(200, answer))
    provider = AnthropicProvider(api_key=KEY, base_url=fake.url, model=MODEL, max_retries=0)
    usage = provider.complete(Request(system="s", messages=[Message(role="user", content="hi")])).usage
    assert (usage.cleared_tool_uses, usage.cleared_input_tokens) == (3, 12_000)
    assert (usage.cache_miss_reason, usage.cache_missed_input_tokens) == ("system_changed", 900)
