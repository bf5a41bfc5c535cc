"""What a run and a session cost, and what the cache did (issue 31).

Pricing from the outside: each rate of a usage entry, the long-context tier, models the table
does not know, ``%config PseudoClaude.prices``. Then the wire: the real anthropic SDK and httpx
against local fake servers that send the documented usage shapes (Anthropic's ``message_start``
usage with the ``cache_creation`` TTL split and a cumulative ``message_delta``; OpenAI's final
``stream_options.include_usage`` chunk with ``prompt_tokens_details.cached_tokens``), through
``%agent`` in the in-process shell: the cache fields reach the session log, the end line shows
the cost, ``%context`` the session's cost, the hit ratio, the breakpoints and the next request's
expected cache read. Old logs without the new field still price.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from traitlets import TraitError

from pseudoclaude_nb import cost
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.context.cache import outlook
from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.messages import Message, Usage
from pseudoclaude_nb.session.spend import session_spend
from tests.fakes import anthropic_server as anthropic_wire
from tests.fakes import openai_server as openai_wire
from tests.scripts import run_magic, script, turn
from tests.test_provider_e2e import anthropic_fake, log_entries, openai_fake  # noqa: F401 (fixtures)


@pytest.fixture(autouse=True)
def no_overrides():
    cost.set_overrides({})
    yield
    cost.set_overrides({})


# --- pricing -------------------------------------------------------------------------------------------


def test_each_rate_is_applied_to_its_own_tokens() -> None:
    # Claude Sonnet 4.5: $3 input, $15 output, $3.75 5-minute write, $6 1-hour write, $0.30 read.
    one = 1_000_000
    assert cost.request_dollars(Usage(input_tokens=one), "claude-sonnet-4-5") == pytest.approx(3)
    assert cost.request_dollars(Usage(output_tokens=one), "claude-sonnet-4-5") == pytest.approx(15)
    assert cost.request_dollars(Usage(cache_creation_input_tokens=one), "claude-sonnet-4-5") == pytest.approx(
        3.75
    )
    hour = Usage(cache_creation_input_tokens=one, cache_creation_1h_input_tokens=one)
    assert cost.request_dollars(hour, "claude-sonnet-4-5") == pytest.approx(6)
    assert cost.request_dollars(Usage(cache_read_input_tokens=one), "claude-sonnet-4-5") == pytest.approx(0.3)
    # The documented multipliers hold in the shipped table: read 0.1x, 5-minute 1.25x, 1-hour 2x.
    rates = cost.price_of("claude-opus-4-5").rates
    assert (rates.cache_read, rates.cache_write, rates.cache_write_1h) == (
        0.1 * rates.input,
        1.25 * rates.input,
        2 * rates.input,
    )


def test_the_long_context_tier_prices_every_token_of_a_long_request() -> None:
    # Claude Haiku 5.5 is priced by prompt length (input + cache reads + writes): over 100K, all of it.
    short = Usage(input_tokens=50_000, cache_read_input_tokens=50_000, output_tokens=1_000)
    long = Usage(input_tokens=50_001, cache_read_input_tokens=50_000, output_tokens=1_000)
    assert cost.request_dollars(short, "claude-haiku-5-5") == pytest.approx(
        (50_000 * 0.1 + 50_000 * 0.01 + 1_000 * 0.5) / 1e6
    )
    assert cost.request_dollars(long, "claude-haiku-5-5") == pytest.approx(
        (50_001 * 0.5 + 50_000 * 0.05 + 1_000 * 2.5) / 1e6
    )


def test_a_model_matches_its_name_or_a_dated_snapshot_never_a_shorter_prefix() -> None:
    assert cost.price_of("claude-haiku-4-5-20251001") is cost.price_of("claude-haiku-4-5")
    assert cost.price_of("anthropic/claude-sonnet-5-5") is cost.price_of("claude-sonnet-5-5")
    assert cost.price_of("claude-opus-4-20250514").rates.input == 15
    # Not priced as claude-opus-4 ($15) or gpt-5.4: unknown, never a guess.
    assert cost.price_of("claude-opus-4-9") is None
    assert cost.price_of("gpt-5.4-pro") is None
    assert cost.price_of("") is None and cost.price_of(None) is None


def test_an_unknown_model_says_price_unknown() -> None:
    spend = cost.Spend()
    spend.add(Usage(input_tokens=1_000), "my-local-model")
    assert spend.cost().text() == "price unknown (my-local-model)"
    assert not spend.cost().known
    spend.add(Usage(input_tokens=1_000_000), "claude-sonnet-4-5")
    assert spend.cost().text() == "$3.00 + price unknown for 1 request (my-local-model)"


def test_cost_saved_by_the_cache_and_the_hit_ratio() -> None:
    spend = cost.Spend()
    spend.add(Usage(cache_creation_input_tokens=10_000), "claude-sonnet-4-5")  # the first request writes
    spend.add(Usage(input_tokens=100, cache_read_input_tokens=10_000), "claude-sonnet-4-5")
    c = spend.cost()
    assert c.dollars == pytest.approx((10_000 * 3.75 + 100 * 3 + 10_000 * 0.3) / 1e6)
    assert c.uncached == pytest.approx(20_100 * 3 / 1e6)
    assert c.saved_text() == f"cache saved {cost.money(c.uncached - c.dollars)}"
    assert spend.hit_ratio() == pytest.approx(10_000 / 20_100)


def test_money_reads_like_small_amounts() -> None:
    assert [cost.money(x) for x in (0, 0.0042, 0.021, 0.5, 12.345)] == [
        "$0.00",
        "$0.0042",
        "$0.021",
        "$0.500",
        "$12.35",
    ]


def test_config_prices_override_the_table_and_refuse_a_bad_entry() -> None:
    settings = PseudoClaude()
    settings.prices = {
        "my-local-model": {"input": 1, "output": 2},
        "claude-sonnet-4-5": {"input": 30, "output": 150, "cache_read": 3},
    }
    assert cost.request_dollars(Usage(input_tokens=1_000_000, output_tokens=1_000_000), "my-local-model") == 3
    # An override replaces the model's whole entry; a missing write price bills writes as input.
    assert cost.request_dollars(Usage(cache_creation_input_tokens=1_000_000), "claude-sonnet-4-5") == 30
    with pytest.raises(TraitError, match=r"\['m'\]\['output'\] missing: refused; a price is a number"):
        settings.prices = {"m": {"input": 1}}
    with pytest.raises(TraitError, match="unknown keys"):
        settings.prices = {"m": {"input": 1, "output": 1, "cached": 0.1}}


def test_the_shipped_table_names_its_date_and_source_for_every_family() -> None:
    data = json.loads(cost.PRICES_FILE.read_text())
    for family in data["families"]:
        assert family["as_of"] and family["source"].startswith("https://")
    assert all(p.as_of and p.source for p in cost.shipped().values())


# --- the session log --------------------------------------------------------------------------------------


def test_usage_lines_keep_their_layout_and_old_logs_still_price(tmp_path: Path) -> None:
    # Without 1-hour writes the entry is as before (the timeline's fast scan reads that layout).
    assert "cache_creation_1h_input_tokens" not in Usage(input_tokens=1).to_dict()
    assert Usage(cache_creation_1h_input_tokens=5).to_dict()["cache_creation_1h_input_tokens"] == 5
    log = tmp_path / "conversation.jsonl"
    old = {
        "v": 1,
        "type": "usage",
        "id": "a" * 32,
        "ts": 1.0,
        "input_tokens": 1_000_000,
        "output_tokens": 0,
        "messages": 2,
        "model": "claude-sonnet-4-5",
    }  # an older writer: no cache fields at all
    log.write_text(json.dumps(old) + "\n")
    spend = session_spend(tmp_path)
    assert spend.cost().text() == "$3.00" and spend.usage.cache_read_input_tokens == 0
    # Read incrementally: what is appended later is added; a torn last line waits for its end.
    new = old | {"id": "b" * 32, "ts": 2.0, "input_tokens": 0, "cache_read_input_tokens": 1_000_000}
    with log.open("a") as f:
        f.write(json.dumps(new) + "\n" + '{"v":1,"type":"usage","input_tok')
    spend = session_spend(tmp_path)
    assert spend.cost().text() == "$3.30" and spend.last_ts == 2.0 and len(spend.requests) == 2


# --- the cache outlook ----------------------------------------------------------------------------------------


def test_the_next_request_reads_what_the_previous_one_sent_within_the_ttl() -> None:
    msgs = [Message(role="user", content="a" * 3500), Message(role="assistant", content="b" * 350)]
    last = Usage(input_tokens=10, cache_read_input_tokens=4_000, cache_creation_input_tokens=900)
    now = 1_000.0
    fresh = outlook(
        provider="anthropic",
        head_tokens=3_000,
        messages=msgs,
        last=last,
        last_ts=now - 60,
        anchored=True,
        now=now,
    )
    assert fresh.expected_read == 4_910
    assert fresh.invalidated_by_replace == 4_910 - 3_000
    assert [b.where for b in fresh.breakpoints] == [
        "tools + system prompt",
        "message 1, where the previous request ended",
        "the next prompt (the whole request)",
    ]
    late = outlook(
        provider="anthropic",
        head_tokens=3_000,
        messages=msgs,
        last=last,
        last_ts=now - 600,
        anchored=True,
        now=now,
    )
    assert late.expected_read == 0 and "expired" in late.reason
    replaced = outlook(
        provider="anthropic",
        head_tokens=3_000,
        messages=msgs,
        last=last,
        last_ts=now - 60,
        anchored=False,
        now=now,
    )
    assert replaced.expected_read == 3_000 and replaced.invalidated_by_replace == 0


# --- the wire, through %agent ---------------------------------------------------------------------------


def usage_lines(ip) -> list[dict]:
    return log_entries(ip, "usage")


def test_anthropic_cache_writes_by_ttl_and_reads_reach_the_log_and_the_end_line(
    ip, workspace, anthropic_fake
) -> None:
    (workspace / "notes.txt").write_text("milk\n")
    anthropic_fake.play(
        # message_start carries the input side with the documented TTL split of the writes;
        # message_delta the cumulative counts (output, and the input side again).
        anthropic_wire.answer(
            "Looking.",
            [("toolu_1", "list_files", {})],
            usage={"input_tokens": 20, "cache_creation_input_tokens": 30_000, "output_tokens": 1},
            cache_creation={"ephemeral_5m_input_tokens": 20_000, "ephemeral_1h_input_tokens": 10_000},
            delta_usage={
                "output_tokens": 400,
                "input_tokens": 20,
                "cache_creation_input_tokens": 30_000,
                "cache_read_input_tokens": 0,
            },
        ),
        anthropic_wire.answer(
            "One file.",
            usage={"input_tokens": 50, "cache_read_input_tokens": 30_000, "output_tokens": 1},
            cache_creation={"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
            delta_usage={"output_tokens": 100},
        ),
    )
    run_magic(ip, "config PseudoClaude.model = 'claude-sonnet-4-5'")
    out = run_magic(ip, 'agent --provider anthropic --mode auto "what is here?"')
    first, second = usage_lines(ip)
    assert (first["input_tokens"], first["output_tokens"], first["cache_creation_input_tokens"]) == (
        20,
        400,
        30_000,
    )
    assert first["cache_creation_1h_input_tokens"] == 10_000
    assert (second["cache_read_input_tokens"], second["output_tokens"]) == (30_000, 100)
    assert "cache_creation_1h_input_tokens" not in second  # none: the line keeps its old layout
    # Sonnet 4.5: 70 x $3 + 500 x $15 + 20,000 x $3.75 + 10,000 x $6 + 30,000 x $0.30 (per million)
    dollars = (70 * 3 + 500 * 15 + 20_000 * 3.75 + 10_000 * 6 + 30_000 * 0.3) / 1e6
    assert f"cache read 30,000 (50% of the steps' input) · cost {cost.money(dollars)}" in out
    assert f"session cost {cost.money(dollars)}" in out
    # The breakpoint of the first request's end is still on the second request's turn 1.
    sent = anthropic_fake.requests[1].body
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}
    marked = [i for i, t in enumerate(sent["messages"]) if "cache_control" in t["content"][-1]]
    assert marked == [0, 2]

    shown = run_magic(ip, "context")
    assert (
        f"session {cost.money(dollars)} (2 requests, cache saved" in shown
        and "cache hit 50% of the session's input (steps and summaries)" in shown
    )
    assert "next request reads ~30,050 tokens from the cache" in shown
    assert "breakpoint 2: after message 3, where the previous request ended" in shown
    # A usage line with the 1-hour field is still a usage point of the timeline, and the log loads.
    from pseudoclaude_nb.session import load_session
    from pseudoclaude_nb.session.timeline import build_timeline

    folder = current_agent(ip).session.dir
    assert [tokens for _, tokens in build_timeline(folder).usage] == [30_420, 30_150]
    assert load_session(folder).usage_anchor == (30_150, 4)
    data = json.loads(run_magic(ip, "context --json"))
    assert data["cache"]["expected_cache_read"] == 30_050 and data["cost"]["cache_hit_ratio"] == round(
        30_000 / 60_070, 4
    )


def test_openai_cached_tokens_reach_the_log_and_the_cost(ip, openai_fake) -> None:
    openai_fake.play(
        openai_wire.answer(
            "Hello.",
            usage={
                "prompt_tokens": 20_000,
                "completion_tokens": 1_000,
                "total_tokens": 21_000,
                "prompt_tokens_details": {"cached_tokens": 16_384},
            },
        )
    )
    run_magic(ip, "config PseudoClaude.model = 'gpt-5.4'")
    out = run_magic(ip, 'agent --provider openai "hi"')
    assert openai_fake.requests[0].body["stream_options"] == {"include_usage": True}
    (line,) = usage_lines(ip)
    assert (line["input_tokens"], line["cache_read_input_tokens"], line["output_tokens"]) == (
        3_616,
        16_384,
        1_000,
    )
    dollars = (3_616 * 2.5 + 16_384 * 0.25 + 1_000 * 15) / 1e6
    assert f"cache read 16,384 (82% of the steps' input) · cost {cost.money(dollars)}" in out


def test_an_unknown_model_run_says_price_unknown_and_an_override_prices_it(
    ip, workspace, anthropic_fake
) -> None:
    anthropic_fake.play(anthropic_wire.answer("ok", usage={"input_tokens": 2_000_000, "output_tokens": 10}))
    run_magic(ip, "config PseudoClaude.model = 'claude-someday-9'")
    out = run_magic(ip, 'agent --provider anthropic "hi"')
    assert (
        "cost price unknown (claude-someday-9)" in out and "$" not in out.split("cost ", 1)[1].split(" · ")[0]
    )
    run_magic(ip, "config PseudoClaude.prices = {'claude-someday-9': {'input': 1, 'output': 100}}")
    assert "session $2.00 (1 request" in run_magic(ip, "context")


def test_the_demo_script_reports_cache_reads_offline(ip, workspace) -> None:
    (workspace / "s.json").write_text(
        json.dumps(script(*[turn(f"step {i}", ("list_files", {})) for i in range(3)], turn("done")))
    )
    run_magic(ip, f"config PseudoClaude.script = '{workspace / 's.json'}'")
    out = run_magic(ip, 'agent --provider scripted --mode auto "go"')
    lines = usage_lines(ip)
    assert lines[0]["cache_read_input_tokens"] == 0 and lines[0]["cache_creation_input_tokens"] > 0
    assert all(e["cache_read_input_tokens"] > 0 for e in lines[1:])  # each step reads the last one's prefix
    assert "cost price unknown (scripted-test)" in out
    assert time.time() - session_spend(current_agent(ip).session.dir).last_ts < 300


def test_the_gauge_shows_the_runs_cost_and_hit_ratio_then_the_sessions() -> None:
    from pseudoclaude_nb.events import ContextState, RunFinished, RunSummary, StepFinished
    from pseudoclaude_nb.widgets.gauge import ContextGauge, gauge_html, gauge_text

    gauge = ContextGauge()
    gauge(ContextState(5_000, 4_000, 200_000, 167_000, False, 0, 0))
    answer = Message(role="assistant", content="ok")
    gauge(StepFinished(1, Usage(cache_creation_input_tokens=1_000_000), answer, "claude-sonnet-4-5"))
    gauge(StepFinished(2, Usage(cache_read_input_tokens=1_000_000), answer, "claude-sonnet-4-5"))
    assert "cache read 1,000,000 / write 0 · run $4.05 · cache hit 50%" in gauge_text(gauge.state)
    summary = RunSummary(
        status="done", session_spend=cost.Spend([("claude-sonnet-4-5", Usage(input_tokens=10_000_000))])
    )
    gauge(RunFinished(summary))
    assert "run $4.05 · cache hit 50% of the steps' input · session $30.00" in gauge_text(gauge.state)
    assert "run $4.05 · cache hit 50% of the steps&#x27; input · session $30.00" in gauge_html(gauge.state)


def test_the_gauge_says_an_unknown_price_once_not_for_run_and_session() -> None:
    from pseudoclaude_nb.events import ContextState, RunFinished, RunSummary, StepFinished
    from pseudoclaude_nb.widgets.gauge import ContextGauge, gauge_text

    gauge = ContextGauge()
    gauge(ContextState(5_000, 4_000, 200_000, 167_000, False, 0, 0))
    answer = Message(role="assistant", content="ok")
    gauge(StepFinished(1, Usage(input_tokens=2_000, cache_read_input_tokens=2_000), answer, "local-model"))
    spend = cost.Spend([("local-model", Usage(input_tokens=2_000, cache_read_input_tokens=2_000))])
    gauge(RunFinished(RunSummary(status="done", session_spend=spend)))
    text = gauge_text(gauge.state)
    assert (
        text.count("price unknown") == 1
        and "price unknown (local-model) · cache hit 50% of the steps' input" in text
    )


def test_the_demo_is_priced_as_if_a_named_model_and_says_so(ip) -> None:
    """issue 44: no dollar figure was ever seen without a key. The demo's model is priced as if
    it were claude-sonnet-4-5, said in every figure; a price given to it wins, said as it is."""
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000)
    demo = cost.Spend([("pseudoclaude-demo", usage)]).cost()
    sonnet = cost.Spend([("claude-sonnet-4-5", usage)]).cost()
    assert demo.dollars == sonnet.dollars > 0 and demo.known
    assert demo.text() == f"{sonnet.text()} as if claude-sonnet-4-5"
    run_magic(ip, "config PseudoClaude.prices = {'pseudoclaude-demo': {'input': 1, 'output': 10}}")
    assert cost.Spend([("pseudoclaude-demo", usage)]).cost().text() == "$2.00"
    assert cost.Spend([("scripted-test", usage)]).cost().text() == "price unknown (scripted-test)"
