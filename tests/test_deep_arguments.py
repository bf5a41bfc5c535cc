"""Tool-call arguments nested thousands of levels deep (issue 19).

Python's ``json`` recurses once per level and raises ``RecursionError`` near 1,000. A
provider's deeper arguments are refused where they arrive, with a clear error and nothing
kept; arguments already in memory or in a log (built by hand, written by an older version)
are sized without recursion, so ``%context`` and the next run work.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pseudoclaude_nb.errors import StreamError
from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.messages import Message, ToolCall
from pseudoclaude_nb.nesting import MAX_ARGUMENT_DEPTH, encoded_size, text_nesting, value_depth
from pseudoclaude_nb.providers.base import parse_arguments
from pseudoclaude_nb.session import load_session
from pseudoclaude_nb.session.entries import encode, message_entry
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as anthropic_wire
from tests.scripts import run_magic as run
from tests.scripts import script, turn

DEEP = 5_000


def deep_text(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


def deep_value(levels: int) -> dict:
    top: dict = {}
    cur = top
    for _ in range(levels):
        cur["a"] = {}
        cur = cur["a"]
    return top


@pytest.fixture
def anthropic_fake(monkeypatch: pytest.MonkeyPatch):
    with FakeServer("anthropic") as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-deep-0001")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        yield fake


def write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_a_run_whose_model_sends_5000_levels_stops_with_a_clear_error_and_keeps_nothing(
    ip, workspace: Path, anthropic_fake
) -> None:
    anthropic_fake.play(anthropic_wire.answer("Nesting.", [("toolu_deep", "bash", deep_text(DEEP))]))
    out = run(ip, 'agent --provider anthropic --mode auto "go deep"')
    assert "nested 5,000 levels deep" in out and f"the limit is {MAX_ARGUMENT_DEPTH}" in out
    assert "✗ error" in out and "RecursionError" not in out
    session = current_agent(ip).session
    messages = session.conversation.messages()
    assert [m.role for m in messages] == ["user"] and not any(m.tool_calls for m in messages)
    assert load_session(session.dir).messages == messages
    assert "next request:" in run(ip, "context")

    # The next answer is an ordinary one: the session goes on.
    anthropic_fake.play(anthropic_wire.answer("Flat this time."))
    assert "✓ done" in run(ip, 'agent --provider anthropic --mode auto "again, flat"')


def test_the_openai_path_refuses_5000_levels_the_same_way(ip, workspace: Path, monkeypatch) -> None:
    from tests.fakes import openai_server as openai_wire

    with FakeServer("openai") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-deep-0002")
        fake.play(openai_wire.answer("Nesting.", [("call_deep", "bash", deep_text(DEEP))]))
        out = run(ip, 'agent --provider openai --model gpt-4o --mode auto "go deep"')
    assert "nested 5,000 levels deep" in out and "✗ error" in out and "RecursionError" not in out
    messages = current_agent(ip).session.conversation.messages()
    assert [m.role for m in messages] == ["user"]


def test_context_sizes_arguments_5000_levels_deep_held_in_memory(ip, workspace: Path, tmp_path: Path) -> None:
    run(ip, f"agent --provider scripted --script {write(tmp_path / 's.json', script(turn('hi')))} hello")
    conversation = current_agent(ip).session.conversation
    call = ToolCall(id="c_deep", name="bash", arguments=deep_value(DEEP))
    # Built by hand: the log refuses it (the writer fails closed, SPEC §6.2); memory has it.
    with pytest.raises(Exception, match="nested too deeply"):
        conversation.append(Message(role="assistant", content="", tool_calls=(call,)))
    out = run(ip, "context")
    assert "tool calls" in out
    data = json.loads(run(ip, "context --json"))
    # 7 bytes per level ('{"a": ' and '}'), at 3.5 bytes per token.
    assert data["parts"]["tool_calls"] >= DEEP * 7 / 3.5


def test_a_log_an_older_version_wrote_1000_levels_deep_resumes_for_context_and_a_run(
    ip, workspace: Path, tmp_path: Path
) -> None:
    hello = write(tmp_path / "s.json", script(turn("hi")))
    run(ip, f"agent --provider scripted --script {hello} hello")
    session = current_agent(ip).session
    sid, log = session.id, session.dir / "conversation.jsonl"
    run(ip, "sessions new")
    # The old writer's json fallback went to ~990 levels; the loader reads up to 1,024.
    line = encode(message_entry(Message(role="assistant", tool_calls=(ToolCall(id="c1", name="bash"),))))
    line = line.replace(b'"arguments":{}', b'"arguments":' + deep_text(1_000).encode())
    result = encode(message_entry(Message(role="user", tool_result={"call_id": "c1", "content": "ok"})))
    with log.open("ab") as f:
        f.write(line + result)
    run(ip, f"sessions resume {sid}")
    assert len(current_agent(ip).session.conversation) == 4

    assert "tool calls" in run(ip, "context")
    again = write(tmp_path / "again.json", script(turn("after the deep call")))
    out = run(ip, f"agent --provider scripted --script {again} go on")
    assert "✓ done" in out, out


def test_the_argument_parser_and_the_size_never_recurse() -> None:
    assert text_nesting(deep_text(DEEP)) == DEEP
    assert text_nesting('{"a": "[[[[{{{{", "b": [1, [2]]}') == 3  # brackets in strings do not count
    assert parse_arguments(deep_text(MAX_ARGUMENT_DEPTH), "c") == json.loads(deep_text(MAX_ARGUMENT_DEPTH))
    with pytest.raises(StreamError, match="nested 101 levels deep"):
        parse_arguments(deep_text(MAX_ARGUMENT_DEPTH + 1), "c")
    with pytest.raises(StreamError, match="nested 500 levels deep"):  # parsed, then measured
        parse_arguments(deep_text(500), "c")
    # Brackets inside strings (code in a write_file call) are not nesting.
    code = json.dumps({"content": "[{(" * 50_000})
    assert parse_arguments(code, "c") == {"content": "[{(" * 50_000}
    assert value_depth({"a": [1, {"b": []}]}) == 4 and value_depth(1) == 0
    with pytest.raises(StreamError, match="broken arguments JSON"):
        parse_arguments('{"a": [1, 2}', "c")
    assert parse_arguments("[1]", "c") == {"value": [1]}
    deep = deep_value(DEEP)
    assert encoded_size(deep) == len('{"a": ' * DEEP + "{}" + "}" * DEEP)  # what json.dumps would give
