"""The hub against real servers: mcp-server-time and mcp-server-git from PyPI over stdio,
and the edge server (tests/fakes/mcp_server.py) over stdio and streamable HTTP."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pseudoclaude_nb.mcp import McpHub, load_config
from pseudoclaude_nb.messages import ToolCall
from pseudoclaude_nb.tools import Permissions, ToolRegistry
from tests.mcp_support import alive, children, edge, git_repo, git_server, http_edge, time_server


@pytest.fixture
def hub() -> Iterator[McpHub]:
    made = McpHub(start_timeout=60, call_timeout=30)
    yield made
    made.close()


def start(hub: McpHub, workspace: Path, servers: dict[str, Any]) -> list[str]:
    return hub.configure(load_config(workspace, servers), workspace)


def run(hub: McpHub, tool: str, mode: str = "auto", **arguments: Any):
    registry = ToolRegistry(hub.tools())
    call = ToolCall(id="c1", name=tool, arguments=arguments)
    return registry.run(call, Permissions(mode))  # type: ignore[arg-type]


def test_time_server_tools_hints_and_a_call(hub: McpHub, workspace: Path) -> None:
    assert start(hub, workspace, {"time": time_server()}) == []
    tools = {t.name: t for t in hub.tools()}
    assert set(tools) == {"mcp__time__get_current_time", "mcp__time__convert_time"}
    assert not any(t.side_effect for t in tools.values())  # both carry readOnlyHint: true
    schema = tools["mcp__time__get_current_time"].schema()["input_schema"]
    assert (
        schema["type"] == "object"
        and "timezone" in schema["properties"]
        and schema["required"] == ["timezone"]
    )
    assert "title" not in schema
    result = run(hub, "mcp__time__get_current_time", mode="read-only", timezone="UTC")
    assert not result.is_error and json.loads(result.content)["timezone"] == "UTC"
    bad = run(hub, "mcp__time__get_current_time", timezone="Nowhere/Atlantis")
    assert bad.is_error and "Invalid timezone" in bad.content  # isError from a real server


def test_git_server_in_a_temp_repo_read_only_against_hints(hub: McpHub, workspace: Path) -> None:
    repo = git_repo(workspace / "repo")
    assert start(hub, workspace, {"git": git_server(repo)}) == []
    tools = {t.name: t for t in hub.tools()}
    assert {"mcp__git__git_status", "mcp__git__git_log", "mcp__git__git_add", "mcp__git__git_commit"} <= set(
        tools
    )
    assert not tools["mcp__git__git_status"].side_effect and tools["mcp__git__git_commit"].side_effect
    status = run(hub, "mcp__git__git_status", mode="read-only", repo_path=str(repo))
    assert not status.is_error and "notes.txt" in status.content
    log = run(hub, "mcp__git__git_log", mode="read-only", repo_path=str(repo))
    assert "first commit" in log.content
    refused = run(hub, "mcp__git__git_add", mode="read-only", repo_path=str(repo), files=["notes.txt"])
    assert refused.is_error and refused.content.startswith("refused:") and "read-only" in refused.content
    added = run(hub, "mcp__git__git_add", mode="auto", repo_path=str(repo), files=["notes.txt"])
    assert not added.is_error
    assert "notes.txt" in run(hub, "mcp__git__git_diff_staged", repo_path=str(repo)).content


def test_trust_overrides_the_hints(hub: McpHub, workspace: Path) -> None:
    start(hub, workspace, {"strict": edge(trust="ask"), "loose": edge(trust="read-only")})
    tools = {t.name: t for t in hub.tools()}
    assert tools["mcp__strict__echo"].side_effect  # hinted read-only, but trust says ask
    assert not tools["mcp__loose__write_note"].side_effect  # not hinted, but trusted
    assert run(hub, "mcp__strict__echo", mode="read-only", text="x").is_error
    assert run(hub, "mcp__loose__write_note", mode="read-only", name="n").content == "wrote n (0 chars)"


def test_edge_results_image_resource_and_is_error(hub: McpHub, workspace: Path) -> None:
    start(hub, workspace, {"edge": edge()})
    image = run(hub, "mcp__edge__image")
    assert not image.is_error and image.content.startswith("[image from the tool: image/png, 70 bytes")
    from tests.fakes.mcp_server import PNG

    assert image.images == ((PNG, "image/png"),)  # issue-14: passed on as an image, not only a note
    resource = run(hub, "mcp__edge__resource")
    assert resource.content == "[resource <memo://notes/1>]\nthe memo's text"
    failed = run(hub, "mcp__edge__fail", reason="because")
    assert failed.is_error and "failed on purpose: because" in failed.content
    huge = run(hub, "mcp__edge__huge", size=300_000)
    assert len(huge.content) == 300_000  # the hub passes it whole; Layer 1 spills it (test_mcp_agent)


def test_slow_tool_times_out_and_the_server_stays_usable(hub: McpHub, workspace: Path) -> None:
    start(hub, workspace, {"edge": edge()})
    run(hub, "mcp__edge__echo", text="warm")  # the first call imports the SDK's validators
    hub.call_timeout = 1.0
    started = time.monotonic()
    result = run(hub, "mcp__edge__slow", seconds=20)
    assert result.is_error and "did not answer within 1 s (setting mcp_timeout)" in result.content
    assert time.monotonic() - started < 10
    hub.call_timeout = 30
    assert run(hub, "mcp__edge__echo", text="still here").content == "still here"
    assert hub.servers["edge"].status == "running"


def test_keyboard_interrupt_cancels_the_pending_call(hub: McpHub, workspace: Path) -> None:
    start(hub, workspace, {"edge": edge()})
    run(hub, "mcp__edge__echo", text="warm")
    main = threading.main_thread().ident
    assert main == threading.get_ident()
    timer = threading.Timer(0.5, lambda: signal.pthread_kill(main, signal.SIGINT))
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        run(hub, "mcp__edge__slow", seconds=20)
    assert time.monotonic() - started < 10
    assert run(hub, "mcp__edge__echo", text="after").content == "after"


def test_crashing_server_restarts_once_then_a_clear_error(hub: McpHub, workspace: Path) -> None:
    start(hub, workspace, {"edge": edge()})
    first_pid = int(run(hub, "mcp__edge__pid").content)
    crash = run(hub, "mcp__edge__crash")
    assert crash.is_error and "went away during this call" in crash.content
    assert "crashing on purpose" in crash.content  # the cause: the server's last stderr line
    assert "restarted for the next call" in crash.content
    second_pid = int(run(hub, "mcp__edge__pid").content)  # restarted (once)
    assert second_pid != first_pid and hub.servers["edge"].restarts == 1
    again = run(hub, "mcp__edge__crash")
    assert (
        again.is_error and "already restarted once" in again.content and "%mcp restart edge" in again.content
    )
    after = run(hub, "mcp__edge__echo", text="x")
    assert after.is_error and "stopped again after a restart" in after.content
    assert hub.servers["edge"].status == "failed"
    assert not alive({first_pid, second_pid})
    state = hub.restart("edge")  # %mcp restart: a fresh allowance
    assert state.status == "running" and state.restarts == 0
    assert run(hub, "mcp__edge__echo", text="back").content == "back"


def test_failures_to_start_are_one_line_each_and_others_run(hub: McpHub, workspace: Path) -> None:
    hub.start_timeout = 12
    before = children()
    problems = start(
        hub,
        workspace,
        {
            "missing": {"command": "no-such-mcp-server-xyz"},
            "refuses": edge("--crash-on-start"),
            "silent": {"command": sys.executable, "args": ["-c", "import time; time.sleep(120)"]},
            "time": time_server(),
        },
    )
    by_server = {line.split("'")[1]: line for line in problems}
    assert set(by_server) == {"missing", "refuses", "silent"}
    assert "FileNotFoundError" in by_server["missing"] and "no-such-mcp-server-xyz" in by_server["missing"]
    assert "refusing to start (--crash-on-start)" in by_server["refuses"]
    assert "did not start within 12 s (setting mcp_start_timeout)" in by_server["silent"]
    assert all(line.endswith("this run goes on without its tools") for line in problems)
    assert [t.name for t in hub.tools()] == ["mcp__time__convert_time", "mcp__time__get_current_time"]
    assert {s.name: s.status for s in hub.servers.values()} == {
        "missing": "failed",
        "refuses": "failed",
        "silent": "failed",
        "time": "running",
    }
    hub.close()
    assert children() - before == set()  # the silent one was killed, not left running


def test_servers_start_in_parallel(hub: McpHub, workspace: Path) -> None:
    hub.start_timeout = 60
    # Each server stamps the moment it starts, then takes 5 s before it answers.
    slow_start = (
        "import time, runpy, sys, pathlib; pathlib.Path(%r).write_text(repr(time.time())); "
        "time.sleep(5); sys.argv = ['edge']; runpy.run_path(%r, run_name='__main__')"
    )
    from tests.mcp_support import EDGE

    stamps = [workspace / f"started-{i}" for i in range(3)]
    servers = {
        f"s{i}": {"command": sys.executable, "args": ["-c", slow_start % (str(stamps[i]), EDGE)]}
        for i in range(3)
    }
    assert start(hub, workspace, servers) == []
    assert len(hub.tools()) == 3 * 9
    # One after another, each would start only after the one before answered (>= 5 s later);
    # in parallel all three were started while the first was still in its 5 s. A structural
    # check, not a timing one: it holds however slow the machine is.
    starts = sorted(float(p.read_text()) for p in stamps)
    assert starts[-1] - starts[0] < 5


def test_streamable_http(hub: McpHub, workspace: Path) -> None:
    with http_edge() as url:
        assert start(hub, workspace, {"web": {"type": "http", "url": url, "headers": {"X-Test": "1"}}}) == []
        assert run(hub, "mcp__web__echo", text="over http").content == "over http"
        assert run(hub, "mcp__web__image").content.startswith("[image from the tool")
        assert run(hub, "mcp__web__fail", reason="http").is_error
        hub.close()
    problems = start(hub, workspace, {"web": {"type": "http", "url": url}})  # the server is gone now
    assert len(problems) == 1 and problems[0].startswith("MCP server 'web' did not start: ")


def test_close_leaves_no_process_and_can_start_again(hub: McpHub, workspace: Path) -> None:
    before = children()
    start(hub, workspace, {"edge": edge(), "time": time_server()})
    pids = children() - before
    assert len(pids) >= 2
    assert int(run(hub, "mcp__edge__pid").content) in pids
    hub.close()
    assert not alive(pids)
    hub.close()  # twice is fine
    start(hub, workspace, {"edge": edge()})
    assert run(hub, "mcp__edge__echo", text="again").content == "again"


def test_reconfigure_starts_new_and_stops_removed(hub: McpHub, workspace: Path) -> None:
    start(hub, workspace, {"a": edge()})
    pid_a = int(run(hub, "mcp__a__pid").content)
    start(hub, workspace, {"b": edge()})
    assert set(hub.servers) == {"b"} and not alive({pid_a})
    assert [t.server for t in hub.tools()] == ["b"] * 9
    # Same configuration again: the server keeps running (no restart per run).
    pid_b = int(run(hub, "mcp__b__pid").content)
    start(hub, workspace, {"b": edge()})
    assert int(run(hub, "mcp__b__pid").content) == pid_b


def test_secret_values_are_scrubbed_from_failures(hub: McpHub, workspace: Path, monkeypatch) -> None:
    monkeypatch.setenv("MY_TOKEN", "tok-abcdef-123456")
    problems = start(hub, workspace, {"x": {"command": "${MY_TOKEN}"}})
    assert problems and "tok-abcdef-123456" not in problems[0] and "[hidden]" in problems[0]
    assert "tok-abcdef-123456" not in (hub.servers["x"].last_error or "")


def test_env_reaches_the_server(hub: McpHub, workspace: Path) -> None:
    code = (
        "import os, runpy, sys; assert os.environ['EDGE_FLAG'] == 'on', 'no flag';"
        f"sys.argv = ['edge']; runpy.run_path({str(Path(__file__).parent / 'fakes' / 'mcp_server.py')!r},"
        " run_name='__main__')"
    )
    assert (
        start(
            hub,
            workspace,
            {"e": {"command": sys.executable, "args": ["-c", code], "env": {"EDGE_FLAG": "on"}}},
        )
        == []
    )
    assert os.environ.get("EDGE_FLAG") is None  # only the server's environment


def test_a_server_killed_while_idle_shows_crashed_and_restarts_on_the_next_call(
    hub: McpHub, workspace: Path
) -> None:
    start(hub, workspace, {"edge": edge()})
    pid = int(run(hub, "mcp__edge__pid").content)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while hub.servers["edge"].connection is not None and not hub.servers["edge"].connection.gone:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    start(hub, workspace, {"edge": edge()})  # what every run does first
    assert hub.servers["edge"].status == "crashed"
    assert [t.name for t in hub.tools()][:1] == ["mcp__edge__crash"]  # still offered: it restarts
    assert int(run(hub, "mcp__edge__pid").content) != pid
    assert hub.servers["edge"].status == "running" and hub.servers["edge"].restarts == 1


def test_a_new_workspace_restarts_stdio_servers_there(hub: McpHub, workspace: Path) -> None:
    other = workspace.parent / "other"
    other.mkdir()
    start(hub, workspace, {"edge": edge()})
    pid = int(run(hub, "mcp__edge__pid").content)
    hub.configure(load_config(other, {"edge": edge()}), other)
    new_pid = int(run(hub, "mcp__edge__pid").content)
    assert new_pid != pid and not alive({pid})
    import psutil

    assert psutil.Process(new_pid).cwd() == str(other)


def test_server_gone_is_part_of_the_one_error_hierarchy() -> None:
    from pseudoclaude_nb import errors
    from pseudoclaude_nb.mcp import connection

    assert connection.ServerGone is errors.ServerGone
    assert issubclass(errors.ServerGone, errors.PseudoClaudeError)
    assert "ServerGone" in errors.__doc__
