"""Trash and purge forget: the session's rows leave history.sqlite at once, and purge scrubs the files."""

from __future__ import annotations

from pathlib import Path

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.history import HistoryIndex
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session.lifecycle import plan_purge, purge, restore_session, trash_session
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir

UNIQUE = "zebra-quokka-7731-marmalade"
WORDS = (b"zebra", b"quokka", b"marmalade")


def session_with(workspace: Path, index: HistoryIndex, texts: list[str]) -> Path:
    d = new_session_dir(workspace)
    with SessionWriter(d, fsync=False) as w:
        conv = Conversation()
        w.attach(conv)
        conv.add_hooks(index.hooks(d))
        for i, text in enumerate(texts):
            conv.append(Message(role="user" if i % 2 == 0 else "assistant", content=text))
    return d


def index_bytes(workspace: Path) -> bytes:
    base = workspace / ".pseudoclaude" / "history.sqlite"
    return b"".join(Path(f"{base}{s}").read_bytes() for s in ("", "-wal", "-shm") if Path(f"{base}{s}").exists())


def test_purge_leaves_no_byte_of_the_session_in_the_index_files(workspace: Path):
    index = HistoryIndex(workspace)
    keep = session_with(workspace, index, ["an ordinary session", "about lunch"])
    doomed = session_with(workspace, index, [f"the password hint is {UNIQUE}", f"noted: {UNIQUE} " * 50])
    assert {h.session_id for h in index.search(UNIQUE)} == {doomed.name}
    # The index holds no text (its rows point into the logs), but its vocabulary holds the words.
    assert UNIQUE.encode() not in index_bytes(workspace)
    assert all(word in index_bytes(workspace) for word in WORDS)

    trash_session(workspace, doomed.name)
    assert index.search(UNIQUE) == []  # gone from search the moment it is trashed
    purge(plan_purge(workspace, doomed.name), workspace)
    assert UNIQUE.encode() not in index_bytes(workspace)  # every byte of db, -wal, -shm
    assert UNIQUE[:12].encode() not in index_bytes(workspace)
    assert not [word for word in WORDS if word in index_bytes(workspace)]
    assert [h.session_id for h in index.search("lunch")] == [keep.name]  # the rest still works
    index.close()


def test_trash_removes_rows_and_restore_indexes_again(workspace: Path):
    index = HistoryIndex(workspace)
    d = session_with(workspace, index, [f"remember {UNIQUE}"])
    assert index.search(UNIQUE)
    trash_session(workspace, d.name)
    assert index.search(UNIQUE) == []
    restore_session(workspace, d.name)
    assert [h.session_id for h in index.search(UNIQUE)] == [d.name]
    index.close()
