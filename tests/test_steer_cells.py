"""Which cells the model sees (issue 29, part 7): ``agent-skip``, ``--skip-cells``, ``%context``.

In-process IPython: a cell marked ``agent-skip`` (first-line comment, or the tag found
through the cell id and the notebook file) is in neither the block the scripted provider
receives nor ``read_cells``; ``--skip-cells`` leaves counts out of one run; ``%context
--json`` lists the cells with estimates that add up to the notebook part. One real kernel
(nbclient) checks the same end to end.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from pseudoclaude_nb.context.estimate import estimate_text
from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.notebook import parse_counts
from tests.scripts import run_magic as run
from tests.scripts import save_script, turn

HIDDEN = "hidden_value_4711"


def cell(ip, source: str, **kwargs) -> tuple[str, int]:
    with capture_output() as out:
        result = ip.run_cell(source, store_history=True, **kwargs)
    return out.stdout, result.execution_count


def sent(ip) -> str:
    """The first user message of the last run, as the scripted provider received it."""
    return current_agent(ip).last_runner.last_request.messages[0].content


def agent_line(ip, workspace: Path, options: str = "", *turns: dict) -> str:
    path = save_script(workspace / "s.json", *(turns or (turn("ok"),)))
    out, _ = cell(ip, f"%agent --provider scripted --script {path} --mode read-only {options} look")
    return out


def test_a_cell_commented_agent_skip_reaches_neither_the_block_nor_read_cells(ip, workspace: Path) -> None:
    cell(ip, "a = 1")
    shown, skipped_count = cell(ip, f"# agent-skip\nsecret = '{HIDDEN}'\nprint(secret)")
    assert HIDDEN in shown  # the user still sees the output
    cell(ip, "b = 2")
    record = current_agent(ip).notebook.cells.records()[-2]
    assert record.skipped and record.source == "" and record.stdout == "" and not record.displays
    only_that_one = {"start": skipped_count, "end": skipped_count}
    out = agent_line(
        ip, workspace, "", turn("", ("read_cells", {})), turn("", ("read_cells", only_that_one)), turn("done")
    )
    assert "notebook: the agent sees 2 cells in context" in out.splitlines()[0]
    assert "1 skipped (agent-skip)" in out.splitlines()[0]
    block = sent(ip)
    assert "a = 1" in block and "b = 2" in block and HIDDEN not in block and "secret" not in block
    results = [m.tool_result for m in current_agent(ip).session.conversation.messages() if m.tool_result]
    assert "a = 1" in results[0].content and HIDDEN not in results[0].content
    assert f"In [{skipped_count}]" not in results[0].content  # not even its place
    assert results[1].is_error and HIDDEN not in results[1].content  # only that cell asked: none
    log = next(current_agent(ip).session.dir.glob("conversation.jsonl")).read_text()
    assert HIDDEN not in log


def _notebook_with_tags(path: Path, tags: dict[str, list[str]]) -> None:
    nb = nbformat.v4.new_notebook()
    for cell_id, cell_tags in tags.items():
        c = nbformat.v4.new_code_cell("x = 0", id=cell_id)
        c.metadata["tags"] = cell_tags
        nb.cells.append(c)
    nbformat.write(nb, str(path))


def test_a_cell_tagged_agent_skip_in_the_notebook_file_is_skipped(
    ip, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notebook = workspace / "analysis.ipynb"
    _notebook_with_tags(notebook, {"c-open": [], "c-skip": ["agent-skip", "other"]})
    monkeypatch.setenv("JPY_SESSION_NAME", str(notebook))  # what Jupyter sets in the kernel
    # ipykernel passes the request's metadata.cellId to run_cell as cell_id.
    cell(ip, "shown_here = 1", cell_id="c-open")
    cell(ip, f"token = '{HIDDEN}'", cell_id="c-skip")
    # An older path: the id only in the parent header's metadata (as kernel.get_parent() has it).
    monkeypatch.setattr(ip, "get_parent", lambda: {"metadata": {"cellId": "c-skip"}}, raising=False)
    cell(ip, f"again = '{HIDDEN}'")
    monkeypatch.setattr(ip, "get_parent", lambda: {"metadata": {}}, raising=False)
    # The tag is removed and the notebook saved: the file's new mtime is read again.
    _notebook_with_tags(notebook, {"c-open": [], "c-skip": []})
    cell(ip, "now_shown = 3", cell_id="c-skip")
    out = agent_line(ip, workspace)
    block = sent(ip)
    assert "shown_here = 1" in block and "now_shown = 3" in block and HIDDEN not in block
    assert "2 skipped (agent-skip)" in out.splitlines()[0]


def test_skip_cells_leaves_counts_and_ranges_out_of_one_run(ip, workspace: Path) -> None:
    counts = [cell(ip, f"v{i} = {i}")[1] for i in range(5)]
    out = agent_line(ip, workspace, f"--skip-cells {counts[1]},{counts[2]}")
    block = sent(ip)
    assert "v0 = 0" in block and "v3 = 3" in block and "v4 = 4" in block
    assert "v1 = 1" not in block and "v2 = 2" not in block
    assert "3 cells in context" in out and "2 skipped" in out
    assert current_agent(ip).skip_counts == frozenset()  # for that run only
    counts = [cell(ip, f"w{i} = {i}")[1] for i in range(4)]
    agent_line(ip, workspace, f"--skip-cells {counts[0]}-{counts[2]}", turn("again"))
    block = [m for m in current_agent(ip).last_runner.last_request.messages if m.role == "user"][-1].content
    assert "w3 = 3" in block and not any(f"w{i} = {i}" in block for i in range(3))
    assert parse_counts("3, 5,7-9") == {3, 5, 7, 8, 9}


@pytest.mark.parametrize("value", ["x", "3-", "5-3", "3,,4", "-2"])
def test_a_bad_skip_cells_value_is_a_usage_error_with_the_usage(ip, workspace: Path, value: str) -> None:
    with pytest.raises(UsageError, match=r"Usage: --skip-cells 3,5 or --skip-cells 3-5"):
        ip.run_line_magic("agent", f"--provider scripted --skip-cells={value} look")


def test_context_lists_the_cells_with_estimates_that_add_up(ip, workspace: Path) -> None:
    cell(ip, "data = list(range(10))\nprint(data)")
    cell(ip, "# agent-skip\nkey = 1")
    cell(ip, "total = sum(data)\ntotal")
    run(ip, "config PseudoClaude.notebook_context_bytes = 700")
    for i in range(3):
        cell(ip, f"filler_{i} = {'9' * 300!r}")
    data = json.loads(run(ip, "context --json"))
    cells = data["notebook_cells"]
    assert all(c["label"].startswith("In [") for c in cells) and len(cells) == data["notebook_pending_cells"]
    assert all(c["tokens"] > 0 for c in cells)
    assert sum(c["tokens"] for c in cells) + data["notebook_block_overhead"] == data["parts"]["notebook"]
    assert data["notebook_pending_tokens"] == data["parts"]["notebook"]
    assert data["notebook_skipped"] == 1 and data["notebook_left_out"] == 5 - len(cells) > 0
    assert data["notebook_block_overhead"] >= estimate_text("<notebook-activity></notebook-activity>")
    text = run(ip, "context")
    rows = text.splitlines()
    at = next(i for i, line in enumerate(rows) if "notebook activity" in line)
    assert cells[0]["label"] in rows[at + 1] and str(cells[0]["tokens"]) in rows[at + 1]
    assert "left out by the budget" in text and "1 skipped (agent-skip)" in text
    from pseudoclaude_nb.magics.context import manifest_html

    page = manifest_html(current_agent(ip).next_manifest(), title="next request")
    assert f"{cells[-1]['label']}</td>" in page and "1 skipped (agent-skip)" in page


def test_a_tagged_cell_is_left_out_in_a_real_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nbclient sends no ``cellId``: the client here adds it to each execute request's metadata
    as JupyterLab does; the comment form needs nothing from the frontend."""
    from nbclient import NotebookClient

    workspace = tmp_path / "ws"
    workspace.mkdir()
    monkeypatch.setenv("PSEUDOCLAUDE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    notebook = workspace / "analysis.ipynb"
    monkeypatch.setenv("JPY_SESSION_NAME", str(notebook))  # as Jupyter sets it for the kernel
    path = save_script(workspace / "s.json", turn("ok"))
    nb = nbformat.v4.new_notebook()
    sources = [
        "%load_ext pseudoclaude_nb\n"
        f"%config PseudoClaude.workspace = {str(workspace)!r}\n"
        "%config PseudoClaude.fsync = False",
        "visible = 1",
        f"tagged = '{HIDDEN}-tag'\nprint(tagged)",
        f"# agent-skip\ncommented = '{HIDDEN}-comment'\nprint(commented)",
        "also_visible = 2",
        f"%agent --provider scripted --script {path} look",
    ]
    nb.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nb.cells[2].metadata["tags"] = ["agent-skip"]
    nbformat.write(nb, str(notebook))

    current: dict[str, str] = {}

    def with_cell_ids(**_: object) -> None:
        channel = client.kc.shell_channel
        send = channel.send

        def send_with_id(msg: dict) -> None:
            if msg.get("msg_type") == "execute_request":
                msg["metadata"]["cellId"] = current["id"]
            send(msg)

        channel.send = send_with_id

    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(workspace)}},
        on_notebook_start=with_cell_ids,
        on_cell_execute=lambda cell, cell_index: current.__setitem__("id", cell.id),
    )
    client.execute()

    assert HIDDEN in json.dumps(nb.cells[2].outputs)  # the user still sees the tagged cell's output
    agent_out = json.dumps(nb.cells[-1].outputs)
    assert "2 cells in context" in agent_out and "2 skipped (agent-skip)" in agent_out, agent_out
    files = [p for p in (workspace / ".pseudoclaude").rglob("*") if p.is_file()]
    log = next(p for p in files if p.name == "conversation.jsonl").read_text()
    assert "visible = 1" in log and "also_visible = 2" in log
    for file in files:
        assert HIDDEN.encode() not in file.read_bytes(), file
