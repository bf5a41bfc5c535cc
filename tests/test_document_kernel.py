"""The agent in the open notebook, end to end without a browser: a real Jupyter server with
jupyter-collaboration starts a real kernel for a notebook (as JupyterLab does when the person
opens it), ``%agent`` runs there, and a second collaborator — a ``LiveNotebook`` joined to the
same room, where the page would be — sees the cells change. Also the stop button, ``ask``
with nobody to answer, and a kernel with no live document (the saved file, the change tools
absent, said once).
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_client import BlockingKernelClient

from bench.jupyter import Server, jupyter_server
from pseudoclaude_nb.notebook.live import LiveNotebook
from pseudoclaude_nb.notebook.route import Route, find_route
from tests.scripts import turn

pytestmark = pytest.mark.slow


def _until(check: Callable[[], Any], seconds: float = 15) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _request(server: Server, method: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        f"{server.url}{path}", data=data, method=method, headers={"Authorization": f"token {server.token}"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        text = r.read()
    return json.loads(text) if text else None


class Kernel:
    """The kernel the server started for the notebook, driven as a frontend drives it."""

    def __init__(self, server: Server, path: str) -> None:
        session = _request(
            server,
            "POST",
            "api/sessions",
            {"path": path, "type": "notebook", "name": path, "kernel": {"name": "python3"}},
        )
        self.server, self.id = server, session["kernel"]["id"]
        # The server reports the kernel idle once it has started; a client's heartbeat sent before
        # that (a loaded machine takes seconds to import ipykernel) finds nothing and calls it dead.
        _until(lambda: _request(server, "GET", f"api/kernels/{self.id}")["execution_state"] == "idle", 120)
        self.client = BlockingKernelClient(connection_file=str(server.runtime / f"kernel-{self.id}.json"))
        self.client.load_connection_file()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=60)

    def run(self, code: str, cell_id: str | None = None, timeout: float = 120) -> tuple[str, dict[str, Any]]:
        """Execute like a frontend (with the cell's id); the printed text and the reply."""
        msg = self.client.session.msg(
            "execute_request",
            {
                "code": code,
                "silent": False,
                "store_history": True,
                "user_expressions": {},
                "allow_stdin": False,
                "stop_on_error": True,
            },
            metadata={"cellId": cell_id} if cell_id else {},
        )
        self.client.shell_channel.send(msg)
        out: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            m = self.client.get_iopub_msg(timeout=max(1, deadline - time.monotonic()))
            if m["parent_header"].get("msg_id") != msg["header"]["msg_id"]:
                continue
            kind, content = m["msg_type"], m["content"]
            if kind == "stream":
                out.append(content["text"])
            elif kind in ("display_data", "execute_result"):
                out.append(content["data"].get("text/plain", ""))
            elif kind == "error":
                out.append("\n".join(content["traceback"]))
            elif kind == "status" and content["execution_state"] == "idle":
                break
        while True:
            reply = self.client.get_shell_msg(timeout=30)
            if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
                return "".join(out), reply["content"]

    def close(self) -> None:
        self.client.stop_channels()
        _request(self.server, "DELETE", f"api/kernels/{self.id}")


def _write(root: Path, *cells: Any) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = list(cells)
    path = root / "t.ipynb"
    nbformat.write(nb, path)
    return path


def _script(root: Path, *turns: dict[str, Any]) -> None:
    (root / "s.json").write_text(
        json.dumps({"model": "scripted-test", "context_window": 200_000, "turns": list(turns)})
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


def test_the_agent_reads_runs_and_inserts_cells_a_collaborator_sees(root: Path) -> None:
    agent_cell = nbformat.v4.new_code_cell(
        "%agent --new --provider scripted --script s.json --mode auto run the setup and print x*21"
    )
    path = _write(
        root,
        nbformat.v4.new_markdown_cell("# Sales analysis"),
        nbformat.v4.new_code_cell("%load_ext pseudoclaude_nb"),
        nbformat.v4.new_code_cell("x = 2\nprint('x is', x)"),
        agent_cell,
    )
    _script(
        root,
        turn("", ("read_notebook", {})),
        turn("", ("run_cell", {"index": 2})),
        turn("", ("insert_cell", {"index": 3, "source": "print(x * 21)"})),
        turn("", ("run_cell", {"index": 3})),
        turn("", ("edit_cell", {"index": 4, "source": "%agent again"})),
        turn("Done: the new cell printed 42."),
    )
    with jupyter_server(root) as server:
        kernel = Kernel(server, "t.ipynb")
        route = find_route(str(path), server.env())
        assert isinstance(route, Route)
        person = LiveNotebook(route)
        person.open()
        try:
            kernel.run("%load_ext pseudoclaude_nb")
            printed, reply = kernel.run(agent_cell.source, cell_id=agent_cell.id)
            assert reply["status"] == "ok", printed
            assert "Done: the new cell printed 42." in printed
            # What the model read: the Markdown title and the cell nobody ran.
            log = next((root / ".pseudoclaude" / "sessions").iterdir()) / "conversation.jsonl"
            results = [json.loads(line) for line in log.read_text().splitlines()]
            read = next(
                e for e in results if (e.get("tool_result") or {}).get("content", "").startswith("# the open")
            )
            assert (
                "# Sales analysis" in read["tool_result"]["content"]
                and "not run" in read["tool_result"]["content"]
            )
            assert "runs %agent" in printed or any("runs %agent" in json.dumps(e) for e in results)
            # What a collaborator (the page) sees: the setup cell ran, the new cell ran below it.
            cells = _until(lambda: (c := person.snapshot(0, 9).cells) and len(c) == 5 and c[3].outputs and c)
            assert cells, person.snapshot(0, 9)
            setup, new = cells[2], cells[3]
            assert setup.outputs[0]["text"] == "x is 2\n" and setup.execution_count is not None
            assert new.source == "print(x * 21)" and new.outputs[0]["text"] == "42\n"
            assert new.execution_count == setup.execution_count + 1
            # Stamped by its last change: the run, at the session's fourth request.
            assert new.agent == {"session": log.parent.name, "step": 4}
            # The %agent cell finishes after the cells it ran: its number comes after theirs.
            assert reply["execution_count"] == new.execution_count + 1
            _, after = kernel.run("1 + 1")
            assert after["execution_count"] == reply["execution_count"] + 1
            # %sessions show lists the changes, the refused one said so.
            shown, _ = kernel.run(f"%sessions show {log.parent.name}")
            assert "notebook changes (4):" in shown
            assert (
                "run_cell(2) · " in shown and "insert_cell(3) · " in shown and "edit_cell(4) refused" in shown
            )
            # The server saves the shared document: the file holds what the page shows.
            assert _until(lambda: "print(x * 21)" in path.read_text(), 20)
        finally:
            person.close()
            kernel.close()


def test_the_stop_button_stops_a_cell_the_agent_runs(root: Path) -> None:
    path = _write(
        root,
        nbformat.v4.new_code_cell("import time\nprint('sleeping', flush=True)\ntime.sleep(60)"),
    )
    _script(root, turn("", ("read_notebook", {})), turn("", ("run_cell", {"index": 0})), turn("not reached"))
    with jupyter_server(root) as server:
        kernel = Kernel(server, "t.ipynb")
        route = find_route(str(path), server.env())
        assert isinstance(route, Route)
        person = LiveNotebook(route)
        person.open()
        try:
            kernel.run("%load_ext pseudoclaude_nb")
            kernel.client.execute("%agent --new --provider scripted --script s.json --mode auto nap")
            assert _until(lambda: person.snapshot(0, 1).cells[0].agent is None and _running(person), 30)
            time.sleep(0.5)
            _request(server, "POST", f"api/kernels/{kernel.id}/interrupt")
            cell = _until(lambda: (c := person.snapshot(0, 1).cells[0]).outputs and c, 30)
            assert cell and cell.outputs[-1]["ename"] == "KeyboardInterrupt"
            assert "sleeping" in cell.outputs[0]["text"]
            printed, reply = kernel.run("print('alive')")
            assert printed.strip() == "alive"
        finally:
            person.close()
            kernel.close()


def _running(person: LiveNotebook) -> bool:
    return bool(person._call(lambda doc: doc.ycells[0].get("execution_state") == "running"))


def test_ask_with_nobody_to_answer_changes_nothing_and_says_so(root: Path) -> None:
    path = _write(root, nbformat.v4.new_code_cell("x = 1"))
    _script(
        root,
        turn("", ("read_notebook", {})),
        turn("", ("edit_cell", {"index": 0, "source": "x = 2"})),
        turn("I could not change it."),
    )
    with jupyter_server(root) as server:
        kernel = Kernel(server, "t.ipynb")
        try:
            kernel.run("%load_ext pseudoclaude_nb")
            printed, _ = kernel.run("%agent --new --provider scripted --script s.json --mode ask change x")
            assert "no stdin" in printed or "no one" in printed.lower() or "refused" in printed
            time.sleep(1.5)
            assert nbformat.read(path, as_version=4).cells[0].source == "x = 1"
        finally:
            kernel.close()


def test_without_a_live_document_the_saved_file_is_read_and_changes_are_absent(root: Path) -> None:
    path = _write(root, nbformat.v4.new_markdown_cell("# Saved title"), nbformat.v4.new_code_cell("z = 9"))
    _script(
        root,
        turn("", ("read_notebook", {})),
        turn("", ("insert_cell", {"index": 0, "source": "a"})),
        turn("ok"),
    )
    with jupyter_server(root, collaboration=False) as server:
        kernel = Kernel(server, "t.ipynb")
        try:
            kernel.run("%load_ext pseudoclaude_nb")
            printed, _ = kernel.run("%agent --new --provider scripted --script s.json --mode auto look")
            assert printed.count("cannot change cells here") == 1 and "no collaboration extension" in printed
            assert "unknown tool 'insert_cell'" in printed or "insert_cell" in printed
            tools, _ = kernel.run("%agent --tools")
            assert "read_notebook" in tools and "insert_cell" not in tools and "propose_cell" in tools
            assert nbformat.read(path, as_version=4).cells[0].source == "# Saved title"
        finally:
            kernel.close()
