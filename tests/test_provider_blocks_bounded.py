"""``--strategy api``: the provider's compaction block is kept only within bounds (issue 41).

The adversary's runs, against a fake Anthropic server (the real SDK): a compaction block nested
900 deep ended ``%agent`` with a raw ``TypeError`` and the answer, already paid for, was lost; a
20 MB block was kept, was invisible to the estimate ("~15 tokens") and to search. Now a block
past ``provider_blocks.MAX_DEPTH`` or ``MAX_BYTES`` stops the run with a clear error and the
answer kept; a block within them counts in the estimate and its summary is searchable.
"""

from __future__ import annotations

import json

import pytest

from pseudoclaude_nb import provider_blocks
from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.messages import Message, Reasoning
from pseudoclaude_nb.providers.anthropic import AnthropicProvider
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as wire
from tests.scripts import run_magic

KEY = "sk-ant-bounds-0123456789"
AGENT = "agent --provider anthropic --model claude-sonnet-4-6 --strategy api --mode auto"
ANSWER = "Continuing from the summary: mean() is next."


def nested(levels: int) -> object:
    value: object = "bottom"
    for _ in range(levels):
        value = [value]
    return value


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    with FakeServer("anthropic") as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        yield fake


def compacting(server: FakeServer, block: dict, *, usage: dict | None = None) -> None:
    server.play(
        wire.answer("Noted: the stats module.", usage={"input_tokens": 90_000, "output_tokens": 20}),
        wire.answer(ANSWER, compaction=block, usage=usage or {"input_tokens": 10, "output_tokens": 5}),
    )


def assert_refused_and_answer_kept(ip, out: str, why: str) -> None:
    assert "✗ error" in out and why in out and "refused; the answer it came with is kept" in out
    messages = current_agent(ip).session.conversation.messages()
    assert messages[-1].content == ANSWER  # the paid answer
    assert not any(r.kind == "compaction" for m in messages for r in m.reasoning)
    assert messages[0].content == "plan a stats module"  # nothing was replaced
    log = (current_agent(ip).session.dir / "conversation.jsonl").read_text(encoding="utf-8")
    assert ANSWER in log and '"type":"replace"' not in log


def test_a_block_nested_900_deep_stops_the_run_clearly_and_keeps_the_answer(ip, server) -> None:
    compacting(server, {"type": "compaction", "content": "ok", "encrypted_content": nested(900)})
    run_magic(ip, f'{AGENT} "plan a stats module"')
    out = run_magic(ip, f'{AGENT} "go on"')
    assert_refused_and_answer_kept(ip, out, f"nests more than {provider_blocks.MAX_DEPTH} levels deep")


def test_a_20_mb_block_stops_the_run_clearly_and_keeps_the_answer(ip, server) -> None:
    compacting(server, {"type": "compaction", "content": "x" * 20_000_000})
    run_magic(ip, f'{AGENT} "plan a stats module"')
    out = run_magic(ip, f'{AGENT} "go on"')
    assert_refused_and_answer_kept(ip, out, f"(at most {provider_blocks.MAX_BYTES:,} are kept)")


def test_a_block_within_bounds_counts_in_the_estimate_and_is_searchable(ip, server) -> None:
    summary = "The zebrafish pipeline keeps its ordering. " + "Details of the earlier work. " * 10_000
    compacting(
        server, {"type": "compaction", "content": summary}, usage={"input_tokens": 10, "output_tokens": 5}
    )
    run_magic(ip, f'{AGENT} "plan a stats module"')
    out = run_magic(ip, f'{AGENT} "go on"')
    assert "compacted (server)" in out
    estimate = json.loads(run_magic(ip, "context --json"))["estimated_tokens"]
    assert estimate >= len(summary) / 3.5  # the server said 15 tokens; the block goes back whole
    found = run_magic(ip, "sessions search zebrafish")
    assert "1 match for 'zebrafish'" in found


def test_a_block_from_a_log_past_the_bounds_goes_back_as_the_no_op_block(server) -> None:
    """A log is workspace input: a hostile one's 900-deep block must not crash the request."""
    provider = AnthropicProvider(api_key=KEY, base_url=server.url, model="claude-sonnet-4-6")
    block = Reasoning(kind="compaction", data=json.dumps({"type": "compaction", "content": nested(900)}))
    turns = provider.wire_messages(
        [Message(role="assistant", content="hi", reasoning=(block,)), Message(role="user", content="go")],
        server=True,
    )
    assert turns[0]["content"][0] == {"type": "compaction", "content": None}


def test_the_bounds_are_named_once_for_every_provider() -> None:
    assert (
        provider_blocks.kept_json({"type": "compaction", "content": "s"})
        == '{"type":"compaction","content":"s"}'
    )
    with pytest.raises(provider_blocks.OutOfBounds, match="nests more than 32"):
        provider_blocks.kept_json({"a": nested(40)})
    assert provider_blocks.depth(nested(5)) == 5 and provider_blocks.depth("x") == 0
    assert provider_blocks.readable_text('{"type": "compaction", "content": "the summary"}') == "the summary"
    assert provider_blocks.readable_text('{"type": "compaction", "encrypted_content": "opaque"}') is None
