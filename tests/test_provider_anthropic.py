"""The Anthropic provider: the real SDK against a local server that speaks the Messages API.

Asserts are on what went over the wire (body and headers as the server received them)
and on the neutral events that came back; every error row of the spec has a case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pseudoclaude_nb.errors import ConfigError, ContextTooLong, ProviderError, StreamError
from pseudoclaude_nb.messages import Message, ToolCall, ToolResult, Usage
from pseudoclaude_nb.providers import make_provider
from pseudoclaude_nb.providers.anthropic import AnthropicProvider
from pseudoclaude_nb.providers.base import (
    Request,
    Stop,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
    collect,
)
from pseudoclaude_nb.tools import build_tools
from tests.fakes import FakeServer, closed_port_url
from tests.fakes import anthropic_server as wire

KEY = "sk-ant-test-5f3a9c"
EPHEMERAL = {"type": "ephemeral"}


@pytest.fixture
def server():
    with FakeServer("anthropic") as fake:
        yield fake


@pytest.fixture
def provider(server: FakeServer) -> AnthropicProvider:
    return AnthropicProvider(api_key=KEY, base_url=server.url)


def ask(text: str = "hi", **kwargs) -> Request:
    return Request(system="You are a test.", messages=[Message(role="user", content=text)], **kwargs)


def user(text: str) -> Message:
    return Message(role="user", content=text)


def result(call_id: str, content: str, is_error: bool = False) -> Message:
    return Message(role="user", tool_result=ToolResult(call_id=call_id, content=content, is_error=is_error))


# --- what comes back ------------------------------------------------------------------------


def test_text_and_a_tool_call_stream_as_neutral_events_with_the_full_usage(server, provider) -> None:
    server.play(
        wire.answer(
            "Let me look at the files.",
            [("toolu_01", "list_files", {"pattern": "**/*.py"})],
            usage={
                "input_tokens": 1200,
                "cache_creation_input_tokens": 3000,
                "cache_read_input_tokens": 700,
                "output_tokens": 42,
            },
        )
    )
    events = list(provider.stream(ask()))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Let me look at the files."
    kinds = [type(e).__name__ for e in events if not isinstance(e, (TextDelta, UsageEvent))]
    assert kinds == [
        "ToolCallStart",
        "ToolCallDelta",
        "ToolCallDelta",
        "ToolCallDelta",
        "ToolCallEnd",
        "Stop",
    ]
    start = next(e for e in events if isinstance(e, ToolCallStart))
    assert (start.id, start.name) == ("toolu_01", "list_files")
    pieces = "".join(e.json for e in events if isinstance(e, ToolCallDelta))
    assert pieces == '{"pattern": "**/*.py"}'
    # message_start carries the input side, message_delta the cumulative output: the last
    # usage event is the whole figure.
    usages = [e.usage for e in events if isinstance(e, UsageEvent)]
    assert usages[0].output_tokens == 1
    assert usages[-1] == Usage(
        input_tokens=1200, output_tokens=42, cache_creation_input_tokens=3000, cache_read_input_tokens=700
    )
    assert usages[-1].prompt_total == 4900
    assert events[-1] == Stop("tool_use")


def test_collected_response_parses_the_tool_input(server, provider) -> None:
    server.play(wire.answer("", [("toolu_02", "write_file", {"path": "a.py", "content": "x = 1\n"})]))
    response = collect(provider.stream(ask()))
    assert response.tool_calls == [
        ToolCall(id="toolu_02", name="write_file", arguments={"path": "a.py", "content": "x = 1\n"})
    ]
    assert response.stop_reason == "tool_use" and response.text == ""


# --- what is sent ---------------------------------------------------------------------------------


def test_request_carries_model_system_tools_headers_and_two_cache_breakpoints(
    server, provider, tmp_path: Path
) -> None:
    schemas = build_tools(tmp_path).schemas()
    server.play(wire.answer("ok"))
    collect(provider.stream(ask("hello", tools=schemas, max_tokens=1234)))
    sent = server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["anthropic-version"]
    body = sent.body
    assert body["model"] == "claude-sonnet-5-5" and body["max_tokens"] == 1234 and body["stream"] is True
    assert body["system"] == [{"type": "text", "text": "You are a test.", "cache_control": EPHEMERAL}]
    assert body["tools"] == schemas
    assert {t["name"] for t in body["tools"]} >= {
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "grep",
        "bash",
    }
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hello", "cache_control": EPHEMERAL}]}
    ]


def test_tool_use_and_results_pair_by_id_and_consecutive_turns_merge(server, provider) -> None:
    calls = (
        ToolCall(id="toolu_a", name="read_file", arguments={"path": "a.py"}),
        ToolCall(id="toolu_b", name="bash", arguments={"command": "false"}),
    )
    messages = [
        user("first"),
        user("second"),  # two user texts in a row: one turn
        Message(role="assistant", content="Reading both.", tool_calls=calls),
        result("toolu_a", "1\tx = 1"),
        result("toolu_b", "exit code 1", is_error=True),
        user("and then?"),  # text after the results: the same user turn, after them
        Message(role="assistant", content="Done."),
        Message(role="assistant", content="   "),  # nothing to send: left out
        user("thanks"),
    ]
    server.play(wire.answer("ok"))
    collect(provider.stream(Request(system="s", messages=messages)))
    sent = server.requests[0].body["messages"]
    assert sent == [
        {"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading both."},
                {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a.py"}},
                {"type": "tool_use", "id": "toolu_b", "name": "bash", "input": {"command": "false"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "1\tx = 1"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "exit code 1", "is_error": True},
                # The last stable turn (the previous request's end) keeps a breakpoint too.
                {"type": "text", "text": "and then?", "cache_control": EPHEMERAL},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        {"role": "user", "content": [{"type": "text", "text": "thanks", "cache_control": EPHEMERAL}]},
    ]


def test_the_last_block_gets_the_breakpoint_even_when_it_is_a_tool_result(server, provider) -> None:
    messages = [
        user("go"),
        Message(role="assistant", tool_calls=(ToolCall(id="t1", name="list_files", arguments={}),)),
        result("t1", "a.py"),
    ]
    server.play(wire.answer("ok"))
    collect(provider.stream(Request(system="s", messages=messages)))
    sent = server.requests[0].body["messages"]
    assert sent[-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "a.py", "cache_control": EPHEMERAL}
    ]
    marked = [b for turn in sent for b in turn["content"] if "cache_control" in b]
    # and the previous request's last block ("go"), where that request wrote the cache
    assert marked == [{"type": "text", "text": "go", "cache_control": EPHEMERAL}, sent[-1]["content"][-1]]


def test_thinking_blocks_go_back_unchanged_with_the_tool_results(server, provider) -> None:
    server.play(
        wire.answer("", [("toolu_t", "list_files", {})], thinking=("Which files?", "sig-123")),
        wire.answer("Two files."),
    )
    first = collect(provider.stream(ask("list")))
    messages = [
        user("list"),
        Message(role="assistant", tool_calls=tuple(first.tool_calls), reasoning=tuple(first.reasoning)),
        result("toolu_t", "a.py\nb.py"),
    ]
    # A new provider object: the blocks travel with the message, not in the provider.
    again = AnthropicProvider(api_key=KEY, base_url=server.url)
    collect(again.stream(Request(system="s", messages=messages)))
    assistant = server.requests[1].body["messages"][1]
    assert assistant["content"][0] == {"type": "thinking", "thinking": "Which files?", "signature": "sig-123"}
    assert assistant["content"][1]["type"] == "tool_use"


def test_complete_is_a_plain_request_and_returns_one_response(server, provider) -> None:
    server.play(
        wire.message("## Summary\nall good", usage={"input_tokens": 900, "cache_read_input_tokens": 100})
    )
    response = provider.complete(ask("summarize", max_tokens=20_000))
    assert response.text == "## Summary\nall good" and response.stop_reason == "end_turn"
    assert response.usage.input_tokens == 900 and response.usage.cache_read_input_tokens == 100
    assert "stream" not in server.requests[0].body and server.requests[0].body["max_tokens"] == 20_000


# --- configuration ------------------------------------------------------------------------------------


def test_environment_configures_key_and_base_url_and_options_override_model_and_window(
    server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    default = make_provider("anthropic")
    assert (default.name, default.model, default.context_window) == (
        "anthropic",
        "claude-sonnet-5-5",
        1_000_000,
    )
    chosen = make_provider("anthropic", model="claude-haiku-4-5", context_window=50_000)
    assert (chosen.model, chosen.context_window) == ("claude-haiku-4-5", 50_000)
    assert make_provider("anthropic", model="claude-someday-9").context_window == 200_000  # the default
    server.play(wire.answer("ok"))
    collect(chosen.stream(ask()))
    assert server.requests[0].body["model"] == "claude-haiku-4-5"
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(chosen)


def test_missing_key_names_the_variable_before_any_request(server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "  ")
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY is not set"):
        make_provider("anthropic")
    assert server.requests == []


# --- errors ---------------------------------------------------------------------------------------------


def test_rejected_key_names_the_variable_and_never_echoes_the_key(server, provider) -> None:
    server.play(wire.error(401, "authentication_error", f"invalid x-api-key {KEY}"))
    with pytest.raises(ProviderError, match="ANTHROPIC_API_KEY") as info:
        collect(provider.stream(ask()))
    assert info.value.status == 401 and KEY not in str(info.value)
    assert len(server.requests) == 1  # a bad key is not retried


def test_rate_limit_is_retried_after_the_servers_pause_then_succeeds(server, provider) -> None:
    server.play(wire.error(429, "rate_limit_error", "slow down", retry_after_ms=1), wire.answer("made it"))
    assert collect(provider.stream(ask())).text == "made it"
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]
    assert server.requests[0].body == server.requests[1].body


@pytest.mark.parametrize(
    "status, kind, advice",
    [
        (529, "overloaded_error", "try again later"),
        (500, "api_error", "try again later"),
        (429, "rate_limit_error", "check your plan"),
    ],
)
def test_busy_answers_after_all_retries_are_one_clear_error(server, provider, status, kind, advice) -> None:
    server.play(*[wire.error(status, kind, "busy", retry_after_ms=1) for _ in range(3)])
    with pytest.raises(ProviderError, match=advice) as info:
        collect(provider.stream(ask()))
    assert info.value.status == status and f"{status}" in str(info.value) and "2 retries" in str(info.value)
    assert len(server.requests) == 3  # one try and the SDK's two retries


def test_connection_refused_names_the_base_url() -> None:
    url = closed_port_url()
    provider = AnthropicProvider(api_key=KEY, base_url=url, max_retries=0)
    with pytest.raises(ProviderError, match="ANTHROPIC_BASE_URL") as info:
        collect(provider.stream(ask()))
    assert url in str(info.value) and info.value.status is None


@pytest.mark.parametrize("keep_last_block", [True, False])
def test_stream_ending_without_message_stop_yields_no_stop_and_nothing_is_kept(
    server, provider, keep_last_block: bool
) -> None:
    server.play(
        wire.cut(
            "Partial",
            [("toolu_x", "write_file", {"path": "a.py", "content": "x"})],
            keep_last_block=keep_last_block,
        )
    )
    events = list(provider.stream(ask()))
    assert events and not any(isinstance(e, Stop) for e in events)
    with pytest.raises(StreamError, match="without a stop reason"):
        collect(iter(events))


def test_connection_dropped_mid_body_is_a_stream_error(server, provider) -> None:
    server.play(wire.dropped("Half an answer", [("toolu_y", "bash", {"command": "ls"})], after=4))
    seen = []
    with pytest.raises(StreamError, match="broke off"):
        for event in provider.stream(ask()):
            seen.append(event)
    assert not any(isinstance(e, (ToolCallEnd, Stop)) for e in seen)


def test_error_event_inside_a_stream_is_a_stream_error_with_the_status(server, provider) -> None:
    server.play(wire.stream_error("Starting"))
    with pytest.raises(StreamError, match="overloaded_error") as info:
        collect(provider.stream(ask()))
    assert info.value.status == 529 and len(server.requests) == 1


def test_prompt_too_long_is_context_too_long_and_not_retried(server, provider) -> None:
    server.play(wire.too_long())
    with pytest.raises(ContextTooLong, match="prompt is too long") as info:
        collect(provider.stream(ask()))
    assert info.value.status == 400 and len(server.requests) == 1
    server.play(wire.too_long())
    with pytest.raises(ContextTooLong):
        provider.complete(ask())


def test_unknown_model_and_other_refusals_say_what_the_server_said(server, provider) -> None:
    server.play(
        wire.error(404, "not_found_error", "model: claude-nope"),
        wire.error(400, "invalid_request_error", "messages: text content blocks must be non-empty"),
    )
    with pytest.raises(ProviderError, match="--model") as missing:
        collect(provider.stream(ask()))
    assert missing.value.status == 404 and "claude-nope" in str(missing.value)
    with pytest.raises(ProviderError, match="must be non-empty") as refused:
        collect(provider.stream(ask()))
    assert refused.value.status == 400 and not isinstance(refused.value, ContextTooLong)
