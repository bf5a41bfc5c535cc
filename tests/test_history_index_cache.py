"""The history index looks only at logs that changed (SPEC §15: search of 1 GB in ≤ 50 ms).

A search of all sessions catches every log up first; a log unchanged since it was consumed
to its end (same inode, size and mtime) is not opened again, so the cost of that check does
not grow with the history already indexed.
"""

from __future__ import annotations

from pathlib import Path

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.history import HistoryIndex
from pseudoclaude_nb.history import indexer as history_indexer
from pseudoclaude_nb.session.lifecycle import trash_dir, trash_session
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir


def _session(workspace: Path, text: str) -> Path:
    folder = new_session_dir(workspace)
    with SessionWriter(folder, fsync=False) as writer:
        conversation = Conversation()
        writer.attach(conversation)
        conversation.add_user(text)
    return folder


def test_unchanged_logs_are_not_read_again(tmp_path, monkeypatch):
    for i in range(3):
        _session(tmp_path, f"needle number {i}")
    index = HistoryIndex(tmp_path)
    assert len(index.search("needle number", limit=10)) == 3
    reads = []
    real = history_indexer._open_log
    monkeypatch.setattr(history_indexer, "_open_log", lambda *a: reads.append(a[0]) or real(*a))
    assert len(index.search("needle number", limit=10)) == 3
    assert reads == []
    index.close()


def test_a_log_that_grew_is_read_and_only_it(tmp_path, monkeypatch):
    folders = [_session(tmp_path, f"first {i}") for i in range(3)]
    index = HistoryIndex(tmp_path)
    index.search("first", limit=10)
    with SessionWriter(folders[1], fsync=False) as writer:
        conversation = Conversation()
        writer.attach(conversation)
        conversation.add_user("a later haystack line")
    reads = []
    real = history_indexer._open_log
    monkeypatch.setattr(
        history_indexer, "_open_log", lambda *a: reads.append(Path(a[0]).parent.name) or real(*a)
    )
    hits = index.search("later haystack", limit=10)
    assert [h.session_id for h in hits] == [folders[1].name]
    assert reads == [folders[1].name]
    index.close()


def test_a_rebuilt_index_forgets_what_it_had_seen(tmp_path):
    _session(tmp_path, "kept after a rebuild")
    index = HistoryIndex(tmp_path)
    index.search("kept", limit=5)
    stats = index.rebuild()
    assert stats.rows >= 1
    assert [h.session_id for h in index.search("kept after", limit=5)]
    index.close()


def test_a_word_dropped_from_the_vocabulary_elsewhere_is_added_again(tmp_path):
    """The indexer remembers which words the vocabulary holds (issue 34: it inserts only new
    ones); another kernel forgetting a session drops its words, and a fragment must still
    find the word when it comes back — in this kernel, and after this kernel forgot it too."""
    first = _session(tmp_path, "the zebrafishlike tank")
    here = HistoryIndex(tmp_path)
    assert [h.session_id for h in here.search("ebrafishlik")] == [first.name]
    trash_session(tmp_path, first.name)  # its own connection to the index, as another kernel's
    second = _session(tmp_path, "another zebrafishlike tank")
    assert [h.session_id for h in here.search("ebrafishlik")] == [second.name]
    trash_dir(tmp_path).mkdir(exist_ok=True)
    second.rename(trash_dir(tmp_path) / second.name)  # trashed here: this kernel forgets it
    assert here.forget([second.name]) >= 1
    third = _session(tmp_path, "a third zebrafishlike tank")
    assert [h.session_id for h in here.search("ebrafishlik")] == [third.name]
    here.close()
