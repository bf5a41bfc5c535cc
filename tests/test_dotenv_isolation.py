"""A workspace ``.env`` reaches only the provider the package builds (issue 41, SPEC §20).

The adversary's run: a cloned repository's ``.env`` sets ``ANTHROPIC_BASE_URL`` (its own host)
and a key. ``%agent`` may use both (they come from one place), but nothing of it may stay in
the kernel: the person's next ordinary cell, ``anthropic.Anthropic()``, must not be pointed at
that host, and the commands the bash tool runs must not inherit it. Here the repository's host is
a fake Anthropic server on 127.0.0.1; the person's own code is run as cells (``run_cell``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pseudoclaude_nb import envtrust
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as anthropic_wire
from tests.fakes import openai_server as openai_wire
from tests.scripts import run_magic

REPO_KEY = "sk-ant-from-the-repository-0123456789"
REPO_OPENAI_KEY = "sk-openai-from-the-repository-0123456789"
PROVIDER_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL")

# What the person's own code sees: the environment, and what a plain SDK client would use.
PROBE = f"""
import json, os, anthropic
_c = anthropic.Anthropic()
_seen = json.dumps({{
    "environ": {{k: os.environ.get(k) for k in {PROVIDER_VARS!r}}},
    "sdk_base_url": str(_c.base_url),
    "sdk_api_key": _c.api_key,
}})
"""


@pytest.fixture(autouse=True)
def _forget() -> None:
    yield
    envtrust.forget()


def person_sees(ip) -> dict:
    result = ip.run_cell(PROBE)
    assert result.success, result.error_in_exec
    return json.loads(ip.user_ns["_seen"])


def assert_untouched(seen: dict, host: FakeServer) -> None:
    assert seen["environ"] == dict.fromkeys(PROVIDER_VARS)
    assert host.url not in seen["sdk_base_url"] and "api.anthropic.com" in seen["sdk_base_url"]
    assert seen["sdk_api_key"] is None


def test_env_values_used_by_agent_never_reach_the_persons_code(ip, workspace: Path) -> None:
    with FakeServer("repository host") as host:
        (workspace / ".env").write_text(
            f"ANTHROPIC_API_KEY={REPO_KEY}\nANTHROPIC_BASE_URL={host.url}\n", encoding="utf-8"
        )
        assert_untouched(person_sees(ip), host)  # after %load_ext

        # The agent's provider uses them (both from one place: allowed), and its bash tool runs `env`.
        host.play(
            anthropic_wire.answer("", calls=[("c1", "bash", {"command": "env"})]),
            anthropic_wire.answer("Done."),
        )
        out = run_magic(ip, 'agent --mode auto "what is in the environment?"')
        assert "Done." in out and "✓ done" in out
        assert host.requests[0].headers["authorization"] == f"Bearer {REPO_KEY}"
        listing = host.bodies[1]["messages"][-1]["content"][0]["content"]
        listing = listing if isinstance(listing, str) else json.dumps(listing)
        assert "PATH=" in listing  # the command did run and print its environment
        for leaked in (host.url, "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", REPO_KEY, "REDACTED"):
            assert leaked not in listing
        assert_untouched(person_sees(ip), host)  # after %agent

        out = run_magic(ip, "context")
        assert_untouched(person_sees(ip), host)  # after %context
    # %context says which values came from the .env, by name (never the key).
    where = workspace.absolute() / ".env"
    assert (
        f"from {where} (used by the package's providers only): ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL" in out
    )
    assert REPO_KEY not in out


def test_context_json_names_the_env_values(ip, workspace: Path) -> None:
    (workspace / ".env").write_text("OPENAI_BASE_URL=http://127.0.0.1:9/v1\n", encoding="utf-8")
    data = json.loads(run_magic(ip, "context --json"))
    assert data["from_dotenv"] == {"OPENAI_BASE_URL": str(workspace.absolute() / ".env")}
    assert "OPENAI_BASE_URL" not in os.environ


def test_openai_env_values_never_reach_the_kernel(ip, workspace: Path) -> None:
    with FakeServer("repository host") as host:
        (workspace / ".env").write_text(
            f"OPENAI_API_KEY={REPO_OPENAI_KEY}\nOPENAI_BASE_URL={host.url}/v1\n", encoding="utf-8"
        )
        host.play(openai_wire.answer("From the repository's host."))
        out = run_magic(ip, 'agent "hello"')  # auto: the .env makes it the OpenAI-compatible one
        assert "From the repository's host." in out
        assert host.requests[0].headers["authorization"] == f"Bearer {REPO_OPENAI_KEY}"
    assert "OPENAI_API_KEY" not in os.environ and "OPENAI_BASE_URL" not in os.environ


def test_a_key_from_env_is_still_redacted_from_the_log(ip, workspace: Path) -> None:
    """The key no longer sits in os.environ; the redactor still knows it (it did before)."""
    with FakeServer("repository host") as host:
        (workspace / ".env").write_text(
            f"ANTHROPIC_API_KEY={REPO_KEY}\nANTHROPIC_BASE_URL={host.url}\n", encoding="utf-8"
        )
        host.play(anthropic_wire.answer("ok"))
        run_magic(ip, f'agent "my key is {REPO_KEY}"')
    logs = list((workspace / ".pseudoclaude").rglob("conversation.jsonl"))
    text = "".join(p.read_text(encoding="utf-8") for p in logs)
    assert "my key is" in text and REPO_KEY not in text


def test_an_mcp_server_never_gets_a_key_from_env(workspace: Path) -> None:
    """A ``.mcp.json`` asking for ``${OPENAI_API_KEY}`` does not get the ``.env``'s key."""
    from pseudoclaude_nb.mcp.config import load_config

    (workspace / ".env").write_text(f"OPENAI_API_KEY={REPO_OPENAI_KEY}\n", encoding="utf-8")
    (workspace / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"api": {"command": "x", "env": {"KEY": "${OPENAI_API_KEY}"}}}}),
        encoding="utf-8",
    )
    envtrust.load_workspace_env(workspace)  # as a run reads it, before the MCP servers
    config = load_config(workspace)
    assert config.servers == {}
    assert "${OPENAI_API_KEY} is not set in your environment" in config.errors[0]
    assert REPO_OPENAI_KEY not in json.dumps(config.errors)
