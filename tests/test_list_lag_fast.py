"""``%sessions list`` says how far the history index is behind without reading the logs (issue 34).

With more than ``LAG_COUNT_LISTED`` bytes behind (a first listing of a workspace of
unindexed logs), the line says the bytes, from one stat a log; a small lag is still counted
in entries. Every lagging session is handed to the background indexer in one go.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.history import HistoryIndex
from pseudoclaude_nb.history import backlog as history_backlog
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir
from tests.scripts import run_magic as run


def _empty_index(ws: Path) -> None:
    """An index that holds none of the logs written after it."""
    index = HistoryIndex(ws)
    try:
        assert index.count() == 0
    finally:
        index.close()


def _sessions(ws: Path, n: int, text: str) -> None:
    for i in range(n):
        with SessionWriter(new_session_dir(ws, now=1_790_000_000 + i * 60), fsync=False) as writer:
            conversation = Conversation()
            writer.attach(conversation)
            conversation.append(Message(role="user", content=text))


def test_a_big_lag_is_told_in_bytes_without_reading_a_log(ip, workspace: Path, monkeypatch):
    _empty_index(workspace)
    _sessions(workspace, 30, "x " * 25_000)  # ~50 KB each, 1.5 MB behind in all
    scheduled = []
    monkeypatch.setattr(HistoryIndex, "schedule", lambda self, *dirs: scheduled.append(dirs))

    def no_read(*args, **kwargs):
        raise AssertionError("the listing read a log to count its entries")

    monkeypatch.setattr(history_backlog, "safeio", SimpleNamespace(open_file=no_read))
    out = run(ip, "sessions list")
    assert "of log behind in 30 sessions" in out
    assert len(scheduled) == 1 and len(scheduled[0]) == 30


def test_a_small_lag_is_still_counted_in_entries(ip, workspace: Path):
    _empty_index(workspace)
    _sessions(workspace, 2, "a short one")
    out = run(ip, "sessions list")
    assert "entries behind in 2 sessions" in out
