"""Issue 32, item 3: the real window is learned — asked of the server at the first run
(llama.cpp, vLLM, Ollama, LM Studio), cached per base URL and model, shown in ``%context``,
and read from a context-length error (adopted at once, then compact and retry once).

Real httpx against a local server; the 400 is the bytes a real llama-server sent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.errors import ConfigError
from pseudoclaude_nb.events import Compacted
from pseudoclaude_nb.providers.window import window_in_error
from tests import llamacpp_recorded as rec
from tests.fakes import FakeServer, Reply
from tests.fakes import openai_server as wire
from tests.scripts import run_magic

MISSING = Reply(404, {"error": "not found"})
PROPS = {
    "default_generation_settings": {"n_ctx": 4096, "n_predict": -1},
    "total_slots": 1,
    "chat_template_caps": {"supports_tools": True, "supports_tool_calls": True},
}
REAL = {"prompt_tokens": 1_953, "completion_tokens": 2, "total_tokens": 1_955}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch):
    with FakeServer("local", probes=True) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{fake.url}/v1")
        yield fake


def agent_for(workspace: Path, agents: list, **settings) -> Agent:
    config = dict(
        workspace=str(workspace),
        provider="openai",
        model=rec.MODEL,
        permission_mode="auto",
        fsync=False,
        memory_policy="off",
    )
    config.update(settings)
    agent = Agent(PseudoClaude(**config))
    agents.append(agent)
    return agent


def notices(seen: list) -> list[str]:
    return [e.text for e in seen if type(e).__name__ == "Notice"]


def cache() -> dict:
    return json.loads((Path(os.environ["PSEUDOCLAUDE_HOME"]) / "windows.json").read_text())["windows"]


def test_llamacpp_props_window_is_learned_once_and_cached(server, workspace: Path, agents) -> None:
    server.play(Reply(200, PROPS), wire.answer("Hello.", usage=REAL))
    agent = agent_for(workspace, agents)
    seen: list = []
    agent.run("hi", listeners=[seen.append])
    assert [r.path for r in server.requests] == ["/props", "/v1/chat/completions"]
    assert server.requests[0].method == "GET"
    assert agent.session.context.shared.settings.context_window == 4_096
    assert "context window: 4,096 tokens (llama.cpp /props n_ctx)" in notices(seen)
    assert server.bodies[1]["max_tokens"] < 4_096
    [(key, entry)] = cache().items()
    assert key == f"{server.url}/v1 {rec.MODEL}" and entry["window"] == 4_096
    # A new kernel (a new agent) reads the cache: the server is not asked again.
    server.play(wire.answer("Again.", usage=REAL))
    other = agent_for(workspace, agents)
    other.run("hi")
    assert [r.path for r in server.requests[2:]] == ["/v1/chat/completions"]
    assert other.session.context.shared.settings.context_window == 4_096


@pytest.mark.parametrize(
    ("answers", "window", "source"),
    [
        (
            [MISSING, Reply(200, {"object": "list", "data": [{"id": rec.MODEL, "max_model_len": 8192}]})],
            8_192,
            "/v1/models max_model_len",
        ),  # vLLM
        (
            [
                MISSING,
                Reply(200, {"data": [{"id": rec.MODEL, "object": "model"}]}),
                Reply(
                    200,
                    {
                        "parameters": 'num_ctx                        2048\nstop "<end>"',
                        "model_info": {"gemma3.context_length": 32768},
                    },
                ),
            ],
            2_048,
            "Ollama /api/show num_ctx",
        ),
        (
            [
                MISSING,
                Reply(200, {"data": [{"id": rec.MODEL, "object": "model"}]}),
                Reply(200, {"model_info": {"llama.context_length": 16384}}),
            ],
            16_384,
            "Ollama /api/show context_length",
        ),
        (
            [
                MISSING,
                MISSING,
                MISSING,
                Reply(200, {"id": rec.MODEL, "max_context_length": 32768, "loaded_context_length": 8192}),
            ],
            8_192,
            "LM Studio /api/v0/models loaded_context_length",
        ),
    ],
)
def test_other_servers_say_their_window_where_they_do(
    server, workspace, agents, answers, window, source
) -> None:
    server.play(*answers, wire.answer("Hello.", usage=REAL))
    agent = agent_for(workspace, agents)
    seen: list = []
    agent.run("hi", listeners=[seen.append])
    assert agent.session.context.shared.settings.context_window == window
    assert f"context window: {window:,} tokens ({source})" in notices(seen)
    paths = [r.path for r in server.requests]
    assert paths[-1] == "/v1/chat/completions" and len(paths) == len(answers) + 1
    if source.startswith("Ollama"):
        assert server.requests[2].path == "/api/show" and server.requests[2].body == {"model": rec.MODEL}


def test_a_stated_window_wins_and_nothing_is_asked(server, workspace: Path, agents) -> None:
    server.play(wire.answer("Hello.", usage=REAL))
    agent = agent_for(workspace, agents, context_window=6_000)
    agent.run("hi")
    assert [r.path for r in server.requests] == ["/v1/chat/completions"]
    assert agent.session.context.shared.settings.context_window == 6_000


def test_a_server_that_says_nothing_is_asked_once(server, workspace: Path, agents) -> None:
    server.play(MISSING, MISSING, MISSING, MISSING, wire.answer("Hello."), wire.answer("Again."))
    agent = agent_for(workspace, agents)
    agent.run("hi")
    agent.run("again")
    assert len(server.requests) == 6  # four asks once, then two answers
    assert agent.session.context.shared.settings.context_window == 128_000  # the unknown model's default


def test_a_template_that_cannot_show_tools_is_refused_with_the_fix(server, workspace: Path, agents) -> None:
    props = PROPS | {"chat_template_caps": {"supports_tools": False}}
    server.play(Reply(200, props))
    agent = agent_for(workspace, agents)
    with pytest.raises(ConfigError, match="cannot show tools") as caught:
        agent.run("hi")
    assert "--jinja" in str(caught.value) and "--chat-template-file" in str(caught.value)
    assert [r.path for r in server.requests] == ["/props"]  # no tool-less request was sent


def test_context_shows_where_the_window_came_from(ip, server, workspace: Path) -> None:
    server.play(Reply(200, PROPS))
    ip.run_line_magic("config", "PseudoClaude.provider = 'openai'")
    ip.run_line_magic("config", f"PseudoClaude.model = '{rec.MODEL}'")
    table = run_magic(ip, "context")
    assert "of 4,096 tokens" in table and "window from llama.cpp /props n_ctx" in table, table
    ip.run_line_magic("config", "PseudoClaude.context_window = 8192")
    assert "window from --context-window" in run_magic(ip, "context")


# --- from the error ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "window"),
    [
        (json.loads(rec.raw("context_error_400")), 2_048),  # llama.cpp, as recorded
        (
            {
                "error": {
                    "message": "This model's maximum context length is 8192 tokens. However, you "
                    "requested 9000 tokens (8000 in the messages, 1000 in the completion).",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            },
            8_192,
        ),  # OpenAI
        (
            {
                "object": "error",
                "message": "This model's maximum context length is 4096 tokens. However, "
                "you requested 4500 tokens in the messages, Please reduce the length of the messages.",
                "type": "BadRequestError",
                "code": 400,
            },
            4_096,
        ),  # vLLM
        ("prompt is too long: 210000 tokens > 200000 maximum", 200_000),  # Anthropic
        (
            "input length and `max_tokens` exceed context limit: 180000 + 30000 > 200000, decrease "
            "input length or `max_tokens` and try again",
            200_000,
        ),  # Anthropic
        (
            {
                "error": "Trying to keep the first 5000 tokens when context the overflows. However, the model "
                "is loaded with context length of only 4096 tokens, which is not enough."
            },
            4_096,
        ),  # LM Studio
        (
            {"error": "requested context length (9000) exceeds the context length (4096)"},
            4_096,
        ),  # Ollama-like
        ({"error": "the input length exceeds the context length"}, None),  # Ollama: no number
    ],
)
def test_the_window_is_read_from_context_length_errors(body, window) -> None:
    assert window_in_error(body) == window


def test_the_llamacpp_400_is_adopted_then_compact_and_retry_once(server, workspace: Path, agents) -> None:
    # The server said nothing when asked; the model is unknown: 128,000 is assumed.
    server.play(MISSING, MISSING, MISSING, MISSING, wire.answer("first", usage=REAL))
    agent = agent_for(workspace, agents)
    agent.run("start")
    conversation = agent.session.conversation
    for i in range(3):
        conversation.add_user(f"step {i}: " + "describe the data in detail " * 20)
        conversation.add_assistant("the data has rows and columns " * 20)
    assert agent.session.context.shared.settings.context_window == 128_000
    server.play(
        rec.reply("context_error_400"),  # the real 400: "n_ctx":2048
        wire.completion("They looked at the data."),  # the forced compaction's summary
        wire.answer("ok", usage={"prompt_tokens": 1_990, "completion_tokens": 1}),
    )
    seen: list = []
    summary = agent.run("go on", listeners=[seen.append])
    assert summary.status == "done" and summary.final_text == "ok"
    assert any("window is 2,048 tokens (its error says so), not 128,000" in n for n in notices(seen))
    done = [e for e in seen if isinstance(e, Compacted)]
    assert len(done) == 1 and done[0].ok and done[0].trigger == "forced"
    assert agent.session.context.shared.settings.context_window == 2_048
    assert server.bodies[-1]["max_tokens"] <= 2_048 - 1_000  # the retry fits the learned window
    assert next(iter(cache().values()))["window"] == 2_048  # and the next kernel knows it
