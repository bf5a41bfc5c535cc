"""Workspace trust: text that is not UTF-8 never ends a session (finding 6), and a ``@tool``
cannot end ``%agent`` or the kernel's memory (finding 10).

A lone surrogate (``os.listdir``'s way of carrying an undecodable byte, or a broken string
from a function or a provider) cannot be written to a UTF-8 log. It is escaped where text
enters the conversation, so the log, the conversation and a resumed session agree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pseudoclaude_nb import tool
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import Message, NotebookMark, ToolCall
from pseudoclaude_nb.session import load_session
from pseudoclaude_nb.session.entries import NoteEntry
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.tools import user as user_tools
from tests.scripts import read_log, script, scripted_agent, turn

NOTE = "(note: 1 name was not valid UTF-8; shown with \\xNN escapes)"


@pytest.fixture(autouse=True)
def _empty_registry():
    user_tools.clear()
    yield
    user_tools.clear()


def _write_script(workspace: Path, name: str, *turns: dict) -> str:
    path = workspace.parent / name
    path.write_text(json.dumps(script(*turns)), encoding="utf-8")
    return str(path)


def _results(agent) -> dict[str, tuple[str, bool]]:
    return {
        m.tool_result.call_id: (m.tool_result.content, m.tool_result.is_error)
        for m in agent.session.conversation.messages()
        if m.tool_result is not None
    }


def _same_as_log(agent) -> None:
    """What the conversation holds is what the log replays to."""
    loaded = load_session(agent.session.dir)
    assert not loaded.incomplete and not loaded.bad_lines
    held = [m.to_dict() for m in agent.session.conversation.messages()]
    assert [m.to_dict() for m in loaded.messages] == held


def _bytes_name(folder: Path, name: bytes, data: bytes) -> None:
    fd = os.open(os.fsencode(folder) + b"/" + name, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def test_file_names_that_are_not_utf8_are_escaped_and_the_session_goes_on(workspace: Path, agents):
    _bytes_name(workspace, b"caf\xe9.txt", b"hello caf\xe9\nsecond line\n")
    os.mkdir(os.fsencode(workspace) + b"/d\xff")
    _bytes_name(workspace / os.fsdecode(b"d\xff"), b"x.txt", b"hello too\n")
    first = _write_script(
        workspace,
        "names.json",
        turn("", ("list_files", {}, "c_list")),
        turn("", ("grep", {"pattern": "hello"}, "c_grep")),
        # The names as the tools show them address the files.
        turn("", ("read_file", {"path": "caf\\xe9.txt"}, "c_read")),
        turn("", ("grep", {"pattern": "second", "path": "caf\\xe9.txt"}, "c_grep_one")),
        turn("", ("read_file", {"path": "d\\xff/x.txt"}, "c_read_dir")),
        turn("all read"),
    )
    agent = scripted_agent(workspace)
    agents.append(agent)
    summary = agent.run("look around", script=first)
    assert summary.status == "done", summary.error
    results = _results(agent)
    listing, is_error = results["c_list"]
    assert not is_error
    assert listing.splitlines() == [
        "caf\\xe9.txt",
        "d\\xff/x.txt",
        "(note: 2 names were not valid UTF-8; shown with \\xNN escapes)",
    ]
    grep_text, _ = results["c_grep"]
    assert "caf\\xe9.txt:1:hello caf\ufffd" in grep_text and "d\\xff/x.txt:1:hello too" in grep_text
    assert grep_text.endswith("(note: 2 names were not valid UTF-8; shown with \\xNN escapes)")
    assert results["c_read"] == ("     1\thello caf\ufffd\n     2\tsecond line", False)
    assert results["c_grep_one"] == ("caf\\xe9.txt:2:second line\n" + NOTE, False)
    assert results["c_read_dir"] == ("     1\thello too", False)

    # The log holds the escaped names, loads again, and equals the conversation.
    logged = [e for e in read_log(agent.session.dir) if e["type"] == "message" and e.get("tool_result")]
    assert any("caf\\xe9.txt" in e["tool_result"]["content"] for e in logged)
    _same_as_log(agent)

    # The next run writes to the same session.
    second = _write_script(
        workspace, "again.json", turn("", ("list_files", {"pattern": "*.txt"}, "c_again")), turn("ok")
    )
    assert agent.run("once more", script=second).status == "done"
    assert _results(agent)["c_again"] == ("caf\\xe9.txt\n" + NOTE, False)
    assert [e for e in read_log(agent.session.dir) if e["type"] == "message"][-1]["content"] == "ok"
    _same_as_log(agent)


def test_a_literal_backslash_name_wins_over_the_escape(workspace: Path):
    from pseudoclaude_nb.tools.workspace import resolve_in_workspace

    _bytes_name(workspace, b"caf\xe9.txt", b"bytes\n")
    assert resolve_in_workspace(workspace, "caf\\xe9.txt").name == os.fsdecode(b"caf\xe9.txt")
    (workspace / "caf\\xe9.txt").write_text("literal\n", encoding="utf-8")
    assert resolve_in_workspace(workspace, "caf\\xe9.txt").name == "caf\\xe9.txt"
    assert resolve_in_workspace(workspace, "nothing\\xe9.txt").name == "nothing\\xe9.txt"


def test_tool_results_arguments_and_prompts_with_lone_surrogates(workspace: Path, agents):
    @tool(read_only=True)
    def broken() -> str:
        return "a\udcffb"

    @tool(read_only=True)
    def high() -> str:
        return "\ud800"

    @tool(read_only=True)
    def echo(text: str) -> str:
        return f"got {len(text)} characters: {text}"

    @tool(read_only=True)
    def fails() -> str:
        raise ValueError("lost " + os.fsdecode(b"gon\xe9"))

    path = _write_script(
        workspace,
        "surrogates.json",
        turn("", ("broken", {}, "c_broken"), ("high", {}, "c_high")),
        turn("thinking about caf\udce9", ("echo", {"text": "x\udce9y", "k\ud800": 1}, "c_echo")),
        turn("", ("echo", {"text": "x\udce9y"}, "c_echo2"), ("fails", {}, "c_fails")),
        turn("done \ud83d"),
    )
    agent = scripted_agent(workspace)
    agents.append(agent)
    summary = agent.run("prompt with \udce9 in it", script=path)
    assert summary.status == "done", summary.error
    results = _results(agent)
    note = "(note: some of this text was not valid UTF-8; shown with \\xNN or \\uNNNN escapes)"
    assert results["c_broken"] == ("a\\xffb\n" + note, False)
    assert results["c_high"] == ("\\ud800\n" + note, False)
    # The arguments were escaped before the call entered the conversation: the tool saw
    # what the log holds ("k\ud800" is an unknown argument there, an error the model reads).
    assert results["c_echo"][1] is True and "k\\ud800" in results["c_echo"][0]
    assert results["c_echo2"] == ("got 6 characters: x\\xe9y", False)
    assert results["c_fails"][1] is True and "fails raised ValueError: lost gon\\xe9" in results["c_fails"][0]
    messages = agent.session.conversation.messages()
    assert messages[0].content == "prompt with \\xe9 in it"
    [thinking] = [m for m in messages if m.content.startswith("thinking")]
    assert thinking.content == "thinking about caf\\xe9"
    assert thinking.tool_calls[0].arguments == {"text": "x\\xe9y", "k\\ud800": 1}
    assert summary.final_text == "done \\ud83d"
    _same_as_log(agent)
    assert agent.run("and on", script=_write_script(workspace, "on.json", turn("fine"))).status == "done"
    _same_as_log(agent)


def test_a_notebook_block_keeps_its_mark_when_escaped(workspace: Path):
    from pseudoclaude_nb.providers.scripted import ScriptedProvider
    from pseudoclaude_nb.runner import Runner
    from pseudoclaude_nb.tools import Permissions, ToolRegistry

    block = "<notebook>print('\udce9')</notebook>\n"
    prompt = Message(
        role="user", content=block + "what now \ud800?", notebook=NotebookMark(chars=len(block), cells=1)
    )
    path = workspace / "s.json"
    path.write_text(json.dumps(script(turn("ok"))), encoding="utf-8")
    session = workspace / "session"
    session.mkdir()
    with SessionWriter(session, fsync=False) as writer:
        conversation = Conversation()
        writer.attach(conversation)
        runner = Runner(
            conversation=conversation,
            provider=ScriptedProvider(path),
            tools=ToolRegistry(),
            permissions=Permissions("auto"),
            system_prompt="",
            writer=writer,
        )
        assert runner.run(prompt).status == "done"
        first = conversation.messages()[0]
    shown = "<notebook>print('\\xe9')</notebook>\n"
    assert first.content == shown + "what now \\ud800?"
    assert first.notebook == NotebookMark(chars=len(shown), cells=1)
    assert [m.to_dict() for m in load_session(session).messages] == [
        m.to_dict() for m in conversation.messages()
    ]


def test_the_writer_escapes_what_reaches_it_instead_of_failing(tmp_path: Path):
    """A path that skipped the boundaries (a message built by hand) still never ends the session."""
    deep: object = {"name": "caf\udce9"}
    for _ in range(300):  # past orjson's 255 levels: the standard library's path
        deep = [deep]
    (tmp_path / "s").mkdir()
    with SessionWriter(tmp_path / "s", fsync=False) as writer:
        conversation = Conversation()
        writer.attach(conversation)
        conversation.add_user("caf\udce9")
        conversation.append(
            Message(
                role="assistant", content="", tool_calls=(ToolCall(id="c1", name="t", arguments={"a": deep}),)
            )
        )
        conversation.add_tool_result("c1", "r\ud800")
        writer.record(NoteEntry.new("a note about caf\udce9"))
        conversation.replace("resync", conversation.messages())
        conversation.add_user("after")
        assert writer.failed is None
    loaded = load_session(tmp_path / "s")
    assert not loaded.bad_lines
    assert [m.content for m in loaded.messages] == ["caf\\xe9", "", "", "after"]
    assert loaded.messages[2].tool_result.content == "r\\ud800"
    raw = (tmp_path / "s" / "conversation.jsonl").read_text(encoding="utf-8")
    assert '"caf\\\\xe9"' in raw and "a note about caf\\\\xe9" in raw


# --- finding 10: a @tool cannot end %agent -----------------------------------------------------


class Boom(BaseException):
    pass


def test_sys_exit_and_base_exceptions_from_a_tool_become_error_results(workspace: Path, agents):
    @tool(read_only=True)
    def leave() -> str:
        sys.exit(3)

    @tool(read_only=True)
    def boom() -> str:
        raise Boom("deep trouble")

    @tool(read_only=True)
    def fine() -> str:
        return "still here"

    path = _write_script(
        workspace,
        "exit.json",
        turn("", ("leave", {}, "c_exit"), ("boom", {}, "c_boom")),
        turn("", ("fine", {}, "c_fine")),
        turn("done"),
    )
    agent = scripted_agent(workspace)
    agents.append(agent)
    summary = agent.run("go", script=path)
    assert summary.status == "done", summary.error
    results = _results(agent)
    assert results["c_exit"][1] and "leave raised SystemExit: 3" in results["c_exit"][0]
    assert "sys.exit(3)" in results["c_exit"][0]  # the last frames, as for any exception
    assert results["c_boom"][1] and "boom raised Boom: deep trouble" in results["c_boom"][0]
    assert results["c_fine"] == ("still here", False)
    _same_as_log(agent)


@pytest.mark.script_may_remain  # interrupted: the run never asks for the rest
def test_keyboard_interrupt_from_a_tool_still_stops_the_run(workspace: Path, agents):
    from pseudoclaude_nb.runner import INTERRUPTED

    @tool(read_only=True)
    def stop() -> str:
        raise KeyboardInterrupt

    path = _write_script(workspace, "ctrl-c.json", turn("", ("stop", {}, "c_stop")), turn("never"))
    agent = scripted_agent(workspace)
    agents.append(agent)
    assert agent.run("go", script=path).status == "interrupted"
    assert _results(agent)["c_stop"] == (INTERRUPTED, True)


def test_a_user_tool_may_not_take_an_mcp_name():
    with pytest.raises(ValueError, match="namespace of MCP servers' tools"):
        tool(lambda: 1, name="mcp__x__y")

    with pytest.raises(ValueError, match="mcp__"):

        @tool
        def MCP__fs__read() -> str:  # noqa: N802 - the name is the point
            return ""

    assert user_tools.user_tools() == []


# --- finding 10: a 500 MB result costs about the cap, not gigabytes ----------------------------

_PEAK = textwrap.dedent(
    """
    import json, os, sys, tempfile, tracemalloc
    from pathlib import Path
    os.environ["PSEUDOCLAUDE_HOME"] = tempfile.mkdtemp()
    sys.path.insert(0, {root!r})
    from pseudoclaude_nb import tool
    from tests.scripts import script, scripted_agent, turn
    ws = Path(tempfile.mkdtemp()) / "ws"
    ws.mkdir()
    os.chdir(ws)
    path = ws.parent / "s.json"
    path.write_text(json.dumps(script(turn("", ("big", {{}}, "c1")), turn("done"))))
    agent = scripted_agent(ws)
    N = 500 << 20
    value = {{"zeros": lambda: bytes(N), "str": lambda: "x" * N, "list": lambda: [0] * (N // 8)}}[sys.argv[1]]()

    @tool(read_only=True)
    def big():
        return value

    from pseudoclaude_nb.messages import ToolCall
    from pseudoclaude_nb.tools import Permissions, ToolRegistry
    from pseudoclaude_nb.tools import user as user_tools

    # What the call allocates beyond the 500 MB value itself: the tool's own path, then a run.
    registry = ToolRegistry(t.as_tool() for t in user_tools.user_tools())
    tracemalloc.start()
    registry.run(ToolCall(id="c0", name="big", arguments={{}}), Permissions("auto"))
    tool_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    tracemalloc.start()
    summary = agent.run("go", script=str(path))
    run_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    spill = next(m for m in agent.session.conversation.messages() if m.tool_result is not None)
    result = spill.tool_result.content[:300]
    print(json.dumps({{"status": summary.status, "tool": tool_peak, "run": run_peak, "result": result}}))
    agent.close()
    """
)


@pytest.mark.parametrize("kind", ["zeros", "str", "list"])
def test_a_500_mb_tool_result_peaks_near_the_cap(kind: str, tmp_path: Path):
    """bytes(500 MB) used to be repr'd whole: 2 GB more at the peak (a 2.5 GB kernel)."""
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run(
        [sys.executable, "-c", _PEAK.format(root=root), kind],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == "done"
    assert out["result"].startswith("[Tool result too large")  # spilled by Layer 1, as any result
    assert out["tool"] < 3 * user_tools.RESULT_CAP, out  # the cut head and its note: ~2x at most
    # The whole run also spills the result (redacted, encoded, hashed) and indexes the session;
    # measured ~92 MB for a 500 MB str, ~18 MB for bytes (was 2 GB), ~8 MB for the list.
    assert out["run"] < 8 * user_tools.RESULT_CAP, out
