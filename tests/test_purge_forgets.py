"""Trash and purge forget: the session's rows leave history.sqlite at once, and purge scrubs the files.

The lifecycle is told about the index per call (``index=LIFECYCLE_HOOK``, as ``%sessions``
passes it); the log layer does not import its index (issue 33).
"""

from __future__ import annotations

from pathlib import Path

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.history import LIFECYCLE_HOOK, HistoryIndex
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
    return b"".join(
        Path(f"{base}{s}").read_bytes() for s in ("", "-wal", "-shm") if Path(f"{base}{s}").exists()
    )


def test_purge_leaves_no_byte_of_the_session_in_the_index_files(workspace: Path):
    index = HistoryIndex(workspace)
    keep = session_with(workspace, index, ["an ordinary session", "about lunch"])
    doomed = session_with(workspace, index, [f"the password hint is {UNIQUE}", f"noted: {UNIQUE} " * 50])
    assert {h.session_id for h in index.search(UNIQUE)} == {doomed.name}
    # The index holds no text (its rows point into the logs), but its vocabulary holds the words.
    assert UNIQUE.encode() not in index_bytes(workspace)
    assert all(word in index_bytes(workspace) for word in WORDS)

    trash_session(workspace, doomed.name, index=LIFECYCLE_HOOK)
    assert index.search(UNIQUE) == []  # gone from search the moment it is trashed
    purge(plan_purge(workspace, doomed.name), workspace, index=LIFECYCLE_HOOK)
    assert UNIQUE.encode() not in index_bytes(workspace)  # every byte of db, -wal, -shm
    assert UNIQUE[:12].encode() not in index_bytes(workspace)
    assert not [word for word in WORDS if word in index_bytes(workspace)]
    assert [h.session_id for h in index.search("lunch")] == [keep.name]  # the rest still works
    index.close()


def test_trash_removes_rows_and_restore_indexes_again(workspace: Path):
    index = HistoryIndex(workspace)
    d = session_with(workspace, index, [f"remember {UNIQUE}"])
    assert index.search(UNIQUE)
    trash_session(workspace, d.name, index=LIFECYCLE_HOOK)
    assert index.search(UNIQUE) == []
    restore_session(workspace, d.name, index=LIFECYCLE_HOOK)
    assert [h.session_id for h in index.search(UNIQUE)] == [d.name]
    index.close()


def test_without_the_hook_the_lifecycle_leaves_the_index_to_its_next_sync(workspace: Path):
    index = HistoryIndex(workspace)
    doomed = session_with(workspace, index, [f"the password hint is {UNIQUE}"])
    trash_session(workspace, doomed.name)
    purge(plan_purge(workspace, doomed.name), workspace)
    # Not told: the words stay in the index files until a rebuild ...
    assert all(word in index_bytes(workspace) for word in WORDS)
    # ... while a search of all sessions still drops the rows of a log that is gone.
    assert index.search(UNIQUE) == []
    index.close()
