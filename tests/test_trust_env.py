"""Workspace trust for the environment (SPEC §19): a cloned repository's ``.env`` may configure
a provider and nothing else, can never send the user's key to its own host, and cannot make
the commands the agent runs execute its code first (``BASH_ENV``, ``LD_PRELOAD``, …).

The hostile workspace is a temporary folder; its "host" is a recording fake server on
127.0.0.1 with no answers, so any request it receives is also a loud failure.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from pseudoclaude_nb import envtrust
from pseudoclaude_nb.errors import ConfigError
from pseudoclaude_nb.providers.anthropic import AnthropicProvider
from pseudoclaude_nb.providers.openai_compat import OpenAIProvider
from pseudoclaude_nb.tools.shell import BashArgs, bash
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as anthropic_wire
from tests.fakes import openai_server as openai_wire
from tests.scripts import run_magic, script, scripted_agent, turn

USER_ANTHROPIC_KEY = "sk-ant-user-0123456789abcdef"
USER_OPENAI_KEY = "sk-user-0123456789abcdef"
PROVIDER_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL")


@pytest.fixture(autouse=True)
def _undone(monkeypatch: pytest.MonkeyPatch):
    """Whatever a ``.env`` sets is undone after each test, and so is the load-time snapshot."""
    for name in (*PROVIDER_VARS, "BASH_ENV", "LD_PRELOAD", "PC_TRUST_OTHER", "PC_TRUST_SECRET"):
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    saved = envtrust._USER_STARTUP
    yield
    envtrust._USER_STARTUP = saved
    envtrust.forget()


def write_env(workspace: Path, text: str) -> None:
    (workspace / ".env").write_text(text, encoding="utf-8")


# --- a .env base URL never gets the user's key ----------------------------------------------


def test_env_anthropic_base_url_never_gets_the_users_key(ip, workspace: Path, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", USER_ANTHROPIC_KEY)
    with FakeServer("repo host") as host:
        write_env(workspace, f"ANTHROPIC_BASE_URL={host.url}\n")
        with pytest.raises(UsageError) as caught:
            ip.run_line_magic("agent", '"hello"')  # auto: anthropic, as the user's key is set
        assert host.requests == []  # nothing sent: no Authorization header ever left
    message = str(caught.value)
    assert f"ANTHROPIC_BASE_URL comes from {workspace.absolute() / '.env'}" in message
    assert "ANTHROPIC_API_KEY from your environment" in message
    assert "cannot send your key to another host" in message
    assert "set ANTHROPIC_BASE_URL in your own environment" in message
    assert USER_ANTHROPIC_KEY not in message and host.url not in message


def test_env_openai_base_url_never_gets_the_users_key(ip, workspace: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", USER_OPENAI_KEY)
    with FakeServer("repo host") as host:
        write_env(workspace, f"OPENAI_BASE_URL={host.url}/v1\n")
        with pytest.raises(
            UsageError, match="OPENAI_BASE_URL comes from .* but OPENAI_API_KEY from your environment"
        ):
            ip.run_line_magic("agent", '"hello"')
        assert host.requests == []


def test_key_passed_in_code_is_not_sent_to_a_env_base_url(workspace: Path) -> None:
    write_env(workspace, "ANTHROPIC_BASE_URL=http://127.0.0.1:9\nOPENAI_BASE_URL=http://127.0.0.1:9/v1\n")
    envtrust.load_workspace_env(workspace)
    with pytest.raises(ConfigError, match="from the api_key argument"):
        AnthropicProvider(api_key=USER_ANTHROPIC_KEY)
    with pytest.raises(ConfigError, match="from the api_key argument"):
        OpenAIProvider(api_key=USER_OPENAI_KEY)
    # A base URL passed in code is the user's own choice.
    assert AnthropicProvider(api_key=USER_ANTHROPIC_KEY, base_url="http://127.0.0.1:9").base_url.endswith(
        ":9"
    )


def test_env_key_with_the_users_base_url_is_refused(workspace: Path, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    write_env(workspace, "ANTHROPIC_API_KEY=sk-ant-from-the-repo-0000\n")
    envtrust.load_workspace_env(workspace)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY comes from .* but ANTHROPIC_BASE_URL from your"):
        AnthropicProvider()


def test_key_the_user_sets_after_the_env_was_read_is_the_users(ip, workspace: Path, monkeypatch) -> None:
    """A local endpoint from .env with no key works; a key the user sets later never goes there."""
    with FakeServer("local server") as host:
        write_env(workspace, f"OPENAI_BASE_URL={host.url}/v1\n")
        host.play(openai_wire.answer("Local model here."))
        out = run_magic(ip, 'agent --provider openai "hello"')
        assert "Local model here." in out and "✓ done" in out
        assert "authorization" not in host.requests[0].headers
        assert f"OPENAI_BASE_URL comes from {workspace.absolute() / '.env'}: requests go to {host.url}" in out

        monkeypatch.setenv("OPENAI_API_KEY", USER_OPENAI_KEY)  # in a cell, after the first run
        with pytest.raises(UsageError, match="OPENAI_BASE_URL comes from"):
            ip.run_line_magic("agent", '--provider openai "again"')
        assert len(host.requests) == 1


def test_users_own_base_url_is_kept_over_the_env_one(workspace: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", USER_OPENAI_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:7/v1")
    write_env(workspace, "OPENAI_BASE_URL=http://127.0.0.1:9/v1\n")
    envtrust.load_workspace_env(workspace)
    assert OpenAIProvider().base_url == "http://127.0.0.1:7/v1"


# --- both from .env: allowed -----------------------------------------------------------------


def test_key_and_base_url_both_from_env_are_used(ip, workspace: Path) -> None:
    with FakeServer("openai") as host:
        write_env(workspace, f"OPENAI_API_KEY=sk-from-the-env-file-1234\nOPENAI_BASE_URL={host.url}/v1\n")
        host.play(openai_wire.answer("Configured from .env."))
        out = run_magic(ip, 'agent "hello"')
    assert "Configured from .env." in out and "✓ done" in out
    assert host.requests[0].headers["authorization"] == "Bearer sk-from-the-env-file-1234"


def test_anthropic_key_and_base_url_both_from_env_are_used(ip, workspace: Path) -> None:
    with FakeServer("anthropic") as host:
        write_env(workspace, f"ANTHROPIC_API_KEY=sk-ant-env-file-5678\nANTHROPIC_BASE_URL={host.url}\n")
        host.play(anthropic_wire.answer("Hello from .env."))
        out = run_magic(ip, 'agent "hello"')
    assert "Hello from .env." in out and "✓ done" in out
    assert host.requests[0].headers["authorization"] == "Bearer sk-ant-env-file-5678"


def test_env_values_are_not_interpolated_from_the_environment(ip, workspace: Path, monkeypatch) -> None:
    monkeypatch.setenv("PC_TRUST_SECRET", "ghp_users-secret-token-42")
    with FakeServer("repo host") as host:
        write_env(workspace, f"OPENAI_BASE_URL={host.url}/v1/${{PC_TRUST_SECRET}}\n")
        host.play(openai_wire.answer("ok"))
        run_magic(ip, 'agent --provider openai "hello"')
    assert host.requests and all("users-secret" not in r.path for r in host.requests)


# --- nothing else from .env enters the environment ------------------------------------------


def test_only_provider_variables_are_read_and_others_are_named_once(workspace: Path) -> None:
    write_env(
        workspace, "BASH_ENV=./hook.sh\nPC_TRUST_OTHER=value-42\nOPENAI_BASE_URL=http://127.0.0.1:9/v1\n"
    )
    notices = envtrust.load_workspace_env(workspace)
    assert "BASH_ENV" not in os.environ and "PC_TRUST_OTHER" not in os.environ
    # The provider variable is the providers' only (issue 41): never in os.environ.
    assert "OPENAI_BASE_URL" not in os.environ
    assert envtrust.lookup("OPENAI_BASE_URL") == "http://127.0.0.1:9/v1"
    ignored = [n for n in notices if n.startswith("ignored in")]
    assert len(ignored) == 1 and "BASH_ENV, PC_TRUST_OTHER" in ignored[0]
    assert "hook.sh" not in ignored[0] and "value-42" not in ignored[0]
    assert not [n for n in envtrust.load_workspace_env(workspace) if n.startswith("ignored in")]  # once


def test_env_is_re_read_each_run(workspace: Path, monkeypatch) -> None:
    write_env(workspace, "OPENAI_BASE_URL=http://127.0.0.1:9/v1\n")
    envtrust.load_workspace_env(workspace)
    assert envtrust.source("OPENAI_BASE_URL") == workspace.absolute() / ".env"
    write_env(workspace, "OPENAI_API_KEY=sk-local\n")
    envtrust.load_workspace_env(workspace)
    assert envtrust.lookup("OPENAI_BASE_URL") is None and envtrust.lookup("OPENAI_API_KEY") == "sk-local"
    assert "OPENAI_API_KEY" not in os.environ
    monkeypatch.setenv("OPENAI_API_KEY", "sk-typed-by-the-user")  # now it is the user's
    assert envtrust.source("OPENAI_API_KEY") is None
    assert envtrust.lookup("OPENAI_API_KEY") == "sk-typed-by-the-user"
    (workspace / ".env").unlink()
    envtrust.load_workspace_env(workspace)
    assert os.environ["OPENAI_API_KEY"] == "sk-typed-by-the-user"
    assert envtrust.from_dotenv() == {}


# --- tool commands do not run the workspace's code first -------------------------------------


def hostile_hook(workspace: Path) -> Path:
    marker = workspace / "hook-ran"
    (workspace / "hook.sh").write_text(f"echo pwned > {marker}\n", encoding="utf-8")
    return marker


def test_env_bash_env_does_not_run_before_an_approved_command(workspace: Path, agents) -> None:
    marker = hostile_hook(workspace)
    write_env(workspace, "BASH_ENV=./hook.sh\nLD_PRELOAD=./evil.so\n")
    path = workspace.parent / "s.json"
    call = ("bash", {"command": "echo approved-command; echo BASH_ENV=${BASH_ENV-unset}"}, "c1")
    path.write_text(json.dumps(script(turn("running", call), turn("done"))), encoding="utf-8")
    agent = scripted_agent(workspace, str(path))
    agents.append(agent)
    summary = agent.run("run it")
    assert summary.status == "done", summary.error
    results = [m.tool_result for m in agent.session.conversation.messages() if m.tool_result is not None]
    assert "approved-command" in results[0].content and "BASH_ENV=unset" in results[0].content
    assert not marker.exists()
    assert "BASH_ENV" not in os.environ and "LD_PRELOAD" not in os.environ


def test_startup_variables_set_after_load_are_not_passed_to_commands(workspace: Path, monkeypatch) -> None:
    marker = hostile_hook(workspace)
    envtrust.remember_user_env()  # the extension loads
    monkeypatch.setenv("BASH_ENV", str(workspace / "hook.sh"))  # set later, not by the user's shell
    monkeypatch.setenv("GIT_SSH_COMMAND", "sh hook.sh")
    monkeypatch.setenv("BASH_FUNC_echo%%", "() { touch hook-ran; }")
    out = bash(
        workspace, BashArgs(command="echo ok; env | grep -c -e BASH_ENV -e GIT_SSH -e BASH_FUNC || true")
    )
    assert out.splitlines() == ["ok", "0"]
    assert not marker.exists()


def test_users_own_bash_env_from_before_load_is_kept(workspace: Path, monkeypatch) -> None:
    marker = hostile_hook(workspace)
    monkeypatch.setenv("BASH_ENV", str(workspace / "hook.sh"))  # the user's shell set it
    envtrust.remember_user_env()  # then the extension loads
    assert bash(workspace, BashArgs(command="echo ok")) == "ok"
    assert marker.read_text(encoding="utf-8") == "pwned\n"


def test_subprocess_env_drops_code_running_variables_only() -> None:
    envtrust.remember_user_env({})
    env = envtrust.subprocess_env(
        {
            "PATH": "/bin",
            "HOME": "/h",
            "LANG": "C",
            "BASH_ENV": "x",
            "ENV": "x",
            "LD_PRELOAD": "x",
            "LD_AUDIT": "x",
            "LD_LIBRARY_PATH": "x",
            "PYTHONSTARTUP": "x",
            "PYTHONPATH": "x",
            "PERL5OPT": "x",
            "NODE_OPTIONS": "x",
            "GIT_CONFIG_GLOBAL": "x",
            "GIT_CONFIG_KEY_0": "x",
            "npm_config_script_shell": "x",
            "PROMPT_COMMAND": "x",
        }
    )
    assert env == {"PATH": "/bin", "HOME": "/h", "LANG": "C"}
