"""OpenAI-compatible: reasoning passed back, output caps, named stops and robustness.

Real httpx against a local server playing ``data:`` chunks written out in the shapes
DeepSeek, OpenRouter, OpenAI and llama.cpp document (``tests/recorded``); asserts are on
the request bodies the server received, field by field.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.errors import ConfigError, ContextTooLong, ProviderError
from pseudoclaude_nb.messages import Message, Reasoning, ToolCall, ToolResult
from pseudoclaude_nb.providers import wire as shared
from pseudoclaude_nb.providers.base import ReasoningDelta, Request, TextDelta, collect
from pseudoclaude_nb.providers.openai_compat import OpenAIProvider
from tests.fakes import FakeServer, Reply, Stream
from tests.fakes import openai_server as wire
from tests.recorded import chunk, data_stream
from tests.scripts import read_log, run_magic

LONG_BRIEF = "Background for the task, to keep in mind. " * 2500


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    with FakeServer("openai") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        yield fake


def agent_for(workspace: Path, agents: list, **settings) -> Agent:
    config = dict(
        workspace=str(workspace), provider="openai", permission_mode="auto", fsync=False, memory_policy="off"
    )
    config.update(settings)
    agent = Agent(PseudoClaude(**config))
    agents.append(agent)
    return agent


def ask(text: str = "hi", **kwargs) -> Request:
    return Request(system="s", messages=[Message(role="user", content=text)], **kwargs)


def deepseek_tool_turn(field: str = "reasoning_content") -> Stream:
    """DeepSeek thinking mode: reasoning first, then a tool call, usage in its own chunk."""
    return data_stream(
        chunk({"role": "assistant", "content": None, field: ""}),
        chunk({"content": None, field: "The user asks for files. "}),
        chunk({"content": None, field: "I should list them."}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_00_ySBWl6K1mQ3x2Pd7",
                        "type": "function",
                        "function": {"name": "list_files", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"pattern": '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"*.txt"}'}}]}),
        chunk({"content": "", field: None}, "tool_calls"),
        chunk(None, usage={"prompt_tokens": 310, "completion_tokens": 57, "total_tokens": 367}),
    )


def deepseek_answer(text: str = "One file: notes.txt.", finish: str = "stop", model="deepseek-reasoner"):
    return data_stream(
        chunk({"role": "assistant", "content": None, "reasoning_content": ""}, model=model),
        chunk({"content": None, "reasoning_content": "Now answer."}, model=model),
        chunk({"content": text[:8]}, model=model),
        chunk({"content": text[8:]}, model=model),
        chunk({"content": ""}, finish, model=model),
        chunk(None, usage={"prompt_tokens": 400, "completion_tokens": 12, "total_tokens": 412}, model=model),
    )


# --- reasoning: kept apart, passed back in the tool loop ------------------------------------------------


def test_deepseek_follow_up_carries_reasoning_content_and_the_answer_excludes_it(
    server, workspace: Path, agents
) -> None:
    (workspace / "notes.txt").write_text("milk\n")
    server.play(deepseek_tool_turn(), deepseek_answer())
    agent = agent_for(workspace, agents, model="deepseek-reasoner")
    summary = agent.run("which files?")
    assert summary.status == "done" and summary.final_text == "One file: notes.txt."

    first, second = server.bodies
    assert first["max_tokens"] == 8192 and "max_completion_tokens" not in first
    assistant = second["messages"][2]
    assert assistant == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "The user asks for files. I should list them.",
        "tool_calls": [
            {
                "id": "call_00_ySBWl6K1mQ3x2Pd7",
                "type": "function",
                "function": {"name": "list_files", "arguments": '{"pattern": "*.txt"}'},
            }
        ],
    }
    assert second["messages"][3]["role"] == "tool"
    entries = [e for e in read_log(agent.session.dir) if e["type"] == "message" and e["role"] == "assistant"]
    assert entries[0]["reasoning"] == [
        {"kind": "reasoning_content", "text": "The user asks for files. I should list them."}
    ]
    assert entries[1]["content"] == "One file: notes.txt." and "Now answer." not in entries[1]["content"]

    # A new question is a new turn: the earlier turn's reasoning is not sent again.
    server.play(deepseek_answer("Done."))
    agent.run("thanks")
    third = server.bodies[-1]["messages"]
    assert not any("reasoning_content" in m for m in third)


def test_reasoning_field_of_openrouter_goes_back_under_its_own_name(server) -> None:
    server.play(deepseek_tool_turn("reasoning"))
    provider = OpenAIProvider(base_url=f"{server.url}/v1", model="deepseek/deepseek-r1")
    events = list(provider.stream(ask("which files?")))
    response = collect(iter(events))
    assert response.text == "" and not any(isinstance(e, TextDelta) for e in events)
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)).startswith("The user asks")
    assert response.reasoning == [
        Reasoning(kind="reasoning", text="The user asks for files. I should list them.")
    ]
    messages = [
        Message(role="user", content="which files?"),
        Message(role="assistant", tool_calls=tuple(response.tool_calls), reasoning=tuple(response.reasoning)),
        Message(role="user", tool_result=ToolResult(call_id=response.tool_calls[0].id, content="notes.txt")),
    ]
    server.play(deepseek_answer())
    collect(provider.stream(Request(system="s", messages=messages)))
    sent = server.bodies[1]["messages"][2]
    assert sent["reasoning"] == "The user asks for files. I should list them."
    assert "reasoning_content" not in sent


def test_anthropic_thinking_is_not_sent_to_an_openai_endpoint_and_vice_versa(server) -> None:
    call = ToolCall(id="c1", name="list_files", arguments={})
    messages = [
        Message(role="user", content="x"),
        Message(
            role="assistant",
            tool_calls=(call,),
            reasoning=(Reasoning(kind="thinking", text="t", signature="sig"),),
        ),
        Message(role="user", tool_result=ToolResult(call_id="c1", content="ok")),
    ]
    server.play(deepseek_answer())
    collect(
        OpenAIProvider(base_url=f"{server.url}/v1", model="m").stream(Request(system="", messages=messages))
    )
    assert set(server.bodies[0]["messages"][1]) == {"role", "content", "tool_calls"}


# --- output caps and the parameter's name, by model -------------------------------------------------


@pytest.mark.parametrize(
    ("model", "key", "summary_cap"),
    [
        ("gpt-4o", "max_completion_tokens", 16_384),
        ("gpt-4o-mini", "max_completion_tokens", 16_384),
        ("o3-mini", "max_completion_tokens", 20_000),
        ("gpt-5.5", "max_completion_tokens", 20_000),
        ("deepseek-chat", "max_tokens", 8_192),
        ("qwen2.5-coder:7b", "max_tokens", 8_192),  # unknown: the safe default cap
    ],
)
def test_summary_cap_fits_the_model_and_the_parameter_is_chosen_by_model(
    server, model: str, key: str, summary_cap: int
) -> None:
    other = "max_tokens" if key == "max_completion_tokens" else "max_completion_tokens"
    server.play(wire.completion("a summary"))
    # An Azure OpenAI v1 style path on a host that is not api.openai.com.
    provider = OpenAIProvider(api_key="azure-key-0123456789", base_url=f"{server.url}/openai/v1", model=model)
    provider.complete(ask(max_tokens=20_000, purpose="summary"))
    body = server.bodies[0]
    assert body[key] == summary_cap and other not in body


def test_layer2_summary_request_of_gpt_4o_never_asks_for_20000(ip, server, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-e2e-4o-5b7d2a11")
    server.play(wire.answer("Noted."))
    run_magic(ip, "agent --provider openai --model gpt-4o --mode auto", LONG_BRIEF)
    server.play(wire.completion("## Confirmed requirements\n- the brief (user)"))
    run_magic(ip, "compact")
    summary = server.bodies[-1]
    assert summary["stream"] is False and summary["max_completion_tokens"] == 16_384


def test_reasoning_effort_is_sent_to_reasoning_models_only(server) -> None:
    server.play(wire.answer("ok"), wire.completion("summary"))
    provider = OpenAIProvider(base_url=f"{server.url}/v1", model="o4-mini", reasoning_effort="high")
    collect(provider.stream(ask()))
    provider.complete(ask(purpose="summary"))
    agent, summary = server.bodies
    assert agent["reasoning_effort"] == "high" and "reasoning_effort" not in summary
    with pytest.raises(ConfigError, match="takes no reasoning_effort"):
        OpenAIProvider(base_url=f"{server.url}/v1", model="gpt-4o", reasoning_effort="high")


# --- named stops --------------------------------------------------------------------------------------


def cut_tool_turn() -> Stream:
    return data_stream(
        chunk({"role": "assistant", "content": "Writing big.py."}, model="gpt-4o"),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_cut1",
                        "type": "function",
                        "function": {"name": "write_file", "arguments": ""},
                    }
                ]
            },
            model="gpt-4o",
        ),
        chunk(
            {"tool_calls": [{"index": 0, "function": {"arguments": '{"path": "big.py", "content": "x = '}}]}
        ),
        chunk({}, "length", model="gpt-4o"),
        chunk(None, usage={"prompt_tokens": 900, "completion_tokens": 8192, "total_tokens": 9092}),
    )


def test_finish_length_inside_a_tool_call_retries_once_with_the_model_cap(server, workspace: Path, agents):
    server.play(
        cut_tool_turn(),
        wire.answer("", [("call_ok1", "write_file", {"path": "big.py", "content": "x = 1\n"})]),
        wire.answer("Written."),
    )
    agent = agent_for(workspace, agents, model="gpt-4o")
    summary = agent.run("write big.py")
    assert summary.status == "done"
    assert [b["max_completion_tokens"] for b in server.bodies] == [8192, 16_384, 8192]
    assert (workspace / "big.py").read_text() == "x = 1\n"
    assert "call_cut1" not in json.dumps(server.bodies[1]) and "call_cut1" not in json.dumps(server.bodies[2])
    assert "call_cut1" not in (agent.session.dir / "conversation.jsonl").read_text()


def test_a_second_cut_stops_with_advice_that_can_work(server, workspace: Path, agents) -> None:
    server.play(cut_tool_turn(), cut_tool_turn())
    agent = agent_for(workspace, agents, model="gpt-4o")
    summary = agent.run("write big.py")
    assert summary.status == "error" and len(server.requests) == 2
    assert "16,384 tokens" in str(summary.error) and "write the file in parts" in str(summary.error)
    messages = agent.session.conversation.messages()
    assert not any(m.tool_calls for m in messages)
    assert messages[-1].content == "Writing big.py." and messages[-1].stop_reason == "max_tokens"


def test_finish_length_in_text_is_kept_and_marked_truncated(ip, server) -> None:
    server.play(deepseek_answer("A long explanation that", finish="length", model="deepseek-chat"))
    out = run_magic(ip, 'agent --provider openai --model deepseek-chat "explain"')
    assert "A long explanation that" in out
    assert "cut at the output cap" in out and "answer cut at the output cap" in out
    assert "✓ done" not in out


def test_delta_refusal_is_the_answer_with_a_notice(ip, server) -> None:
    server.play(
        data_stream(
            chunk({"role": "assistant", "content": None, "refusal": ""}, model="gpt-4o"),
            chunk({"refusal": "I'm sorry, "}, model="gpt-4o"),
            chunk({"refusal": "I can't help with that."}, model="gpt-4o"),
            chunk({}, "stop", model="gpt-4o"),
        )
    )
    out = run_magic(ip, 'agent --provider openai --model gpt-4o "something bad"')
    assert "I'm sorry, I can't help with that." in out and "refused" in out and "✓ done" not in out
    from pseudoclaude_nb.magics import current_agent

    last = current_agent(ip).session.conversation.messages()[-1]
    assert last.content == "I'm sorry, I can't help with that." and last.stop_reason == "refusal"


# --- robustness ------------------------------------------------------------------------------------------


LLAMA_CONTEXT_ERROR = (
    'error: {"code": 400, "message": "the request exceeds the available context size, try increasing it", '
    '"type": "exceed_context_size_error", "n_prompt_tokens": 40123, "n_ctx": 32768}'
)


def test_llamacpp_error_line_context_size_is_context_too_long(server) -> None:
    server.play(Stream([LLAMA_CONTEXT_ERROR.encode() + b"\n\n"]))
    provider = OpenAIProvider(base_url=f"{server.url}/v1", model="local")
    with pytest.raises(ContextTooLong, match="exceeds the available context size"):
        list(provider.stream(ask()))


def test_llamacpp_error_line_triggers_the_forced_compaction(ip, server) -> None:
    server.play(wire.answer("Noted."))
    run_magic(ip, "agent --provider openai --mode auto", LONG_BRIEF)
    server.play(
        Stream([LLAMA_CONTEXT_ERROR.encode() + b"\n\n"]),
        wire.completion("## Confirmed requirements\n- the background brief (user)"),
        wire.answer("Done after compacting."),
    )
    out = run_magic(ip, 'agent --provider openai --mode auto "now do it"')
    assert "compacted (forced)" in out and "Done after compacting." in out


def test_other_llamacpp_error_lines_keep_their_message(server) -> None:
    server.play(Stream([b'error: {"code": 500, "message": "slot unavailable", "type": "server_error"}\n\n']))
    provider = OpenAIProvider(base_url=f"{server.url}/v1", model="local")
    with pytest.raises(ProviderError, match="slot unavailable"):
        list(provider.stream(ask()))


def test_a_short_dummy_key_is_not_scrubbed_out_of_words(server) -> None:
    server.play(wire.too_long())
    provider = OpenAIProvider(api_key="x", base_url=f"{server.url}/v1", model="local")
    with pytest.raises(ContextTooLong) as info:
        list(provider.stream(ask()))
    assert "maximum context length" in str(info.value) and "***" not in str(info.value)


def test_key_scrubbing_is_for_whole_keys_only() -> None:
    key = "sk-proj-abcdef123456"
    assert shared.quote(f"Incorrect API key provided: {key}.", key) == "Incorrect API key provided: ***."
    assert shared.quote(f"id {key}extra", key) == f"id {key}extra"  # inside a longer token
    assert shared.quote("a max context", "x") == "a max context"


def test_429_with_x_should_retry_false_reports_the_retries_actually_made(server) -> None:
    server.play(wire.error(429, "Rate limit reached", headers={"x-should-retry": "false"}))
    provider = OpenAIProvider(base_url=f"{server.url}/v1", model="local", backoff=0.001)
    with pytest.raises(ProviderError) as info:
        list(provider.stream(ask()))
    assert len(server.requests) == 1 and "retries" not in str(info.value)
    server.play(
        wire.error(429, "Rate limit reached", headers={"retry-after-ms": "1"}),
        wire.error(429, "Rate limit reached", headers={"retry-after-ms": "1"}),
        wire.error(429, "Rate limit reached", headers={"retry-after-ms": "1"}),
    )
    with pytest.raises(ProviderError, match="even after 2 retries"):
        list(provider.stream(ask()))


def test_x_should_retry_true_retries_a_status_that_is_not_retried_otherwise(server) -> None:
    server.play(
        Reply(400, {"error": {"message": "transient"}}, {"x-should-retry": "true", "retry-after-ms": "1"}),
        wire.answer("ok"),
    )
    provider = OpenAIProvider(base_url=f"{server.url}/v1", model="local")
    assert collect(provider.stream(ask())).text == "ok"


def test_a_stream_without_any_usage_is_fine(server) -> None:
    server.play(data_stream(chunk({"role": "assistant", "content": "hi"}), chunk({}, "stop")))
    response = collect(OpenAIProvider(base_url=f"{server.url}/v1", model="local").stream(ask()))
    assert response.text == "hi" and response.usage.output_tokens == 0


def test_agent_magic_options_thinking_and_effort(ip, server) -> None:
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="at least 1024"):
        ip.run_line_magic("agent", "--provider openai --thinking 500 hello")
    server.play(wire.answer("ok"))
    out = run_magic(ip, 'agent --provider openai --model o3 --effort high "hello"')
    assert "✓ done" in out and server.bodies[0]["reasoning_effort"] == "high"
    assert server.bodies[0]["max_completion_tokens"] == 8192
    with pytest.raises(UsageError, match="takes no reasoning_effort"):
        ip.run_line_magic("agent", "--provider openai --model gpt-4o --effort high hello")
