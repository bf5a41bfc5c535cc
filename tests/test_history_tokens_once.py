"""The live indexer gives ``words`` each distinct token once; a rebuild gives it the text (issue 34).

``words`` is contentless with ``detail=none``: it keeps which rows hold a token, not how
often. Both forms must make the same index, and a row made by either must be deletable by
the other (``Indexer.drop`` deletes with the live form, also rows a rebuild made).
"""

from __future__ import annotations

import re
import sqlite3

import pytest

from pseudoclaude_nb.history.schema import index_text, indexed

TEXTS = [
    "Fix the error in the file, then fix THE error in the other file again",
    "def read_file(path):\n    return open(path).read()  # the file is read in one go",
    "压缩上下文 is the thing: 在 the file 压缩 again",
    "İstanbul ÉCOLE of the x\u0085y \u00a0 z and \ufdd0 a pair mark",
    "the the the of of a",
    "",
    "   ",
    "x",
]


def _table(con: sqlite3.Connection, name: str) -> None:
    con.execute(
        f"CREATE VIRTUAL TABLE {name} USING fts5(t, content='', detail=none, columnsize=0, "
        "tokenize=\"ascii tokenchars '_'\")"
    )
    con.execute(f"CREATE VIRTUAL TABLE {name}_v USING fts5vocab({name}, 'instance')")


def _postings(con: sqlite3.Connection, name: str) -> set[tuple[str, int]]:
    return set(con.execute(f"SELECT term, doc FROM {name}_v"))


@pytest.fixture
def con() -> sqlite3.Connection:
    con = sqlite3.connect(":memory:", isolation_level=None)
    _table(con, "live")
    _table(con, "rebuilt")
    return con


def test_each_distinct_token_once_makes_the_index_the_whole_text_makes(con):
    for i, text in enumerate(TEXTS, 1):
        given, words = indexed(text)
        tokens = [t for t in re.split("[ \n]", given) if t]  # what joins them (\x85 is a word character)
        assert len(tokens) == len(set(tokens))  # each token once
        con.execute("INSERT INTO live(rowid, t) VALUES (?, ?)", (i, given))
        con.execute("INSERT INTO rebuilt(rowid, t) VALUES (?, ?)", (i, index_text(text)))
        assert words == {w.encode() for w in _words(con, i)}
    assert _postings(con, "live") == _postings(con, "rebuilt")
    assert _postings(con, "live")  # not two empty tables


def test_rows_a_rebuild_made_are_deleted_by_the_live_form(con):
    for i, text in enumerate(TEXTS, 1):
        con.execute("INSERT INTO rebuilt(rowid, t) VALUES (?, ?)", (i, index_text(text)))
    con.execute("INSERT INTO rebuilt(rowid, t) VALUES (?, ?)", (99, index_text("keep the keeper")))
    for i, text in enumerate(TEXTS, 1):
        con.execute("INSERT INTO rebuilt(rebuilt, rowid, t) VALUES ('delete', ?, ?)", (i, indexed(text)[0]))
    con.execute("INSERT INTO rebuilt(rebuilt) VALUES ('optimize')")
    con.execute("INSERT INTO rebuilt(rebuilt, rank) VALUES ('integrity-check', 0)")
    assert {doc for _, doc in _postings(con, "rebuilt")} == {99}


def _words(con: sqlite3.Connection, row: int) -> set[str]:
    """The words (not pairs) the rebuilt table holds for ``row``."""
    return {t for t, doc in _postings(con, "rebuilt") if doc == row and "\ufdd0" not in t}
