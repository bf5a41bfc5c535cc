"""The cache guard (issue 43): ``%config PseudoClaude.cache_guard = USD`` asks before a request whose
expected cache write costs more, and with nobody to answer stops the run with a line that says why
and how to go on. Through ``%agent`` with the real ``anthropic`` SDK against a local server.
"""

from __future__ import annotations

import json
import time

import pytest
from IPython.core.error import StdinNotImplementedError

from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.providers.base import Request
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as wire
from tests.scripts import run_magic

KEY = "sk-ant-guard-2b7c"
AGENT = "agent --provider anthropic --model claude-sonnet-4-6 --mode auto --no-memory"
BIG = "a long specification of the stats module to write. " * 4_000  # ~57,000 tokens by the estimate


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch):
    with FakeServer("anthropic") as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        yield server


def asked(ip, *answers: str) -> list[str]:
    prompts: list[str] = []
    replies = list(answers)

    def ask(prompt: str) -> str:
        prompts.append(prompt)
        return replies.pop(0)

    current_agent(ip).ask = ask
    return prompts


def test_off_by_default_nothing_is_asked(ip, fake) -> None:
    prompts = asked(ip)
    fake.play(wire.answer("Read it."))
    assert "Read it." in run_magic(ip, f'{AGENT} "{BIG}"')
    assert prompts == []


def test_over_the_guard_it_asks_and_a_yes_sends_the_request(ip, fake) -> None:
    run_magic(ip, "config PseudoClaude.cache_guard = 0.1")
    prompts = asked(ip, "y")
    fake.play(
        wire.answer(
            "Read it.", usage={"input_tokens": 10, "cache_creation_input_tokens": 57_000, "output_tokens": 5}
        )
    )
    out = run_magic(ip, f'{AGENT} "{BIG}"')
    assert (
        len(prompts) == 1
        and "write ~" in prompts[0]
        and "claude-sonnet-4-6's cache-write price" in prompts[0]
    )
    assert "cache_guard = 0.1" in prompts[0] and "no request was sent in this session yet" in prompts[0]
    assert "Read it." in out and "sent with your approval" in out


def test_a_no_stops_the_run_before_the_request_and_says_how_to_go_on(ip, fake) -> None:
    run_magic(ip, "config PseudoClaude.cache_guard = 0.1")
    asked(ip, "n")
    out = run_magic(ip, f'{AGENT} "{BIG}"')
    assert "stopped before the request, as you said" in out and "%compact" in out
    assert fake.requests == []  # nothing was sent, nothing paid


def test_with_nobody_to_answer_the_run_stops_with_why_and_how(ip, fake) -> None:
    run_magic(ip, "config PseudoClaude.cache_guard = 0.1")

    def no_stdin(prompt: str) -> str:
        raise StdinNotImplementedError(
            "raw_input was called, but this frontend does not support input requests."
        )

    current_agent(ip).ask = no_stdin
    out = run_magic(ip, f'{AGENT} "{BIG}"')
    assert "nobody could confirm it here (StdinNotImplementedError)" in out
    assert "%config PseudoClaude.cache_guard = " in out and "None" in out
    assert fake.requests == []
    log = current_agent(ip).session.dir / "conversation.jsonl"
    kinds = [json.loads(line)["type"] for line in log.read_text().splitlines() if line.strip()]
    assert "usage" not in kinds and "spend" not in kinds


def test_a_step_that_reads_the_last_request_from_the_cache_is_not_asked(ip, fake) -> None:
    run_magic(ip, "config PseudoClaude.cache_guard = 0.1")
    prompts = asked(ip, "y")
    fake.play(
        wire.answer(
            "Read it.", usage={"input_tokens": 10, "cache_creation_input_tokens": 57_000, "output_tokens": 5}
        ),
        wire.answer(
            "And more.", usage={"input_tokens": 10, "cache_read_input_tokens": 57_000, "output_tokens": 5}
        ),
    )
    run_magic(ip, f'{AGENT} "{BIG}"')
    run_magic(ip, f'{AGENT} "and then?"')
    assert len(prompts) == 1  # the second request reads the first from the cache


def test_expiry_and_a_changed_system_prompt_move_the_cache_point(ip, fake) -> None:
    from pseudoclaude_nb.cache_guard import CacheGuard

    fake.play(
        wire.answer(
            "Read it.", usage={"input_tokens": 10, "cache_creation_input_tokens": 57_000, "output_tokens": 5}
        )
    )
    run_magic(ip, f'{AGENT} "{BIG}"')
    active = current_agent(ip).session
    guard = CacheGuard(
        0.1, state=active.context.shared, log=active.writer.path, session=active.id, model="claude-sonnet-4-6"
    )
    request = Request(system="You are terse.", messages=active.conversation.messages())
    now = time.time()
    assert guard.outlook(request, now=now).read == 57_010  # type: ignore[union-attr]
    late = guard.outlook(request, now=now + 400)
    assert late is not None and late.read == 0 and "5-minute cache has expired" in late.reason
    hour = CacheGuard(
        0.1,
        state=active.context.shared,
        log=active.writer.path,
        session=active.id,
        model="claude-sonnet-4-6",
        ttl="1h",
    )
    assert hour.outlook(request, now=now + 400).read == 57_010  # type: ignore[union-attr]
    CacheGuard._heads[active.id] = "another system prompt"
    changed = guard.outlook(request, now=now)
    assert (
        changed is not None and changed.read == 0 and "system prompt or the tools changed" in changed.reason
    )


def test_a_model_without_a_price_is_never_asked_about(ip, fake) -> None:
    run_magic(ip, "config PseudoClaude.cache_guard = 0.0")
    prompts = asked(ip)
    fake.play(wire.answer("ok", model="claude-unpriced-9"))
    run_magic(ip, f'agent --provider anthropic --model claude-unpriced-9 --mode auto --no-memory "{BIG}"')
    assert prompts == []


def test_a_negative_guard_is_refused(ip) -> None:
    run_magic(ip, "config PseudoClaude.cache_guard = -1")
    assert current_agent(ip).settings.cache_guard is None
