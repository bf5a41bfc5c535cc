"""The live document through a real Jupyter server with jupyter-collaboration (no browser here).

The kernel side (``DocumentLink``, ``LiveNotebook``) joins the notebook's room as the agent;
a second ``LiveNotebook`` joined to the same room plays the person's page, so what the agent
changes is checked where a collaborator sees it, and the person's edits arrive over the same
server. The page itself is the browser test's (``test_browser_document.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nbformat
import pytest

from bench.jupyter import jupyter_server
from pseudoclaude_nb.notebook.link import DocumentLink
from pseudoclaude_nb.notebook.live import LiveNotebook
from pseudoclaude_nb.notebook.route import Route, find_route
from pseudoclaude_nb.notebook.saved import SavedNotebook
from pseudoclaude_nb.tools.document import NotebookTools

pytestmark = pytest.mark.slow


def _notebook(root: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Title"), nbformat.v4.new_code_cell("x = 2")]
    path = root / "work" / "t.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    return path


def _until(check: Callable[[], Any], seconds: float = 10) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.02)


@pytest.fixture
def served(tmp_path: Path):
    root = tmp_path / "root"
    root.mkdir()
    path = _notebook(root)
    with jupyter_server(root) as server:
        yield server, path


def test_the_route_is_found_from_the_kernels_environment(served) -> None:
    server, path = served
    route = find_route(str(path), server.env())
    assert isinstance(route, Route)
    assert route.path == "work/t.ipynb" and route.url == server.url and route.file == path
    assert "token" not in repr(route) and server.token not in repr(route)
    assert "not started by a Jupyter server" in str(find_route(str(path), {}))
    assert "outside the Jupyter server's root" in str(find_route("/etc/x.ipynb", server.env()))
    assert "left no readable" in str(find_route(str(path), {**server.env(), "JPY_PARENT_PID": "1"}))


def test_a_change_reaches_another_collaborator_and_theirs_reaches_the_agent(served) -> None:
    server, path = served
    route = find_route(str(path), server.env())
    assert isinstance(route, Route)
    agent, person = LiveNotebook(route), LiveNotebook(route)
    agent.open()
    person.open()
    try:
        tools = NotebookTools(agent, None, lambda: {"session": "s", "step": 1})
        assert "# Title" in tools.read(None, None)
        tools.insert(2, "print(x * 21)", "code")
        seen = _until(lambda: [c.source for c in person.snapshot(0, 9).cells if c.source == "print(x * 21)"])
        assert seen, "the person's copy never got the agent's cell"
        stamp = person.snapshot(2, 3).cells[0].agent
        assert stamp == {"session": "s", "step": 1}
        # The person types in cell 1 meanwhile: the agent's edit of it is refused.
        person.set_source(1, person.snapshot(1, 2).cells[0].id, "x = 3", {"by": "person"})
        assert _until(lambda: agent.snapshot(1, 2).cells[0].source == "x = 3")
        with pytest.raises(Exception, match="changed since you read it"):
            tools.edit(1, "x = 4", None)
        # The server saves the shared document to the file.
        assert _until(lambda: "print(x * 21)" in path.read_text(), 15)
    finally:
        agent.close()
        person.close()


def test_a_dropped_connection_is_joined_again_on_the_next_call(served) -> None:
    server, path = served
    route = find_route(str(path), server.env())
    assert isinstance(route, Route)
    agent = LiveNotebook(route)
    agent.open()
    agent.close()  # as when the socket drops
    assert agent.snapshot(0, 5).count == 2  # joined again, with a fresh copy
    agent.close()


def test_the_link_falls_back_to_the_saved_file_without_the_collaboration_extension(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    path = _notebook(root)
    with jupyter_server(root, collaboration=False) as server:
        link = DocumentLink(lambda: str(path), lambda: server.env())
        document, why = link.resolve()
    assert isinstance(document, SavedNotebook)
    assert why is not None and "no collaboration extension" in why and "pseudoclaude_nb[lab]" in why
    news = link.news(why, document)
    assert news is not None and "reads the saved notebook file" in news and "propose a cell" in news
    assert link.news(why, document) is None  # said once per kernel


def test_an_unreachable_server_is_a_reason_not_a_hang(tmp_path: Path) -> None:
    path = _notebook(tmp_path)
    route = Route("http://127.0.0.1:9/", "t", "work/t.ipynb", path)
    started = time.monotonic()
    with pytest.raises(Exception, match="could not be reached"):
        LiveNotebook(route, timeout=2).open()
    assert time.monotonic() - started < 10
