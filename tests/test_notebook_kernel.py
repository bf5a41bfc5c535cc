"""The notebook parts in a real kernel through nbclient, against a local fake Anthropic server.

One notebook plays the issue's scenario (a list, a cell that raises ZeroDivisionError, a
key typed into a cell, a registered function) and then ``%agent why did my last cell fail?``.
The request the server receives is the proof: the activity block with the failing line,
no secret, the function's schema; then its result in the follow-up; ``propose_cell``'s
``set_next_input`` is in the execute reply's payload. The log, the history index and the
spill files are checked for the secret too.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.fakes import FakeServer
from tests.fakes.anthropic_server import answer

SECRET = "sk-ant-api03-" + "Zk9" * 20


def _notebook(workspace: Path) -> nbformat.NotebookNode:
    cells = [
        "%load_ext pseudoclaude_nb\n"
        f"%config PseudoClaude.workspace = {str(workspace)!r}\n"
        "%config PseudoClaude.permission_mode = 'auto'\n"
        "%config PseudoClaude.fsync = False\n"
        "%config PseudoClaude.spill_bytes = 300",
        "revenue = [120, 95, 143]",
        f"api_key = '{SECRET}'\nprint('using', api_key)",
        "from pseudoclaude_nb import tool\n\n"
        "@tool(read_only=True)\n"
        "def mean(values: list[float]) -> float:\n"
        "    '''The average of some numbers.\n\n    Args:\n        values: the numbers.\n    '''\n"
        "    return sum(values) / len(values)",
        "count = 0\ntotal = sum(revenue)\ntotal / count",
        "%agent --provider anthropic why did my last cell fail?",
    ]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    return nb


@pytest.fixture
def anthropic_fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    with FakeServer("anthropic") as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-kernel")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        monkeypatch.setenv("PSEUDOCLAUDE_HOME", str(tmp_path / "home"))
        monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
        monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
        yield fake


def test_the_scenario_in_a_real_kernel(anthropic_fake: FakeServer, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    anthropic_fake.play(
        answer(
            "Let me look.",
            [
                ("call_1", "mean", {"values": [120, 95, 143]}),
                ("call_2", "read_cells", {}),
                ("call_3", "propose_cell", {"code": "count = len(revenue)\ntotal / count"}),
            ],
            stop_reason="tool_use",
        ),
        answer("Line 3, `total / count`, divides by `count`, which is 0."),
    )
    replies: dict[int, dict] = {}
    nb = _notebook(workspace)
    NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(workspace)}},
        on_cell_executed=lambda cell, cell_index, execute_reply: replies.__setitem__(
            cell_index, execute_reply
        ),
    ).execute()

    agent_cell = nb.cells[-1]
    errors = [o for o in agent_cell.outputs if o.output_type == "error"]
    assert not errors, errors
    assert nb.cells[4].outputs[-1].ename == "ZeroDivisionError"  # the user's failing cell

    first, follow_up = anthropic_fake.bodies
    text = json.dumps(first["messages"][0])
    assert "<notebook-activity>" in text and "why did my last cell fail?" in text
    assert "total / count" in text and "ZeroDivisionError: division by zero" in text
    assert "line 3, in <module>: total / count" in text  # the failing line, named
    assert "%load_ext" not in text and "%agent" not in text  # package magics left out
    schemas = {t["name"]: t for t in first["tools"]}
    assert {"read_cells", "inspect_variable", "propose_cell", "mean"} <= set(schemas)
    assert schemas["mean"]["input_schema"]["properties"]["values"]["type"] == "array"
    assert schemas["mean"]["description"] == "The average of some numbers."
    assert "119.33333333333333" in json.dumps(follow_up["messages"])  # mean's result

    # propose_cell reached the frontend as a set_next_input payload.
    payload = replies[len(nb.cells) - 1]["content"]["payload"]
    assert {
        "source": "set_next_input",
        "text": "count = len(revenue)\ntotal / count",
        "replace": False,
    } in payload

    # The key typed into a cell reached neither the server nor anything on disk.
    assert SECRET not in json.dumps(anthropic_fake.bodies)
    assert "[REDACTED:anthropic]" in json.dumps(first)
    store = workspace / ".pseudoclaude"
    files = [p for p in store.rglob("*") if p.is_file()]
    logs = [p for p in files if p.name == "conversation.jsonl"]
    spills = [p for p in files if p.parent.name == "tool-results"]
    index = [p for p in files if p.name.startswith("history.sqlite")]
    assert logs and spills and index, sorted(str(p.relative_to(store)) for p in files)
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
    log = logs[0].read_text()
    assert '"notebook":{"chars":' in log and "total / count" in log
