"""MCP end to end: a ``.mcp.json`` in the workspace, ``%agent`` runs that use its servers
(scripted provider, and the real anthropic SDK against the fake server), spills, read-only
mode, the session log, resume without the server, ``%context``, ``%mcp`` and unload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pseudoclaude_nb.events import Notice, ToolStarted
from pseudoclaude_nb.magics import current_agent
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as anthropic_wire
from tests.mcp_support import alive, approve_project, children, edge, listed, time_server
from tests.scripts import read_log, run_magic, turn, write_script
from tests.scripts import scripted_agent as make_agent


def mcp_json(workspace: Path, servers: dict) -> None:
    """The workspace's ``.mcp.json``, approved as written (tests/test_trust_mcp.py: unapproved)."""
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    approve_project(workspace)


def results_by_call(session_dir: Path) -> dict[str, dict]:
    return {
        e["tool_result"]["call_id"]: e["tool_result"]
        for e in read_log(session_dir)
        if e.get("type") == "message" and e.get("tool_result")
    }


def test_scripted_run_uses_mcp_tools_and_logs_them(workspace: Path, agents) -> None:
    mcp_json(workspace, {"time": time_server(), "edge": edge()})
    path = write_script(
        workspace,
        "script",
        turn(
            "Checking.",
            ("mcp__time__get_current_time", {"timezone": "UTC"}, "c_time"),
            ("mcp__edge__echo", {"text": "hi there"}, "c_echo"),
            ("list_files", {"pattern": "*"}, "c_files"),
        ),
        turn("It is now in UTC."),
    )
    agent = make_agent(workspace, path)
    agents.append(agent)
    summary = agent.run("what time is it?")
    assert summary.status == "done"
    request = agent.last_runner.provider.requests[0]
    offered = {t["name"] for t in request.tools}
    assert {"mcp__time__get_current_time", "mcp__edge__echo", "read_file"} <= offered
    log = read_log(agent.session.dir)
    calls = [c for e in log if e.get("type") == "message" for c in e.get("tool_calls", [])]
    assert [c["name"] for c in calls] == ["mcp__time__get_current_time", "mcp__edge__echo", "list_files"]
    results = results_by_call(agent.session.dir)
    assert json.loads(results["c_time"]["content"])["timezone"] == "UTC"
    assert results["c_echo"] == {"call_id": "c_echo", "content": "hi there", "is_error": False}


def test_huge_mcp_result_is_spilled_by_layer1(workspace: Path, agents) -> None:
    mcp_json(workspace, {"edge": edge()})
    path = write_script(
        workspace, "script", turn("", ("mcp__edge__huge", {"size": 120_000}, "c_huge")), turn("Seen.")
    )
    agent = make_agent(workspace, path)
    agents.append(agent)
    assert agent.run("make a big one").status == "done"
    (result,) = [m.tool_result for m in agent.session.conversation.messages() if m.tool_result]
    assert result.spilled == "tool-results/c_huge.txt" and len(result.content) < 10_000
    spilled = list((agent.session.dir / "tool-results").iterdir())
    assert len(spilled) == 1 and spilled[0].stat().st_size >= 120_000
    assert spilled[0].name == "c_huge.txt" and spilled[0].read_text().startswith("0123456789")


def test_read_only_mode_follows_the_hints(workspace: Path, agents) -> None:
    mcp_json(workspace, {"edge": edge()})
    path = write_script(
        workspace,
        "script",
        turn(
            "", ("mcp__edge__echo", {"text": "ok"}, "c_ro"), ("mcp__edge__write_note", {"name": "n"}, "c_rw")
        ),
        turn("Done."),
    )
    agent = make_agent(workspace, path, permission_mode="read-only")
    agents.append(agent)
    assert agent.run("try both").status == "done"
    results = results_by_call(agent.session.dir)
    assert results["c_ro"]["content"] == "ok" and not results["c_ro"]["is_error"]
    assert results["c_rw"]["is_error"] and "read-only" in results["c_rw"]["content"]


def test_trust_auto_runs_side_effecting_tools_without_asking(workspace: Path, agents) -> None:
    mcp_json(workspace, {"edge": edge(trust="auto")})
    path = write_script(
        workspace, "script", turn("", ("mcp__edge__write_note", {"name": "n"}, "c1")), turn("Done.")
    )
    agent = make_agent(workspace, path, permission_mode="ask")
    agent.ask = lambda prompt: pytest.fail(f"asked: {prompt}")
    agents.append(agent)
    assert agent.run("write it").status == "done"
    assert results_by_call(agent.session.dir)["c1"]["content"] == "wrote n (0 chars)"


def test_a_server_that_fails_is_one_notice_and_the_run_goes_on(workspace: Path, agents) -> None:
    mcp_json(workspace, {"broken": {"command": "no-such-mcp-server-xyz"}, "edge": edge()})
    path = write_script(
        workspace, "script", turn("", ("mcp__edge__echo", {"text": "fine"}, "c1")), turn("Done.")
    )
    agent = make_agent(workspace, path)
    agents.append(agent)
    events: list = []
    assert agent.run("go", listeners=[events.append]).status == "done"
    notices = [e.text for e in events if isinstance(e, Notice) and "MCP" in e.text]
    assert len(notices) == 1
    assert notices[0].startswith("MCP server 'broken' did not start: FileNotFoundError")
    assert results_by_call(agent.session.dir)["c1"]["content"] == "fine"
    assert not any(t["name"].startswith("mcp__broken") for t in agent.last_runner.provider.requests[0].tools)


def test_bad_mcp_json_is_one_clear_notice(workspace: Path, agents) -> None:
    (workspace / ".mcp.json").write_text('{"mcpServers": {"a": {"command": 3}}}', encoding="utf-8")
    agent = make_agent(workspace, write_script(workspace, "script", turn("Fine.")))
    agents.append(agent)
    events: list = []
    assert agent.run("go", listeners=[events.append]).status == "done"
    (notice,) = [e.text for e in events if isinstance(e, Notice) and "MCP" in e.text]
    assert notice == (
        f"MCP configuration: {workspace / '.mcp.json'}: mcpServers.a.command: must be a non-empty string; "
        "server 'a' is not started"
    )


def test_resume_when_the_server_is_gone(workspace: Path, agents) -> None:
    mcp_json(workspace, {"edge": edge()})
    first = make_agent(
        workspace,
        write_script(
            workspace, "script", turn("", ("mcp__edge__echo", {"text": "old"}, "c_old")), turn("ok")
        ),
    )
    agents.append(first)
    session_id = first.run("first").session_id
    first.close()
    (workspace / ".mcp.json").unlink()
    path = write_script(
        workspace, "script", turn("", ("mcp__edge__echo", {"text": "new"}, "c_new")), turn("It is gone.")
    )
    second = make_agent(workspace, path)
    agents.append(second)
    assert second.run("again", session_id=session_id).status == "done"
    results = results_by_call(second.session.dir)
    assert results["c_old"]["content"] == "old"  # the old result stays
    assert results["c_new"]["is_error"] and "unknown tool 'mcp__edge__echo'" in results["c_new"]["content"]


def test_context_shows_mcp_schemas_as_their_own_part(workspace: Path, agents) -> None:
    from pseudoclaude_nb.magics.context import render_manifest

    mcp_json(workspace, {"time": time_server()})
    agent = make_agent(workspace, write_script(workspace, "script", turn("Hello.")))
    agents.append(agent)
    before = agent.context_manifest()
    assert before["parts"]["mcp_tool_schemas"] == 0 and before["mcp_tools"] == []  # not started yet
    agent.run("hello")
    data = agent.context_manifest()
    assert data["mcp_tools"] == ["mcp__time__convert_time", "mcp__time__get_current_time"]
    assert data["parts"]["mcp_tool_schemas"] > 100 and data["parts"]["tool_schemas"] > 0
    text = render_manifest(agent.next_manifest(), title="next request")
    row = next(line for line in text.splitlines() if "MCP tool schemas" in line)
    assert f"{data['parts']['mcp_tool_schemas']:,}" in row and "2 tools of time" in row
    own = next(line for line in text.splitlines() if line.strip().startswith("tool schemas"))
    assert "mcp__" not in own
    last = agent.last_manifest()
    assert last["parts"]["mcp_tool_schemas"] == data["parts"]["mcp_tool_schemas"]


def test_anthropic_request_carries_mcp_schemas(workspace: Path, agents, monkeypatch) -> None:
    mcp_json(workspace, {"time": time_server()})
    with FakeServer("anthropic") as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-mcp-test-1")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        fake.play(
            anthropic_wire.answer(
                "Let me check.", [("toolu_t", "mcp__time__get_current_time", {"timezone": "UTC"})]
            ),
            anthropic_wire.answer("It is a Tuesday somewhere."),
        )
        agent = make_agent(workspace, provider="anthropic")
        agents.append(agent)
        assert agent.run("what day is it?").status == "done"
        first, second = fake.requests
    tools = {t["name"]: t for t in first.body["tools"]}
    schema = tools["mcp__time__get_current_time"]
    assert schema["description"].startswith("Get current time")
    assert schema["input_schema"]["type"] == "object" and schema["input_schema"]["required"] == ["timezone"]
    tool_result = second.body["messages"][2]["content"][0]
    assert tool_result["tool_use_id"] == "toolu_t" and '"timezone": "UTC"' in str(tool_result["content"])


# --- in IPython: %agent, %mcp, %context, unload ------------------------------------------------------


def test_magics_agent_mcp_and_unload_leaves_no_process(ip, workspace: Path) -> None:
    mcp_json(workspace, {"time": time_server(), "edge": edge()})
    out = run_magic(ip, "mcp")
    assert listed(out, "time", "stdio", "not started")
    assert listed(out, "edge", "stdio", "not started")
    before = children()
    path = write_script(workspace, "script", turn("", ("mcp__edge__pid", {}, "c_pid")), turn("Got it."))
    out = run_magic(ip, f'agent --provider scripted --script {path} --mode auto "which pid?"')
    assert "mcp__edge__pid" in out and "✓ done" in out
    pids = children() - before
    agent = current_agent(ip)
    edge_pid = int(results_by_call(agent.session.dir)["c_pid"]["content"])
    assert edge_pid in pids and len(pids) >= 2

    listing = run_magic(ip, "mcp")
    assert listed(listing, "time", "stdio", "running · 2 tools")
    assert listed(listing, "edge", "stdio", "running · 9 tools")
    assert listed(listing, "mcp__time__get_current_time", "read-only")
    assert listed(listing, "mcp__edge__write_note", "side effects")
    assert sys_executable_not_shown(listing)

    context = run_magic(ip, "context")
    assert "MCP tool schemas" in context

    restarted = run_magic(ip, "mcp restart edge")
    assert restarted.startswith("edge: running")
    assert not alive({edge_pid})
    pids = children() - before

    ip.run_line_magic("unload_ext", "pseudoclaude_nb")
    try:
        assert not alive(pids)
        assert "mcp" not in ip.magics_manager.magics["line"]
    finally:
        ip.run_line_magic("load_ext", "pseudoclaude_nb")  # the fixture unloads it again
        current_agent(ip).settings.workspace = str(workspace)


def sys_executable_not_shown(listing: str) -> bool:
    import sys

    return sys.executable not in listing


def test_mcp_magic_usage_errors_and_empty(ip, workspace: Path) -> None:
    from IPython.core.error import UsageError

    assert run_magic(ip, "mcp").startswith("No MCP servers configured.")
    with pytest.raises(UsageError, match="needs the server's name"):
        ip.run_line_magic("mcp", "restart")
    with pytest.raises(UsageError, match="no MCP server named 'nope'"):
        ip.run_line_magic("mcp", "restart nope")
    with pytest.raises(UsageError, match="unknown action"):
        ip.run_line_magic("mcp", "explode")


def test_config_setting_and_start(ip, workspace: Path) -> None:
    ip.run_line_magic("config", f"PseudoClaude.mcp_servers = {{'edge': {edge()!r}}}")
    out = run_magic(ip, "mcp start")
    assert listed(out, "edge", "stdio", "running · 9 tools")
    assert "%config PseudoClaude.mcp_servers" in out.splitlines()[0]


@pytest.mark.script_may_remain  # interrupted: the run never asks for the rest
def test_interrupt_during_an_mcp_call_keeps_the_log_valid(workspace: Path, agents) -> None:
    import signal
    import threading
    import time

    mcp_json(workspace, {"edge": edge()})
    path = write_script(
        workspace,
        "script",
        turn("", ("mcp__edge__echo", {"text": "warm"}, "c_warm")),
        turn("", ("mcp__edge__slow", {"seconds": 90}, "c_slow")),
        turn("never reached"),
    )
    agent = make_agent(workspace, path)
    agents.append(agent)
    main = threading.main_thread().ident
    started = time.monotonic()

    def interrupt_when_slow_runs(event: object) -> None:
        if isinstance(event, ToolStarted) and event.call.name == "mcp__edge__slow":
            threading.Timer(1.0, lambda: signal.pthread_kill(main, signal.SIGINT)).start()

    summary = agent.run("go slow", listeners=[interrupt_when_slow_runs])
    assert summary.status == "interrupted" and time.monotonic() - started < 60
    results = results_by_call(agent.session.dir)
    assert results["c_warm"]["content"] == "warm"
    assert results["c_slow"]["is_error"] and "interrupted by user" in results["c_slow"]["content"]
    assert agent.mcp.servers["edge"].status == "running"  # the server itself is fine
