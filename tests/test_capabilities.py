"""A provider's abilities are declared (checkable Protocols), never probed with ``getattr``
(issue 45): each provider has exactly the capabilities its members give it, and the agent asks
with ``isinstance``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import pseudoclaude_nb
from pseudoclaude_nb.agent.memory import _plays_memory
from pseudoclaude_nb.providers.anthropic import AnthropicProvider
from pseudoclaude_nb.providers.base import AnswersMemory, HasEndpoint, LearnsWindow, ManagesContext
from pseudoclaude_nb.providers.openai_compat import OpenAIProvider
from pseudoclaude_nb.providers.scripted import ScriptedProvider
from tests.scripts import script

PACKAGE = Path(pseudoclaude_nb.__file__).parent


def test_each_provider_has_the_capabilities_its_members_declare():
    openai = OpenAIProvider(base_url="http://127.0.0.1:9/v1", model="local-model")
    anthropic = AnthropicProvider(api_key="sk-test", base_url="http://127.0.0.1:9", model="claude-sonnet-4-6")
    scripted = ScriptedProvider(script())
    assert isinstance(openai, LearnsWindow) and isinstance(openai, HasEndpoint)
    assert not isinstance(openai, ManagesContext) and not isinstance(openai, AnswersMemory)
    assert isinstance(anthropic, HasEndpoint) and isinstance(anthropic, ManagesContext)
    assert not isinstance(anthropic, LearnsWindow)
    assert isinstance(scripted, AnswersMemory) and isinstance(scripted, ManagesContext)
    assert not isinstance(scripted, HasEndpoint) and not isinstance(scripted, LearnsWindow)


def test_a_scripted_provider_is_asked_for_memory_only_when_its_script_has_some():
    assert _plays_memory(ScriptedProvider(script())) is False
    assert _plays_memory(ScriptedProvider(script(memory_ops=[[]]))) is True
    # A provider without the capability is always asked.
    assert _plays_memory(OpenAIProvider(base_url="http://127.0.0.1:9/v1", model="m")) is True


@pytest.mark.parametrize("module", ["agent/window.py", "agent/core.py", "agent/memory.py"])
def test_the_agent_never_probes_a_provider_with_getattr(module: str):
    """The three places the issue named: no ``getattr``/``hasattr`` on a provider (or its script)."""
    tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
    probes = [
        ast.unparse(node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr")
        and node.args
        and "provider" in ast.unparse(node.args[0])
    ]
    assert probes == []
