"""Two kernels in one folder: a busy history index says so only when something is behind (issue 41).

The adversary's run: two kernels indexing one workspace printed "database is locked; run
%sessions reindex" six times while nothing was lost. A locked index is another kernel's write
in progress, not a broken file: nothing needs rebuilding, and whatever a busy catch-up left is
read from the log by the next one. Here "the other kernel" is a second SQLite connection that
holds the write lock; the index under test is what a kernel's agent keeps.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.history import HistoryIndex
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir


def a_session(workspace: Path, text: str) -> Path:
    """A session log (written as a kernel writes it) that no index has read yet."""
    folder = new_session_dir(workspace)
    with SessionWriter(folder, fsync=False) as writer:
        conversation = Conversation()
        writer.attach(conversation)
        conversation.append(Message(role="user", content=f"tell me about {text}"))
        conversation.append(Message(role="assistant", content=f"answer about {text}"))
    return folder


class OtherKernel:
    """Another process's write transaction on the index (what a second kernel's catch-up holds)."""

    def __init__(self, workspace: Path) -> None:
        self.con = sqlite3.connect(workspace / ".pseudoclaude" / "history.sqlite", isolation_level=None)
        self.con.execute("BEGIN IMMEDIATE")

    def done(self) -> None:
        self.con.execute("COMMIT")
        self.con.close()


def test_busy_while_the_other_kernel_indexes_it_says_nothing(workspace: Path) -> None:
    folder = a_session(workspace, "zebras")
    index = HistoryIndex(workspace)
    other = OtherKernel(workspace)
    try:
        assert index.catch_up(folder) == 0  # locked: the other kernel is writing ...
    finally:
        other.done()
    HistoryIndex(workspace).catch_up(folder)  # ... and it indexes this log too
    assert index.take_notices() == []  # nothing is behind: nothing to say
    assert index.search("zebras", session_id=folder.name)
    index.close()


def test_busy_with_entries_behind_says_once_that_nothing_is_lost(workspace: Path) -> None:
    index = HistoryIndex(workspace)
    index.catch_up(a_session(workspace, "zebras"))
    second = a_session(workspace, "okapis")  # written while ...
    other = OtherKernel(workspace)  # ... another kernel holds the index
    try:
        for _ in range(3):
            assert index.catch_up(second) == 0
    finally:
        other.done()
    notices = index.take_notices()
    assert len(notices) == 1, notices
    assert "busy" in notices[0] and second.name in notices[0] and "nothing is lost" in notices[0]
    assert "reindex" not in notices[0] and "database is locked" not in notices[0]
    # And nothing was: the next search catches the log up.
    hits = index.search("okapis", session_id=second.name)
    assert hits and index.take_notices() == []
    index.close()


def test_a_search_that_meets_a_busy_index_says_to_try_again(workspace: Path) -> None:
    from pseudoclaude_nb.errors import SessionError

    index = HistoryIndex(workspace)
    index.catch_up(a_session(workspace, "zebras"))
    folder = a_session(workspace, "okapis")  # its catch-up, first in the search, must write
    other = OtherKernel(workspace)
    try:
        try:
            index.search("okapis", session_id=folder.name)
        except SessionError as exc:
            said = str(exc)
        else:
            said = ""
    finally:
        other.done()
    assert "busy" in said and "try again" in said and "reindex" not in said
    assert index.search("okapis", session_id=folder.name)  # once the other kernel is done
    index.close()


def test_a_run_while_another_kernel_writes_the_index_loses_nothing_and_says_no_reindex(
    workspace: Path, agents
) -> None:
    """The adversary's two kernels, as one agent's run against another kernel's open write."""
    import json

    from tests.scripts import script, scripted_agent, turn

    path = workspace.parent / "s.json"
    path.write_text(json.dumps(script(turn("the okapi answer"))), encoding="utf-8")
    agent = scripted_agent(workspace, str(path))
    agents.append(agent)
    agent.history.ready()  # the index file exists, as in a folder another kernel works in
    seen: list = []
    other = OtherKernel(workspace)
    try:
        assert agent.run("tell me about okapis", listeners=[seen.append]).status == "done"
        agent.history.flush()  # what the background indexer met while the other kernel wrote
    finally:
        other.done()
    said = [getattr(e, "text", "") for e in seen] + agent.history.take_notices()
    assert not [t for t in said if "reindex" in t or "database is locked" in t], said
    hits = agent.history.search("okapi", session_id=agent.session.id)
    assert [h.snippet for h in hits] == ["the okapi answer", "tell me about okapis"]
