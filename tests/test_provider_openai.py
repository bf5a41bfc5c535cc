"""The OpenAI-compatible provider: real httpx against a local server that speaks chat completions.

The server plays the dialects of OpenAI, Ollama and llama.cpp; asserts are on the bodies
and headers it received and on the neutral events that came back.
"""

from __future__ import annotations

import email.utils
import time
from pathlib import Path

import httpx
import pytest

from pseudoclaude_nb.errors import ConfigError, ContextTooLong, ProviderError, StreamError
from pseudoclaude_nb.messages import Message, ToolCall, ToolResult, Usage
from pseudoclaude_nb.providers import make_provider
from pseudoclaude_nb.providers.base import Request, Stop, ToolCallDelta, ToolCallEnd, ToolCallStart, collect
from pseudoclaude_nb.providers.openai_compat import OpenAIProvider, retry_after
from pseudoclaude_nb.tools import build_tools
from tests.fakes import FakeServer, Reply, Stream, closed_port_url
from tests.fakes import openai_server as wire

KEY = "sk-proj-test-7d1e4b"


@pytest.fixture
def server():
    with FakeServer("openai") as fake:
        yield fake


@pytest.fixture
def provider(server: FakeServer) -> OpenAIProvider:
    return OpenAIProvider(api_key=KEY, base_url=f"{server.url}/v1", model="test-model", backoff=0.001)


def ask(text: str = "hi", **kwargs) -> Request:
    return Request(system="You are a test.", messages=[Message(role="user", content=text)], **kwargs)


def result(call_id: str, content: str, is_error: bool = False) -> Message:
    return Message(role="user", tool_result=ToolResult(call_id=call_id, content=content, is_error=is_error))


# --- what comes back ------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", ["openai", "ollama", "llamacpp"])
def test_text_and_tool_calls_assemble_in_every_dialect(server, provider, dialect: str) -> None:
    calls = [
        ("call_1", "read_file", {"path": "a.py"}),
        ("call_2", "grep", {"pattern": "def main", "glob": "*.py"}),
    ]
    server.play(
        wire.answer(
            "Checking two things.",
            calls,
            usage={"prompt_tokens": 300, "completion_tokens": 20},
            dialect=dialect,
        )
    )
    events = list(provider.stream(ask()))
    response = collect(iter(events))
    assert response.text == "Checking two things."
    assert response.tool_calls == [ToolCall(id=i, name=n, arguments=a) for i, n, a in calls]
    assert response.usage == Usage(input_tokens=300, output_tokens=20)
    assert response.stop_reason == "tool_use" and events[-1] == Stop("tool_use")
    starts = [e.id for e in events if isinstance(e, ToolCallStart)]
    ends = [e.id for e in events if isinstance(e, ToolCallEnd)]
    assert starts == ends == ["call_1", "call_2"]
    if dialect != "ollama":  # arguments arrive in pieces, one delta each
        assert sum(isinstance(e, ToolCallDelta) for e in events) == 6


def test_cached_tokens_are_kept_apart_from_fresh_input(server, provider) -> None:
    usage = {"prompt_tokens": 5000, "completion_tokens": 80, "prompt_tokens_details": {"cached_tokens": 4096}}
    server.play(wire.answer("ok", usage=usage))
    response = collect(provider.stream(ask()))
    assert response.usage == Usage(input_tokens=904, output_tokens=80, cache_read_input_tokens=4096)
    assert response.usage.prompt_total == 5000
    assert response.stop_reason == "end_turn"


def test_a_call_without_an_id_gets_a_unique_one(server, provider) -> None:
    frames = [
        wire.data(
            wire.chunk({"tool_calls": [{"index": 0, "function": {"name": "list_files", "arguments": "{}"}}]})
        ),
        wire.data(wire.chunk({}, "tool_calls")),
        wire.DONE,
    ]
    server.play(Stream(frames), Stream(frames))
    first = collect(provider.stream(ask())).tool_calls[0]
    second = collect(provider.stream(ask())).tool_calls[0]
    assert first.name == "list_files" and first.id.startswith("call_") and first.id != second.id


# --- what is sent ---------------------------------------------------------------------------------


def test_request_has_system_first_tools_as_functions_usage_option_and_bearer_key(
    server, provider, tmp_path: Path
) -> None:
    schemas = build_tools(tmp_path).schemas()
    server.play(wire.answer("ok"))
    collect(provider.stream(ask("hello", tools=schemas, max_tokens=777)))
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    body = sent.body
    assert body["model"] == "test-model" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 777  # not an OpenAI host: the field every server knows
    assert body["messages"] == [
        {"role": "system", "content": "You are a test."},
        {"role": "user", "content": "hello"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": s["name"], "description": s["description"], "parameters": s["input_schema"]},
        }
        for s in schemas
    ]


def test_tool_results_become_tool_messages_paired_by_id_and_same_role_turns_merge(server, provider) -> None:
    calls = (
        ToolCall(id="call_a", name="read_file", arguments={"path": "a.py"}),
        ToolCall(id="call_b", name="bash", arguments={"command": "false"}),
    )
    messages = [
        Message(role="user", content="first"),
        Message(role="user", content="second"),
        Message(role="assistant", content="Reading.", tool_calls=calls),
        result("call_a", "x = 1"),
        result("call_b", "exit code 1", is_error=True),
        Message(role="user", content="and then?"),
        Message(role="assistant", content="Done."),
        Message(role="assistant", content="Really."),
    ]
    server.play(wire.answer("ok"))
    collect(provider.stream(Request(system="", messages=messages)))
    assert server.requests[0].body["messages"] == [
        {"role": "user", "content": "first\n\nsecond"},
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "false"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "x = 1"},
        {"role": "tool", "tool_call_id": "call_b", "content": "Error: exit code 1"},
        {"role": "user", "content": "and then?"},
        {"role": "assistant", "content": "Done.\n\nReally."},
    ]


def test_complete_sends_no_stream_and_reads_one_completion(server, provider) -> None:
    server.play(wire.completion("the summary", usage={"prompt_tokens": 50, "completion_tokens": 7}))
    response = provider.complete(ask("summarize"))
    assert response.text == "the summary" and response.stop_reason == "end_turn"
    assert response.usage == Usage(input_tokens=50, output_tokens=7)
    body = server.requests[0].body
    assert body["stream"] is False and "stream_options" not in body


# --- configuration ------------------------------------------------------------------------------------


def test_a_local_endpoint_needs_no_key_and_gets_no_authorization_header(server, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1/")
    provider = make_provider("openai")
    assert (provider.model, provider.context_window) == ("gpt-5.5", 1_050_000)
    assert make_provider("openai", model="llama3.1:8b").context_window == 128_000
    assert make_provider("openai", context_window=8192).context_window == 8192
    server.play(wire.answer("local"))
    assert collect(provider.stream(ask())).text == "local"
    assert "authorization" not in server.requests[0].headers
    assert server.requests[0].path == "/v1/chat/completions"


def test_openai_itself_needs_the_key_and_says_which_variable(server, monkeypatch) -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY is not set"):
        make_provider("openai")  # OPENAI_BASE_URL unset: api.openai.com
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    provider = make_provider("openai")
    assert provider.base_url == "https://api.openai.com/v1" and KEY not in repr(provider)


# --- errors ---------------------------------------------------------------------------------------------


def test_rejected_key_names_the_variable_and_never_echoes_it(server, provider) -> None:
    server.play(wire.error(401, f"Incorrect API key provided: {KEY}", code="invalid_api_key"))
    with pytest.raises(ProviderError, match="OPENAI_API_KEY") as info:
        collect(provider.stream(ask()))
    assert info.value.status == 401 and KEY not in str(info.value) and len(server.requests) == 1


def test_a_quoted_server_message_has_the_key_scrubbed(server, provider) -> None:
    server.play(wire.error(400, f"bad header value {KEY}"))
    with pytest.raises(ProviderError) as info:
        collect(provider.stream(ask()))
    assert KEY not in str(info.value) and "***" in str(info.value)


def test_429_is_retried_honouring_retry_after_then_succeeds(server, provider) -> None:
    server.play(wire.error(429, "Rate limit reached", headers={"retry-after": "0"}), wire.answer("made it"))
    assert collect(provider.stream(ask())).text == "made it"
    assert len(server.requests) == 2 and server.requests[0].body == server.requests[1].body


@pytest.mark.parametrize(
    "status, advice", [(503, "try again later"), (500, "try again later"), (429, "check your plan")]
)
def test_busy_after_all_retries_is_one_clear_error_with_the_status(server, provider, status, advice) -> None:
    server.play(*[wire.error(status, "busy", headers={"retry-after-ms": "1"}) for _ in range(3)])
    with pytest.raises(ProviderError, match=advice) as info:
        collect(provider.stream(ask()))
    assert info.value.status == status and str(status) in str(info.value) and "2 retries" in str(info.value)
    assert len(server.requests) == 3


def test_a_pause_longer_than_a_minute_is_not_waited_for(server, provider) -> None:
    server.play(wire.error(429, "quota", headers={"retry-after": "3600"}))
    with pytest.raises(ProviderError, match="asks to wait 3600 s"):
        collect(provider.stream(ask()))
    assert len(server.requests) == 1


def test_retry_after_reads_milliseconds_seconds_and_dates() -> None:
    assert retry_after(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    assert retry_after(httpx.Headers({"retry-after": "3"})) == 3.0
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= retry_after(httpx.Headers({"retry-after": later})) <= 31
    assert retry_after(httpx.Headers({})) is None


def test_connection_refused_names_the_base_url() -> None:
    url = f"{closed_port_url()}/v1"
    provider = OpenAIProvider(base_url=url, backoff=0.001)
    with pytest.raises(ProviderError, match="OPENAI_BASE_URL") as info:
        collect(provider.stream(ask()))
    assert url in str(info.value)


def test_unknown_model_says_how_to_choose_one(server, provider) -> None:
    server.play(Reply(404, {"error": 'model "test-model" not found, try pulling it first'}))
    with pytest.raises(ProviderError, match="--model") as info:
        collect(provider.stream(ask()))
    assert "test-model" in str(info.value) and info.value.status == 404


def test_stream_without_finish_reason_yields_no_stop_and_nothing_is_kept(server, provider) -> None:
    server.play(wire.cut("Partial", [("call_x", "write_file", {"path": "a.py", "content": "x"})]))
    events = list(provider.stream(ask()))
    assert events and not any(isinstance(e, Stop) for e in events)
    with pytest.raises(StreamError, match="without a stop reason"):
        collect(iter(events))


def test_connection_dropped_mid_body_is_a_stream_error(server, provider) -> None:
    server.play(wire.dropped("Half", [("call_y", "bash", {"command": "ls"})], after=4))
    with pytest.raises(StreamError, match="broke off"):
        collect(provider.stream(ask()))


def test_error_chunk_inside_a_stream_is_a_stream_error(server, provider) -> None:
    frames = wire.frames("Start")[:2] + [
        wire.data({"error": {"message": "upstream overloaded", "code": 502}})
    ]
    server.play(Stream(frames))
    with pytest.raises(StreamError, match="upstream overloaded"):
        collect(provider.stream(ask()))


@pytest.mark.parametrize(
    "reply",
    [
        wire.too_long(),
        # llama.cpp's words for the same thing
        wire.error(
            400,
            "the request exceeds the available context size, try increasing it",
            kind="exceed_context_size_error",
        ),
    ],
)
def test_context_length_exceeded_is_context_too_long_and_not_retried(server, provider, reply: Reply) -> None:
    server.play(reply)
    with pytest.raises(ContextTooLong) as info:
        collect(provider.stream(ask()))
    assert info.value.status == 400 and len(server.requests) == 1
    server.play(wire.too_long())
    with pytest.raises(ContextTooLong):
        provider.complete(ask())


def test_a_redirect_says_to_fix_the_base_url(server, provider) -> None:
    server.play(Reply(308, {}, {"location": "https://example.invalid/v1/chat/completions"}))
    with pytest.raises(ProviderError, match="OPENAI_BASE_URL") as info:
        collect(provider.stream(ask()))
    assert info.value.status == 308 and "example.invalid" in str(info.value)
