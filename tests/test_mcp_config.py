"""MCP configuration: the three sources, ``${VAR}``, and one clear error per bad entry."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pseudoclaude_nb.mcp.config import CONFIG_SOURCE, load_config


def write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, encoding="utf-8")
    return path


def test_project_file_stdio_and_http(workspace: Path) -> None:
    write(
        workspace / ".mcp.json",
        {
            "mcpServers": {
                "time": {"command": "python", "args": ["-m", "mcp_server_time"], "env": {"TZ": "UTC"}},
                "remote": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"X-Team": "core"}},
            }
        },
    )
    config = load_config(workspace)
    assert config.errors == []
    time, remote = config.servers["time"], config.servers["remote"]
    assert (time.type, time.command, time.args, time.env) == (
        "stdio",
        "python",
        ("-m", "mcp_server_time"),
        (("TZ", "UTC"),),
    )
    assert (remote.type, remote.url, remote.headers) == (
        "http",
        "http://127.0.0.1:9/mcp",
        (("X-Team", "core"),),
    )
    assert time.trust == "hints" and time.source == str(workspace / ".mcp.json")


def test_precedence_user_then_project_then_config(workspace: Path) -> None:
    home = Path(os.environ["PSEUDOCLAUDE_HOME"])
    write(home / "mcp.json", {"mcpServers": {"a": {"command": "user-a"}, "b": {"command": "user-b"}}})
    write(
        workspace / ".mcp.json",
        {"mcpServers": {"b": {"command": "project-b"}, "c": {"command": "project-c"}}},
    )
    config = load_config(workspace, {"c": {"command": "config-c"}})
    assert {n: s.command for n, s in config.servers.items()} == {
        "a": "user-a",
        "b": "project-b",
        "c": "config-c",
    }
    assert config.servers["c"].source == CONFIG_SOURCE
    assert config.sources == [str(home / "mcp.json"), str(workspace / ".mcp.json"), CONFIG_SOURCE]


def test_variables_expand_and_their_values_are_secrets(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_TOKEN", "tok-123456789")
    monkeypatch.setenv("GIT_DIR_X", "/repos/x")
    write(
        workspace / ".mcp.json",
        {
            "mcpServers": {
                "api": {
                    "type": "http",
                    "url": "http://127.0.0.1:1/${MISSING_PATH:-mcp}",
                    "headers": {"Authorization": "Bearer ${TEAM_TOKEN}"},
                },
                "git": {"command": "git-server", "args": ["--repository", "${GIT_DIR_X}"]},
            }
        },
    )
    config = load_config(workspace)
    assert config.servers["api"].url == "http://127.0.0.1:1/mcp"
    assert config.servers["api"].headers == (("Authorization", "Bearer tok-123456789"),)
    assert config.servers["git"].args == ("--repository", "/repos/x")
    said = config.scrub("failed with Bearer tok-123456789 in /repos/x")
    assert "tok-123456789" not in said and "/repos/x" not in said


def test_unset_variable_names_file_key_and_variable_not_values(workspace: Path) -> None:
    path = write(
        workspace / ".mcp.json",
        {"mcpServers": {"api": {"command": "x", "env": {"KEY": "${NOT_SET_ANYWHERE}"}}}},
    )
    config = load_config(workspace)
    assert config.servers == {}
    assert config.errors == [
        f"{path}: mcpServers.api.env.KEY: ${{NOT_SET_ANYWHERE}} is not set in your environment (a "
        "workspace .env's values go to the package's providers only); server 'api' is not started"
    ]


@pytest.mark.parametrize(
    ("entry", "key", "problem"),
    [
        ({"args": ["x"]}, "mcpServers.s.command", "must be a non-empty string"),
        ({"command": "x", "args": "one two"}, "mcpServers.s.args", "must be a list of strings"),
        ({"command": "x", "env": {"A": 1}}, "mcpServers.s.env", "must be an object of strings"),
        ({"command": "x", "comand": "typo"}, "mcpServers.s.comand", "unknown key for a stdio server"),
        ({"type": "http"}, "mcpServers.s.url", "must be a non-empty string"),
        (
            {"type": "sse", "url": "http://127.0.0.1/sse"},
            "mcpServers.s.type",
            "SSE servers are not supported",
        ),
        ({"command": "x", "trust": "always"}, "mcpServers.s.trust", "must be one of read-only, ask, auto"),
        ("python -m x", "mcpServers.s", "must be an object"),
    ],
)
def test_bad_entry_is_one_error_naming_file_and_key(
    workspace: Path, entry: object, key: str, problem: str
) -> None:
    path = write(workspace / ".mcp.json", {"mcpServers": {"s": entry, "ok": {"command": "fine"}}})
    config = load_config(workspace)
    assert list(config.servers) == ["ok"]  # the good server still starts
    (error,) = config.errors
    assert error.startswith(f"{path}: {key}: ") and problem in error


def test_bad_json_skips_the_file_with_its_line(workspace: Path) -> None:
    path = write(workspace / ".mcp.json", '{"mcpServers": {"a": {"command": "x",}}}')
    config = load_config(workspace, {"b": {"command": "y"}})
    assert list(config.servers) == ["b"]
    (error,) = config.errors
    assert error.startswith(f"{path}: not valid JSON (line 1") and "not started" in error


def test_values_never_appear_in_errors(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_X", "s3cr3t-value-xyz")
    write(
        workspace / ".mcp.json",
        {"mcpServers": {"a": {"command": "x", "env": {"K": "${SECRET_X}"}, "args": ["${SECRET_X}", 3]}}},
    )
    config = load_config(workspace)
    assert config.errors and "s3cr3t-value-xyz" not in " ".join(config.errors)


def test_config_setting_errors_name_the_setting(workspace: Path) -> None:
    config = load_config(workspace, {"x": {"type": "http", "url": ""}})
    assert config.errors == [f"{CONFIG_SOURCE}: x.url: must be a non-empty string; server 'x' is not started"]


def test_no_configuration_is_nothing(workspace: Path) -> None:
    config = load_config(workspace)
    assert config.servers == {} and config.errors == [] and config.sources == []
