"""The lab on a real model, within a budget (issue 46), against fake servers on 127.0.0.1.

``python -m pseudoclaude_nb lab --provider P --model M --budget-usd X`` sends every request of
every arm through this package's own provider — the real ``anthropic`` SDK and ``httpx``, here
to ``tests/fakes`` servers that answer like each provider (``lab_player``: a model doing the
lab's task, whose summaries leave out a fact on purpose, and that bills its prompt cache as the
provider does). The tests check what a person relies on: the expected cost of each arm is
printed before any request and asked about (``--yes`` answers; nobody to ask: nothing is sent);
an arm stops at its share of the budget and says so; the results say "real model", the model
and the date; the facts kept are those the model's own summaries kept; the prompt cache is the
provider's normal one; the key is never printed.
"""

from __future__ import annotations

import datetime
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pseudoclaude_nb import cli
from pseudoclaude_nb.errors import ConfigError
from pseudoclaude_nb.lab import real
from pseudoclaude_nb.lab.meter import BudgetReached, Meter, metered
from pseudoclaude_nb.lab.task import MUST_KEEP
from pseudoclaude_nb.messages import Message, Usage
from pseudoclaude_nb.providers.base import CompactsOnDemand, ManagesContext, RefusesBlocks, Request
from tests.fakes import FakeServer
from tests.fakes.lab_player import LabPlayer, Wire
from tests.strategy_support import DROP_READS

ANTHROPIC_KEY = "sk-ant-api03-lab-test-key-never-printed"
OPENAI_KEY = "sk-proj-lab-test-key-never-printed"
TODAY = datetime.date.today().isoformat()


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "mine.py").write_text(DROP_READS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """A fake provider whose model plays the lab's task; the key and endpoint in the environment."""
    servers: list[FakeServer] = []

    def start(wire: Wire, forget: tuple[str, ...] = ()) -> tuple[FakeServer, LabPlayer]:
        player = LabPlayer(8, wire, forget=forget)
        fake = FakeServer(wire, respond=player)
        servers.append(fake)
        if wire == "anthropic":
            monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
            monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        else:
            monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
            monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        return fake, player

    yield start
    for fake in servers:
        fake.close()
        fake.check()


def lab(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["lab", "--quick", *args])
    out, err = capsys.readouterr()
    return code, out, err


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_anthropic_the_expected_cost_is_asked_about_first_and_the_real_summaries_are_measured(
    folder: Path, serve, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, player = serve("anthropic", forget=("open-error",))
    asked: list[tuple[str, int, str]] = []

    def answer(question: str) -> str:
        # When the question comes: the expected cost is on the screen, and nothing was sent.
        asked.append((question, len(fake.requests), capsys.readouterr().out))
        return "y"

    monkeypatch.setattr("sys.stdin", Terminal())
    monkeypatch.setattr("builtins.input", answer)
    args = ["--provider", "anthropic", "--model", "claude-sonnet-4-5", "--budget-usd", "6"]
    code, out, err = lab(capsys, *args, "--arms", "compact,rollover,mine:DropReads", "--json", "lab.json")
    assert code == 0, err
    ((question, sent_before, shown),) = asked
    assert sent_before == 0 and "up to $6.00? [y/N]" in question and "(claude-sonnet-4-5)" in question
    assert "Expected cost of each arm on claude-sonnet-4-5 (anthropic)" in shown
    assert "Expected in all: $" in shown and "$1.50 an arm" in shown
    figures = json.loads((folder / "lab.json").read_text())
    assert figures["mode"] == "real model"
    assert figures["real"]["model"] == "claude-sonnet-4-5" and figures["real"]["date"] == TODAY
    assert figures["arms"] == ["none", "compact", "rollover", "drop-reads"]
    expected = figures["real"]["expected_usd"]
    for name, dollars in expected.items():
        assert dollars > 0 and f"${dollars:.3f}" in shown, (name, dollars)
    # Marked in what is printed: "real model", the model, the date.
    assert f"# Strategy lab on a real model: claude-sonnet-4-5 (anthropic), {TODAY}" in out
    assert out.count(f"Real model: claude-sonnet-4-5 (anthropic), {TODAY}.") >= 3
    runs = {r["arm"]: r for r in figures["side_by_side"]}
    assert set(runs) == {"none", "compact", "rollover", "drop-reads"}
    assert all(
        r["summarizer"] == "real" and r["failed"] is None and r["stopped"] is None for r in runs.values()
    )
    # Fidelity from the model's own summaries: the fake's leave out the open error, and so the
    # arms that summarize (or hand off) lost it; nothing else.
    assert player.played.summaries and player.played.handoffs
    assert all("month must be in 1..12" not in s for s in player.played.summaries)
    assert runs["none"]["kept"] == {f.key: True for f in MUST_KEEP}
    for name in ("compact", "rollover"):
        assert runs[name]["replace_count"] > 0
        assert runs[name]["kept"] == {f.key: f.key != "open-error" for f in MUST_KEEP}, name
    assert runs["drop-reads"]["replaces"].get("drop") and all(runs["drop-reads"]["kept"].values())
    # What the arms cost is what the provider reported, priced: the fake's usage, request by request.
    reported = sum(u[1] + u[2] + u[3] for u in player.played.usages)
    assert sum(r["input_tokens"] for r in runs.values()) == reported
    assert sum(r["steps"] + r["summaries"] for r in runs.values()) == len(fake.requests)
    # The prompt cache as any run uses it: the package's breakpoints, read back by the provider.
    body = fake.requests[5].body
    assert body["system"][-1]["cache_control"] and body["messages"][-1]["content"][-1]["cache_control"]
    assert all(r["cache_read"] > r["cache_write"] > 0 for r in runs.values())
    # Unattended, the model's file tools ran (its commands would have been refused).
    sent = "".join(r.raw.decode() for r in fake.requests)
    assert "wrote 215 bytes to tests/test_dates.py" in sent and "did not allow" not in sent
    everything = out + err + (folder / "lab.json").read_text()
    assert ANTHROPIC_KEY not in everything and "sk-ant" not in everything


def test_an_arm_stops_at_its_budget_and_the_next_arm_plays(
    folder: Path, serve, capsys: pytest.CaptureFixture[str]
) -> None:
    fake, player = serve("chat")
    args = [
        "--provider",
        "openai",
        "--model",
        "gpt-5.4",
        "--openai-api",
        "chat",
        "--budget-usd",
        "0.6",
        "--yes",
    ]
    code, out, err = lab(capsys, *args, "--arms", "rollover", "--json", "lab.json")
    assert code == 0, err
    assert "more than the budget: an arm that needs more than its share stops at it" in out
    figures = json.loads((folder / "lab.json").read_text())
    none, rollover = figures["side_by_side"]
    cap = figures["real"]["arm_budget_usd"]
    assert cap == pytest.approx(0.3)
    assert none["stopped"].startswith("stopped at the budget: $0.2") and none["failed"] is None
    assert none["dollars"] <= cap < figures["real"]["expected_usd"]["none"]
    assert none["steps"] < 44  # the task is 44 steps: it stopped mid-way
    # The next arm played on, within its own share.
    assert rollover["steps"] > 0 and rollover["dollars"] <= cap
    assert "none (no management) (stopped at the budget)" in out
    assert "none (no management): stopped at the budget: $0.2" in out and "nothing more was sent" in out
    assert "· none (no management):" in err and "stopped at the budget" in err
    assert sum(r["steps"] + r["summaries"] for r in (none, rollover)) == len(fake.requests)
    assert all(r.path == "/v1/chat/completions" for r in fake.requests)
    assert none["cache_read"] > 0  # OpenAI's automatic caching, read back


def test_on_the_responses_api_the_cache_is_read_and_the_facts_measured(
    folder: Path, serve, capsys: pytest.CaptureFixture[str]
) -> None:
    fake, player = serve("responses", forget=("stdlib",))
    args = [
        "--provider",
        "openai",
        "--model",
        "gpt-5.4",
        "--openai-api",
        "responses",
        "--budget-usd",
        "4",
        "--yes",
    ]
    code, out, err = lab(capsys, *args, "--arms", "compact", "--json", "lab.json")
    assert code == 0, err
    assert all(r.path == "/v1/responses" for r in fake.requests)
    figures = json.loads((folder / "lab.json").read_text())
    none, compact = figures["side_by_side"]
    assert compact["summaries"] == len(player.played.summaries) > 0
    assert compact["kept"]["stdlib"] is False and sum(compact["kept"].values()) == len(MUST_KEEP) - 1
    assert all(none["kept"].values()) and none["cache_read"] > 0 and none["cache_write"] == 0
    assert OPENAI_KEY not in out + err


def test_with_nobody_to_ask_nothing_is_sent(folder: Path, serve, capsys: pytest.CaptureFixture[str]) -> None:
    fake, _ = serve("anthropic")
    code, out, err = lab(
        capsys, "--provider", "anthropic", "--model", "claude-sonnet-4-5", "--budget-usd", "2"
    )
    assert code == 2 and fake.requests == []
    assert "Expected cost of each arm" in out
    assert "nobody to answer (stdin is not a terminal): nothing was sent. Rerun with --yes" in err


def test_an_answer_other_than_yes_sends_nothing(
    folder: Path, serve, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, _ = serve("anthropic")
    monkeypatch.setattr("sys.stdin", Terminal())
    monkeypatch.setattr("builtins.input", lambda _q: "")
    code, _out, err = lab(
        capsys, "--provider", "anthropic", "--model", "claude-sonnet-4-5", "--budget-usd", "2"
    )
    assert code == 1 and fake.requests == [] and "not sent: nothing was spent" in err


def test_no_key_is_one_line_before_anything(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = lab(
        capsys, "--provider", "anthropic", "--model", "claude-sonnet-4-5", "--budget-usd", "2"
    )
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert "ANTHROPIC_API_KEY is not set" in err


def test_an_arm_the_provider_cannot_serve_is_left_out_or_refused(folder: Path, serve) -> None:
    serve("chat")
    chat = real.RealModel("openai", "gpt-5.4", 1.0, openai_api="chat")
    specs, left_out = real.served(chat, None, folder)
    assert [s.name for s in specs] == ["none", "compact", "rollover"]
    assert len(left_out) == 1 and left_out[0].startswith("api: ")
    with pytest.raises(ConfigError, match="^--arms api: "):
        real.served(chat, ["api"], folder)
    specs, _ = real.served(chat, ["mine:DropReads"], folder)
    assert [s.name for s in specs] == ["none", "drop-reads"]


def test_the_meter_prices_what_the_cache_should_read_and_refuses_past_the_budget() -> None:
    meter = Meter("claude-sonnet-4-5", cap=0.05)
    first = Request(system="s" * 7_000, messages=[Message(role="user", content="go " * 3_000)])
    cold, tokens = meter.expected(first)
    meter.admit(first)
    meter.took(first, Usage(cache_creation_input_tokens=tokens, output_tokens=300), [])
    longer = Request(system=first.system, messages=[*first.messages, Message(role="assistant", content="ok")])
    warm, _ = meter.expected(longer)
    assert warm < cold  # most of it is the prefix the first request wrote
    other = Request(system="t" * 7_000, messages=longer.messages)
    assert meter.expected(other)[0] > warm  # another system prompt: nothing to read
    big = Request(system=first.system, messages=[Message(role="user", content="x" * 200_000)])
    with pytest.raises(BudgetReached, match=r"stopped at the budget: \$0\.0\d+ of the arm's \$0\.050 spent"):
        meter.admit(big)
    assert meter.requests == [first]  # the refused one was never sent


def test_the_metered_provider_keeps_exactly_its_capabilities(monkeypatch: pytest.MonkeyPatch) -> None:
    from pseudoclaude_nb.providers import make_provider

    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    meter = Meter("claude-sonnet-4-5", cap=1.0)
    anthropic = metered(make_provider("anthropic", model="claude-sonnet-4-5"), meter)
    chat = metered(make_provider("openai", model="gpt-5.4", openai_api="chat"), meter)
    for capability in (ManagesContext, CompactsOnDemand, RefusesBlocks):
        assert isinstance(anthropic, capability) and not isinstance(chat, capability)
    anthropic.server_context = None  # type: ignore[attr-defined]
    assert anthropic.model == "claude-sonnet-4-5" and chat.name == "openai"


def test_an_unattended_run_writes_files_and_runs_no_commands() -> None:
    """The model may write and edit files in the arm's workspace; shell and Python are refused."""
    from pseudoclaude_nb.events import ToolStarted
    from pseudoclaude_nb.messages import ToolCall

    guard = real.FileToolsOnly()
    answers = {}
    for name in ("write_file", "edit_file", "bash", "run_python"):
        guard.listen(ToolStarted(ToolCall(id=f"c-{name}", name=name, arguments={})))
        answers[name] = guard.ask(f"allow {name}(...)? [y/N, a = always allow {name}]: ")
    assert answers == {"write_file": "y", "edit_file": "y", "bash": "n", "run_python": "n"}
