"""Workspace trust for the history index (SPEC §19, §6.5): a found ``history.sqlite`` is checked.

A cloned repository can ship ``.pseudoclaude/history.sqlite``. One with a trigger (a loop
that hung the end of every run, a copy of every indexed word into a side table that purge
never saw), a view, an extra table, another schema, or no database at all is never used:
it is moved aside unused, the index is rebuilt from the logs, and one notice says so.

A catch-up that fails mid-batch (a full disk) leaves nothing cached behind: the next one
indexes every message still missing, without ``%sessions reindex``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from pseudoclaude_nb import history
from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.events import Notice
from pseudoclaude_nb.history import INDEX_NAME, HistoryIndex, forget_sessions
from pseudoclaude_nb.history.file import connect
from pseudoclaude_nb.history.rows import Folders
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir
from tests.disk_support import small_disk  # noqa: F401 - a fixture
from tests.scripts import script, turn

SET_ASIDE = "does not have the expected shape"

# Every inserted word copied into a side table: what the index forgets on purge, kept there.
COPY_WORDS = """
CREATE TABLE side(w TEXT);
CREATE TRIGGER copy_words AFTER INSERT ON terms BEGIN INSERT INTO side(w) VALUES (new.term); END;
CREATE TRIGGER copy_rows AFTER INSERT ON docs BEGIN INSERT INTO side(w) VALUES (new.id); END;
CREATE VIEW everything AS SELECT * FROM side;
"""
# Never ends: the statement that fires it (the catch-up's offset update) would never return.
SPIN = """
CREATE TRIGGER spin AFTER UPDATE ON logs BEGIN
    SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c);
END;
CREATE TRIGGER spin_insert AFTER INSERT ON docs BEGIN
    SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c);
END;
"""


def index_file(workspace: Path) -> Path:
    return workspace / ".pseudoclaude" / INDEX_NAME


def aside_files(workspace: Path, *, companions: bool = False) -> list[Path]:
    """The files set aside (without their -wal, -shm, -journal unless ``companions``)."""
    found = sorted((workspace / ".pseudoclaude").glob(f"{INDEX_NAME}.untrusted-*"))
    return [p for p in found if companions or not p.name.endswith(("-wal", "-shm", "-journal"))]


def make_agent(workspace: Path, agents: list, *turns: dict) -> Agent:
    path = workspace.parent / f"script-{len(agents)}.json"
    path.write_text(json.dumps(script(*turns)), encoding="utf-8")
    agent = Agent(
        PseudoClaude(
            workspace=str(workspace),
            provider="scripted",
            script=str(path),
            permission_mode="auto",
            fsync=False,
        )
    )
    agents.append(agent)
    return agent


def ship(workspace: Path, sql: str = "", *, pragmas: str = "") -> Path:
    """A ``history.sqlite`` as a repository could ship it: the real tables, plus ``sql``."""
    path = index_file(workspace)
    path.parent.mkdir(exist_ok=True)
    con = connect(path)  # the package's own file, exactly
    con.close()
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.executescript(pragmas + sql)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        con.close()
    return path


def side_rows(path: Path) -> int:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("SELECT count(*) FROM side").fetchone()[0]
    finally:
        con.close()


def write_session(workspace: Path, texts: list[str], *, index: HistoryIndex | None = None) -> Path:
    """A session log holding one user message per text (fed to ``index``'s hooks if given)."""
    folder = new_session_dir(workspace)
    with SessionWriter(folder, fsync=False) as writer:
        conversation = Conversation()
        writer.attach(conversation)
        if index is not None:
            conversation.add_hooks(index.hooks(folder))
        for i, text in enumerate(texts):
            conversation.append(Message(role="user", content=text, ts=1.0 + i))
    return folder


# --- a shipped index is never used -------------------------------------------------------------


def test_a_run_never_fires_a_shipped_trigger_and_purge_leaves_no_copy(workspace: Path, agents):
    first = make_agent(workspace, agents, turn("remember MANGO-7"))
    first.run("one")
    first.close()
    path = index_file(workspace)
    con = sqlite3.connect(path, isolation_level=None)  # the repository's author adds to the real file
    con.executescript(COPY_WORDS)
    con.close()

    agent = make_agent(workspace, agents, turn("and PAPAYA-9 now"))  # each run plays it from the top
    events: list = []
    summary = agent.run("two", listeners=[events.append])
    assert summary.status == "done"
    said = [e.text for e in events if isinstance(e, Notice) and SET_ASIDE in e.text]
    assert len(said) == 1 and "is not part of the index" in said[0]
    (aside,) = aside_files(workspace)
    assert side_rows(aside) == 0  # the triggers never ran: nothing was copied
    # The index is rebuilt from the logs: the old session's message and the new ones are found.
    assert [h.snippet for h in agent.history.search("MANGO-7")] == ["remember MANGO-7"]
    assert len(agent.history.search("PAPAYA-9")) == 1

    events.clear()
    agent.run("three KIWI-3", listeners=[events.append])  # said once: the new file is the package's own
    assert not [e for e in events if isinstance(e, Notice) and SET_ASIDE in e.text]
    assert aside_files(workspace) == [aside] and len(agent.history.search("KIWI-3")) == 1
    con = sqlite3.connect(path)
    try:
        kinds = {r[0] for r in con.execute("SELECT type FROM sqlite_master")}
    finally:
        con.close()
    assert kinds == {"table", "index"}


def test_a_trigger_that_never_ends_does_not_hang_the_run(workspace: Path, agents):
    ship(workspace, SPIN)
    agent = make_agent(workspace, agents, turn("quick PLUM-4"))
    done = threading.Event()

    def watchdog() -> None:  # were the trigger fired, the run would never end: stop it, so the test fails
        if done.wait(20):
            return
        while not done.wait(0.1):
            index = agent._history
            con = index._con if index is not None else None
            if con is not None:
                con.interrupt()

    threading.Thread(target=watchdog, daemon=True).start()
    started = time.monotonic()
    try:
        summary = agent.run("go")
        hits = agent.history.search("PLUM-4")
        took = time.monotonic() - started
    finally:
        agent.close()
        done.set()
    assert took < 20
    assert summary.status == "done" and len(hits) == 1
    assert len(aside_files(workspace)) == 1


@pytest.mark.parametrize(
    "sql, pragmas, why",
    [
        ("CREATE TABLE extra(x);", "", "table 'extra' is not part of the index"),
        ("CREATE VIEW v AS SELECT 1;", "", "view 'v' is not part of the index"),
        ("CREATE INDEX docs_uh ON docs(uh);", "", "index 'docs_uh' is not part of the index"),
        ("CREATE TRIGGER t AFTER DELETE ON docs BEGIN SELECT 1; END;", "", "trigger 't'"),
        # A table the index has, made another way (a default that runs on every insert).
        (
            "DROP TABLE skip; CREATE TABLE skip(sid INTEGER, call_id TEXT DEFAULT (random()));",
            "",
            "'skip' differs",
        ),
        ("DROP TABLE meta;", "", "'meta' is missing"),
        ("INSERT INTO words(words, rank) VALUES ('pgsz', 65536);", "", "setting 'pgsz'"),
        ("INSERT INTO terms_g(terms_g, rank) VALUES ('crisismerge', 100000);", "", "setting 'crisismerge'"),
        ("", "PRAGMA user_version = 99;", "schema version 99"),
        ("", "PRAGMA application_id = 7;", "application_id 7"),
    ],
)
def test_any_other_shape_is_set_aside_and_rebuilt(workspace: Path, sql: str, pragmas: str, why: str):
    folder = write_session(workspace, ["find GUAVA-1 later"])
    ship(workspace, sql, pragmas=pragmas)
    index = HistoryIndex(workspace)
    try:
        (hit,) = index.search("GUAVA-1")
        assert hit.session_id == folder.name
        (said,) = index.notices
        assert SET_ASIDE in said and why in said
        assert len(aside_files(workspace)) == 1
    finally:
        index.close()


def test_a_trigger_shipped_in_the_wal_alone_is_found(workspace: Path, tmp_path: Path):
    write_session(workspace, ["find FIG-2 later"])
    clean = tmp_path / "clean.sqlite"
    connect(clean).close()
    con = sqlite3.connect(clean, isolation_level=None)
    con.execute("PRAGMA wal_autocheckpoint = 0")
    con.executescript(COPY_WORDS)  # only in clean.sqlite-wal: the main file still looks right
    index_file(workspace).parent.mkdir(exist_ok=True)
    for suffix in ("", "-wal"):
        Path(f"{index_file(workspace)}{suffix}").write_bytes(Path(f"{clean}{suffix}").read_bytes())
    con.close()

    index = HistoryIndex(workspace)
    try:
        assert len(index.search("FIG-2")) == 1
        assert SET_ASIDE in index.notices[0]
    finally:
        index.close()
    (main,) = aside_files(workspace)
    assert side_rows(main) == 0  # the WAL's trigger was seen (its table is there), never fired
    assert not Path(f"{index_file(workspace)}-wal").exists() or not side_in(index_file(workspace))


def side_in(path: Path) -> bool:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("SELECT 1 FROM sqlite_master WHERE name = 'side'").fetchone() is not None
    finally:
        con.close()


def test_a_file_that_is_not_a_database_is_set_aside(workspace: Path):
    write_session(workspace, ["find LIME-5 later"])
    index_file(workspace).parent.mkdir(exist_ok=True)
    index_file(workspace).write_bytes(b"#!/bin/sh\nrm -rf ~\n" * 100)
    Path(f"{index_file(workspace)}-journal").write_bytes(b"\x00garbage" * 300)
    index = HistoryIndex(workspace)
    try:
        assert len(index.search("LIME-5")) == 1
        (said,) = index.notices
        assert SET_ASIDE in said and "not a database" in said
    finally:
        index.close()
    (main, journal) = aside_files(workspace, companions=True)
    assert journal.name == f"{main.name}-journal"  # the file and its journal, both moved


def test_the_package_s_own_index_is_kept_live_or_rebuilt(workspace: Path):
    write_session(workspace, ["keep PEAR-6"])
    for step in ("made row by row", "rebuilt"):
        index = HistoryIndex(workspace)
        try:
            if step == "rebuilt":
                index.rebuild()
            assert len(index.search("PEAR-6")) == 1
            assert index.notices == []
        finally:
            index.close()
        assert aside_files(workspace) == []
        index = HistoryIndex(workspace)  # opened again: checked, and found right
        try:
            assert len(index.search("PEAR-6")) == 1 and index.notices == []
        finally:
            index.close()
    assert aside_files(workspace) == []


# --- a failed catch-up leaves nothing behind ---------------------------------------------------------


def test_a_full_disk_mid_catch_up_loses_no_message(workspace: Path, monkeypatch: pytest.MonkeyPatch):
    opened: list[sqlite3.Connection] = []
    real_connect = history.connect
    monkeypatch.setattr(
        history, "connect", lambda *a, **k: opened.append(real_connect(*a, **k)) or opened[-1]
    )
    index = HistoryIndex(workspace)  # indexing inside each append
    texts = [f"entry {i} word qzfull{i:04d}x {i * 7919:x}" for i in range(400)]
    try:
        folder = new_session_dir(workspace)
        with SessionWriter(folder, fsync=False) as writer:
            conversation = Conversation()
            writer.attach(conversation)
            conversation.add_hooks(index.hooks(folder))
            conversation.append(
                Message(role="user", content=texts[0], ts=1.0)
            )  # indexed: the caches are warm
            (con,) = opened
            pages = con.execute("PRAGMA page_count").fetchone()[0]
            con.execute(f"PRAGMA max_page_count = {pages + 2}")  # the disk fills a few pages on
            for i, text in enumerate(texts[1:], 1):
                conversation.append(Message(role="user", content=text, ts=1.0 + i))
            failed = [n for n in index.notices if "not updated" in n]
            assert failed and all("full" in n for n in failed)
            assert not [n for n in index.notices if "cannot rollback" in n or "no transaction" in n]
            con.execute("PRAGMA max_page_count = 1073741823")  # space again
        for i in (399, 1, 57, 200):  # the search catches up first: every message is there
            (hit,) = index.search(f"qzfull{i:04d}x")
            assert hit.snippet == texts[i]
        assert index.count() == len(texts)
    finally:
        index.close()


def test_a_really_full_disk_then_freed_finds_every_message(workspace: Path, small_disk):
    if not small_disk.real:
        pytest.skip("needs a real tmpfs: SQLite writes past the simulated disk")
    index = HistoryIndex(workspace)
    texts = [f"note {i} qzdisk{i:04d}y " + "pad " * 40 for i in range(300)]
    try:
        write_session(workspace, texts[:1])
        assert len(index.search("qzdisk0000y")) == 1  # the index exists, its caches warm
        folder = write_session(workspace, texts)
        small_disk.fill(leave=4096)
        assert index.catch_up(folder) == 0
        assert [n for n in index.notices if "not updated" in n and "full" in n]
        assert not [n for n in index.notices if "cannot rollback" in n]
        small_disk.free()
        for i in (0, 150, 299):
            assert len(index.search(f"qzdisk{i:04d}y")) == 2 - bool(i)
    finally:
        index.close()


def test_a_purge_deletes_what_was_set_aside(workspace: Path):
    folder = write_session(workspace, ["secret QUINCE-8"])
    ship(workspace, "CREATE TABLE extra(x);")
    index = HistoryIndex(workspace)
    try:
        assert len(index.search("QUINCE-8")) == 1
    finally:
        index.close()
    assert len(aside_files(workspace, companions=True)) >= 1
    # A set-aside file may be this package's own of an older schema, holding the words: purge forgets.
    forget_sessions(workspace, [folder.name], scrub=True)
    assert aside_files(workspace, companions=True) == []


def test_session_names_read_from_the_file_are_never_paths(tmp_path: Path):
    folders = Folders(
        tmp_path / "sessions", {1: "../../etc", 2: ".hidden", 3: "a/b", 4: "20261203-170000-abcd"}
    )
    assert [folders.get(sid) for sid in (1, 2, 3)] == [None, None, None]
    assert folders.get(4) == tmp_path / "sessions" / "20261203-170000-abcd"
