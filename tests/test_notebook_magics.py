"""The notebook side in an in-process IPython shell: recording, the block, ``?``, options, tools."""

from __future__ import annotations

import json
from pathlib import Path

from IPython.utils.capture import capture_output

from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.tools import user as user_tools
from tests.scripts import read_log, save_script, turn
from tests.scripts import run_magic as run

SECRET = "sk-ant-api03-" + "Q7" * 30


def cell(ip, source: str) -> tuple[str, object]:
    with capture_output() as out:
        result = ip.run_cell(source, store_history=True)
    return out.stdout, result


def store(ip):
    return current_agent(ip).notebook.cells


def test_cells_are_recorded_while_the_user_sees_the_same_output(ip) -> None:
    shown, _ = cell(ip, "print('hello')\nimport sys; print('warned', file=sys.stderr)\n6 * 7")
    assert "hello" in shown and "42" in shown  # what the user sees is unchanged
    (record,) = store(ip).records()
    assert record.source.startswith("print('hello')")
    assert record.stdout == "hello\n" and record.stderr == "warned\n" and record.result == "42"
    assert record.execution_count is not None


def test_errors_name_the_cell_and_line_without_ansi(ip) -> None:
    cell(ip, "revenue = [120, 95, 143]")
    shown, result = cell(ip, "count = 0\ntotal = sum(revenue)\ntotal / count")
    assert result.error_in_exec is not None
    record = store(ip).records()[-1]
    assert record.error.type == "ZeroDivisionError" and record.error.message == "division by zero"
    assert record.error.frames[-1] == f"Cell In[{record.execution_count}], line 3, in <module>: total / count"
    assert "\x1b[" not in record.render()
    assert "Traceback" not in record.stdout  # the terminal's traceback print is not cell output
    cell(ip, "def broken(:\n    pass")
    assert store(ip).records()[-1].error.type == "SyntaxError"


def test_package_magic_cells_are_left_out_and_not_teed(ip, workspace: Path) -> None:
    path = save_script(workspace / "s.json", turn("ok"))
    cell(ip, "x = 1")
    cell(ip, f"%agent --provider scripted --script {path} hello")
    cell(ip, "%context --json")
    assert [r.source for r in store(ip).records()] == ["x = 1"]


def test_a_10_mb_print_is_shown_but_recorded_bounded(ip) -> None:
    shown, _ = cell(ip, "for _ in range(10_000): print('y' * 999)")
    assert len(shown) == 10_000_000  # the user saw all of it
    record = store(ip).records()[-1]
    assert len(record.stdout) < 5_000 and "characters not shown" in record.stdout


def test_displays_are_recorded_as_text(ip) -> None:
    # Not under capture_output: it swaps the display publisher for its own.
    ip.run_cell(
        "from IPython.display import display\ndisplay({'a': 1})\ndisplay('shown')", store_history=True
    )
    record = store(ip).records()[-1]
    assert record.displays == ["{'a': 1}", "'shown'"]


def test_the_run_begins_with_the_notebook_block_marked_and_redacted(ip, workspace: Path) -> None:
    path = save_script(workspace / "s.json", turn("It divided by zero."))  # each run plays it from the top
    cell(ip, "revenue = [120, 95, 143]")
    cell(ip, f"key = '{SECRET}'\nprint(key)")
    cell(ip, "count = 0\ntotal = sum(revenue)\ntotal / count")
    out, _ = cell(ip, f"%agent --provider scripted --script {path} why did my last cell fail?")
    assert "notebook: the agent sees 3 cells" in out.splitlines()[0]
    agent = current_agent(ip)
    first = agent.session.conversation.messages()[0]
    assert first.notebook is not None and first.notebook.cells == 3
    block = first.content[: first.notebook.chars]
    assert block.startswith("<notebook-activity>") and block.endswith("</notebook-activity>")
    assert "total / count" in block and "ZeroDivisionError: division by zero" in block
    assert "line 3, in <module>: total / count" in block
    assert first.content.endswith("why did my last cell fail?")
    assert first.prompt_text == "why did my last cell fail?"
    # Redacted before it was sent (the request) and so before it was written.
    sent = agent.last_runner.last_request.messages[0].content
    assert SECRET not in sent and "[REDACTED:anthropic]" in sent
    log = (agent.session.dir / "conversation.jsonl").read_text()
    assert SECRET not in log
    entry = next(e for e in read_log(agent.session.dir) if e.get("type") == "message")
    assert entry["notebook"] == {"chars": first.notebook.chars, "cells": 3}
    # The title is the prompt, not the block.
    from pseudoclaude_nb.session import list_sessions

    assert list_sessions(workspace)[0].title == "why did my last cell fail?"
    from pseudoclaude_nb.session.timeline import build_timeline

    user_items = [i for i in build_timeline(agent.session.dir).items if i.kind == "user"]
    assert user_items[0].label == "[3 notebook cells] why did my last cell fail?"
    # The next run reports only what ran since.
    cell(ip, "count = 3")
    out, _ = cell(ip, f"%agent --provider scripted --script {path} and now?")
    assert "notebook: the agent sees 1 cell " in out.splitlines()[0]
    last_user = [m for m in agent.session.conversation.messages() if m.role == "user"][-1]
    assert "count = 3" in last_user.content and "revenue = [120" not in last_user.content


def test_question_mark_lines_reach_the_agent_and_help_still_works(ip, workspace: Path) -> None:
    path = save_script(workspace / "s.json", turn("Because count is 0."))
    out, result = cell(ip, f"%agent --provider scripted --script {path} why did it fail?")
    assert result.error_in_exec is None and "Because count is 0." in out
    assert "not found" not in out
    assert current_agent(ip).session.conversation.messages()[0].content.endswith("why did it fail?")
    # %agent? alone is IPython help (the docstring), not a run.
    transform = ip.input_transformer_manager.transform_cell
    assert transform("%agent?\n") == "get_ipython().run_line_magic('pinfo', '%agent')\n"
    assert transform("%agent why?\n") == "get_ipython().run_line_magic('agent', 'why?')\n"
    assert transform("  %agent --new is it?\n") == "get_ipython().run_line_magic('agent', '--new is it?')\n"
    assert transform("%%agent\nwhy?\n") == "get_ipython().run_cell_magic('agent', '', 'why?\\n')\n"
    # Other magics keep IPython's help syntax.
    assert transform("%time x?\n") == "get_ipython().run_line_magic('pinfo', 'x')\n"
    with capture_output() as help_out:
        ip.run_cell("%agent?")
    assert "--no-notebook" in help_out.stdout and "Run the coding agent" in help_out.stdout


def test_no_notebook_option_and_setting_turn_it_off(ip, workspace: Path) -> None:
    path = save_script(workspace / "s.json", turn("a"))  # each run plays it from the top
    cell(ip, "x = 1")
    cell(ip, f"%agent --provider scripted --script {path} --no-notebook first")
    agent = current_agent(ip)
    first = agent.session.conversation.messages()[0]
    assert first.notebook is None and first.content == "first"
    cell(ip, "%config PseudoClaude.notebook_context = False")
    cell(ip, "y = 2")
    out, _ = cell(ip, f"%agent --provider scripted --script {path} second")
    assert "notebook:" not in out
    assert all(m.notebook is None for m in agent.session.conversation.messages())


def test_context_shows_the_notebook_part(ip, workspace: Path) -> None:
    cell(ip, "data = list(range(10))\nprint(data)")
    data = json.loads(run(ip, "context --json"))
    assert data["parts"]["notebook"] > 0 and data["notebook_pending_cells"] == 1
    assert {"read_cells", "inspect_variable", "propose_cell"} <= set(data["tools"])
    text = run(ip, "context")
    assert "notebook activity" in text and "incl. 1 cells for the next run" in text


def test_notebook_tools_run_in_read_only_mode(ip, workspace: Path) -> None:
    path = save_script(
        workspace / "s.json",
        turn(
            "",
            ("read_cells", {}),
            ("inspect_variable", {"name": "revenue"}),
            ("inspect_variable", {"name": "revenu"}),
            ("propose_cell", {"code": "count = len(revenue)"}),
        ),
        turn("done"),
    )
    cell(ip, "revenue = [120, 95, 143]")
    out, _ = cell(ip, f"%agent --provider scripted --script {path} --mode read-only look")
    results = [m.tool_result for m in current_agent(ip).session.conversation.messages() if m.tool_result]
    assert "### In [" in results[0].content and "revenue = [120, 95, 143]" in results[0].content
    assert not results[0].is_error
    assert "len: 3" in results[1].content and not results[1].is_error
    assert results[2].is_error and "similar names: revenue" in results[2].content
    assert not results[3].is_error and "proposed code (1 line)" in results[3].content
    assert "count = len(revenue)" in out  # a terminal prints the proposed code


def test_user_tools_are_listed_and_offered(ip, workspace: Path) -> None:
    user_tools.clear()
    try:
        cell(
            ip,
            "from pseudoclaude_nb import tool\n"
            "@tool(read_only=True)\n"
            "def mean(values: list[float]) -> float:\n"
            "    '''Average of values.'''\n"
            "    return sum(values) / len(values)\n",
        )
        listed = run(ip, "agent --tools")
        assert "mean" in listed and "yours (@tool)" in listed and "read_cells" in listed
        data = json.loads(run(ip, "context --json"))
        assert "mean" in data["tools"] and data["user_tools"] == ["mean"]
        path = save_script(workspace / "s.json", turn("", ("mean", {"values": [1, 2, 3]})), turn("2.0"))
        cell(ip, f"%agent --provider scripted --script {path} --mode read-only average")
        results = [m.tool_result for m in current_agent(ip).session.conversation.messages() if m.tool_result]
        assert results[0].content == "2.0" and not results[0].is_error
    finally:
        user_tools.clear()
