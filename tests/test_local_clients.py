"""Issue 32 (and issue 30 item 10): one HTTP client per provider configuration, reused by
every run, closed when the extension is unloaded — for the OpenAI-compatible provider
(httpx) and the Anthropic SDK client. Real clients against local fake servers."""

from __future__ import annotations

import pytest

from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.providers import clients
from pseudoclaude_nb.providers.anthropic import AnthropicProvider
from pseudoclaude_nb.providers.base import Request, collect
from pseudoclaude_nb.providers.openai_compat import OpenAIProvider
from tests import recorded
from tests.fakes import FakeServer
from tests.fakes import openai_server as wire
from tests.scripts import run_magic


@pytest.fixture(autouse=True)
def _fresh_clients():
    clients.close_all()
    yield
    clients.close_all()


def test_providers_of_one_configuration_share_one_client() -> None:
    a = OpenAIProvider(base_url="http://127.0.0.1:9/v1", model="m")
    b = OpenAIProvider(base_url="http://127.0.0.1:9/v1", model="other")  # the model is per request
    c = OpenAIProvider(base_url="http://127.0.0.1:10/v1", model="m")
    d = OpenAIProvider(base_url="http://127.0.0.1:9/v1", model="m", api_key="k2")
    assert a._client is b._client
    assert len({id(p._client) for p in (a, c, d)}) == 3
    x = AnthropicProvider(api_key="k", base_url="http://127.0.0.1:9", model="claude-haiku-4-5")
    y = AnthropicProvider(api_key="k", base_url="http://127.0.0.1:9", model="claude-sonnet-4-5")
    assert x._client is y._client
    assert clients.count() == 4


def test_a_closed_client_is_made_again() -> None:
    p = OpenAIProvider(base_url="http://127.0.0.1:9/v1", model="m")
    first = p._client
    clients.close_all()
    assert first.is_closed and p._client is not first and not p._client.is_closed


def test_runs_reuse_the_client_and_unload_closes_it(ip, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeServer("openai") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        server.play(wire.answer("one"), wire.answer("two"))
        run_magic(ip, "agent --provider openai --model local-model hello")
        first = current_agent(ip).last_provider._client
        run_magic(ip, "agent --provider openai --model local-model again")
        assert current_agent(ip).last_provider._client is first
        assert clients.count() == 1
        ip.run_line_magic("unload_ext", "pseudoclaude_nb")
        assert first.is_closed and clients.count() == 0
        ip.run_line_magic("load_ext", "pseudoclaude_nb")


def test_the_anthropic_sdk_client_is_reused_across_requests() -> None:
    with FakeServer("anthropic") as server:
        server.play(recorded.anthropic_text(), recorded.anthropic_text())
        for _ in range(2):
            provider = AnthropicProvider(api_key="k", base_url=server.url, model="claude-haiku-4-5")
            collect(provider.stream(Request(system="s", messages=[Message(role="user", content="hi")])))
        assert clients.count() == 1
