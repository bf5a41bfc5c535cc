"""The one-pass rebuild (``%sessions reindex``): chunks of rows inserted as one statement per table.

The chunked path (rows handed over as JSON and one UTF-8 blob, ``json_each``) must leave
exactly the index the row-by-row path leaves — the same ``docs``, ``logs``, ``skip`` and
vocabulary rows and the same tokens for every row — and answer every query as a scan of the
messages does; the temp file is renamed into place only when complete.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.history import HistoryIndex
from pseudoclaude_nb.history import indexer as history_indexer
from pseudoclaude_nb.history import rebuild as history_build
from pseudoclaude_nb.history.schema import prepare
from pseudoclaude_nb.messages import Message, ToolCall, ToolResult
from pseudoclaude_nb.session.entries import SpillEntry
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import SPILL_DIR, new_session_dir
from tests.test_history_oracle import QUERIES, build_sessions, expected

ODD_TEXTS = [
    "NUL\x00inside qz_nul and after it",
    'tabs\tand\r\nnewlines, "quotes" and \\backslashes\\ qz_esc',
    "emoji 😀 and 压缩上下文 mixed with ASCII_Words and İstanbul and Kelvin K",
    "x",
]


def odd_session(workspace: Path) -> list[tuple[str, str, str]]:
    """A session with what the plain corpus lacks: a spilled file, an earlier search, empty and odd texts."""
    folder = new_session_dir(workspace, now=1_800_000_000)
    pieces = []
    with SessionWriter(folder, fsync=False) as writer:
        conv = Conversation()
        writer.attach(conv)
        for text in ODD_TEXTS:
            msg = Message(role="user", content=text)
            conv.append(msg)
            pieces.append((folder.name, msg.id, text))
        search = ToolCall(id="call_search", name="search_history", arguments={"query": "qz_esc"})
        conv.append(Message(role="assistant", content="", tool_calls=(search,)))
        conv.append(Message(role="user", tool_result=ToolResult(call_id="call_search", content="qz_esc hit")))
        empty = ToolCall(id="call_empty", name="grep", arguments={"pattern": "nothing"})
        conv.append(Message(role="assistant", content="", tool_calls=(empty,)))
        conv.append(Message(role="user", tool_result=ToolResult(call_id="call_empty", content="")))
        (folder / SPILL_DIR).mkdir(exist_ok=True)
        body = "".join(f"line {i} spilled_needle_{i % 7}\n" for i in range(900))
        (folder / SPILL_DIR / "big.txt").write_text(body, encoding="utf-8")
        big = ToolCall(id="big", name="read_file", arguments={"path": "big.log"})
        conv.append(Message(role="assistant", content="", tool_calls=(big,)))
        writer.record(
            SpillEntry.new(
                call_id="big", tool="read_file", path=f"{SPILL_DIR}/big.txt", bytes=len(body), sha256="0" * 64
            )
        )
        conv.append(
            Message(role="user", tool_result=ToolResult(call_id="big", content="preview", spilled="x"))
        )
        # A replace repeats messages already indexed: the first, fullest version is kept.
        conv.replace("compact", conv.messages()[-3:])
    return pieces


def snapshot(path: Path) -> dict:
    """Everything the index holds, as plain rows (the tokens of ``words`` by term)."""
    con = sqlite3.connect(path)
    try:
        con.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, 'words', 'row')")
        terms = [r[0] for r in con.execute("SELECT term FROM temp.v ORDER BY term")]
        return {
            "docs": con.execute("SELECT * FROM docs ORDER BY id").fetchall(),
            "logs": con.execute(
                "SELECT sid, session_id, offset, head, stamp FROM logs ORDER BY sid"
            ).fetchall(),
            "skip": con.execute("SELECT * FROM skip ORDER BY sid, call_id").fetchall(),
            "terms": con.execute("SELECT term FROM terms ORDER BY term").fetchall(),
            "postings": {
                t: [
                    r[0] for r in con.execute("SELECT rowid FROM words WHERE words MATCH ?", ('"' + t + '"',))
                ]
                for t in terms
            },
            "grams": con.execute("SELECT count(*) FROM terms_g WHERE terms_g MATCH '\"ing\"'").fetchone(),
        }
    finally:
        con.close()


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    workspace = tmp_path_factory.mktemp("build")
    pieces = build_sessions(workspace) + odd_session(workspace)
    return workspace, pieces


def rebuild(workspace: Path, monkeypatch, *, json: bool, chunk: int) -> dict:
    monkeypatch.setattr(history_build, "CHUNK_BYTES", chunk)
    if not json:
        monkeypatch.setattr(history_build, "json_available", lambda con: False)
    index = HistoryIndex(workspace)
    try:
        index.rebuild()
        return snapshot(index.path)
    finally:
        index.close()


def test_chunked_build_equals_the_row_by_row_build(history, monkeypatch):
    workspace, _ = history
    # Small chunks: a chunk ends inside a log, and one holds the end of one log and the start of the next.
    chunked = rebuild(workspace, monkeypatch, json=True, chunk=3_000)
    whole = rebuild(workspace, monkeypatch, json=True, chunk=1 << 30)
    by_rows = rebuild(workspace, monkeypatch, json=False, chunk=3_000)
    assert chunked == by_rows == whole
    assert any(d[2] == 3 for d in chunked["docs"])  # a spilled file's chunk went in too
    assert chunked["skip"] and "qz_nul" in chunked["postings"] and "压缩" in chunked["postings"]


def test_the_build_uses_one_statement_per_chunk(history, monkeypatch):
    workspace, _ = history
    monkeypatch.setattr(history_build, "CHUNK_BYTES", 20_000)
    calls = {"chunks": 0, "rows": 0}
    real_write, real_rows = history_build.write, history_indexer.write

    def write(con, packed):
        calls["chunks"] += packed[0] == "json"
        return real_write(con, packed)

    def rows(con, taken):
        calls["rows"] += 1
        return real_rows(con, taken)

    monkeypatch.setattr(history_build, "write", write)
    monkeypatch.setattr(history_indexer, "write", rows)
    seen: list[tuple[int, int]] = []
    index = HistoryIndex(workspace)
    try:
        stats = index.rebuild(progress=lambda done, total: seen.append((done, total)))
    finally:
        index.close()
    assert calls["chunks"] >= 3 and calls["rows"] == 0
    assert len(seen) >= calls["chunks"] and seen[-1] == (stats.log_bytes, stats.log_bytes)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


@pytest.mark.parametrize("query", [*QUERIES, "qz_nul", "spilled_needle_3", "K", "😀", "İstanbul"])
def test_a_chunked_rebuild_answers_as_the_oracle(history, monkeypatch, query):
    workspace, pieces = history
    monkeypatch.setattr(history_build, "CHUNK_BYTES", 5_000)
    index = HistoryIndex(workspace)
    try:
        index.rebuild()
        hits = [h.message_uuid for h in index.search(query, limit=50) if h.kind != "spill"]
        assert hits == expected(pieces, query)[:50]
        if query == "spilled_needle_3":
            (spill,) = [h for h in index.search(query, limit=50) if h.kind == "spill"][:1]
            assert spill.call_id == "big" and spill.line is not None
    finally:
        index.close()


def test_pack_and_write_keep_extreme_values(tmp_path):
    """Row ids and uuid hashes at the ends of 64 bits, a NUL, an empty text, spilled rows: as ``executemany``."""
    rows = [
        (1, 1, 0, 0, 0, 10, None, None, None, -(2**63)),
        (2, 1, 2, 0, 11, 5, None, None, None, 2**63 - 1),
        (3, 1, 3, 4, 0, 900, 801, 17, 99, None),
        (4, 2, 1, 2, 20, 7, None, None, None, 0),
    ]
    texts = [(1, "a\x00b qz"), (2, ""), (3, "spill 压缩 text"), (4, 'grep {"pattern":"x"}')]
    out = []
    for json in (True, False):
        con = sqlite3.connect(tmp_path / f"{json}.sqlite", isolation_level=None)
        prepare(con)
        chunk = history_build.Chunk()
        chunk.add((rows, texts, [(1, "c")], set()), 100)
        history_build.write(con, chunk.pack(json))
        out.append(snapshot_con(con))
        con.close()
    assert out[0] == out[1]
    assert out[0]["docs"] == rows


def snapshot_con(con: sqlite3.Connection) -> dict:
    con.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, 'words', 'row')")
    terms = [r[0] for r in con.execute("SELECT term FROM temp.v ORDER BY term")]
    return {
        "docs": con.execute("SELECT * FROM docs ORDER BY id").fetchall(),
        "skip": con.execute("SELECT * FROM skip").fetchall(),
        "postings": {
            t: [r[0] for r in con.execute("SELECT rowid FROM words WHERE words MATCH ?", ('"' + t + '"',))]
            for t in terms
        },
    }


def test_the_rebuilt_index_has_one_segment_and_live_settings(history):
    workspace, _ = history
    index = HistoryIndex(workspace)
    try:
        index.rebuild()
        con = sqlite3.connect(index.path)
        try:
            for table in ("words", "terms_g"):
                config = dict(con.execute(f"SELECT k, v FROM {table}_config"))
                assert config["automerge"] == 4 and config["crisismerge"] == 16
                assert config["hashsize"] == 1 << 20  # the build's large hash is not kept
                con.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
                # Already one segment: merging again changes nothing.
                before = con.execute(f"SELECT id, block FROM {table}_data ORDER BY id").fetchall()
                con.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
                assert con.execute(f"SELECT id, block FROM {table}_data ORDER BY id").fetchall() == before
            assert con.execute("SELECT count(*) FROM sqlite_master WHERE name = 'docs_sid'").fetchone() == (
                1,
            )
        finally:
            con.close()
    finally:
        index.close()


def test_an_interrupted_rebuild_leaves_the_old_index_as_it_was(history, monkeypatch):
    workspace, pieces = history
    monkeypatch.setattr(history_build, "CHUNK_BYTES", 3_000)
    index = HistoryIndex(workspace)
    try:
        index.rebuild()
        before = index.path.read_bytes()
        inode = os.stat(index.path).st_ino
        calls = []

        def progress(done: int, total: int) -> None:
            calls.append(done)
            if len(calls) == 3:
                raise KeyboardInterrupt  # the user stops the cell mid-build

        with pytest.raises(KeyboardInterrupt):
            index.rebuild(progress=progress)
        assert index.path.read_bytes() == before and os.stat(index.path).st_ino == inode
        assert sorted(p.name for p in index.path.parent.glob("history.sqlite*")) == ["history.sqlite"]
        assert [h.message_uuid for h in index.search("qz_nul", limit=50)] == expected(pieces, "qz_nul")
    finally:
        index.close()
