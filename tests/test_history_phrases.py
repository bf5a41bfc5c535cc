"""History search for everyday phrases, whose every word is everywhere (issue 34).

The index holds each pair of neighbouring words one of which is a common word, so a phrase
of common words reads only the rows where its words meet in that order. These tests hold the
answer to the brute-force one (``test_history_oracle.expected``) for phrases present, absent,
and whose words meet in a row but not as the phrase — with a phrase's first and last words
cut (a substring search), words joined by punctuation or by CJK, and a text holding the pair
mark itself — through the live indexer and after a rebuild; and they count the candidate
rows a phrase query reads back from the logs, which must not grow with the history.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.history import HistoryIndex
from pseudoclaude_nb.history import rows as history_rows
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir
from tests.scripts import run_magic as run
from tests.test_history_oracle import expected

FILLER = [
    *("the", "return", "value", "of", "self", "is", "in", "the", "file", "and", "the", "error"),
    *(
        "is",
        "not",
        "in",
        "the",
        "test",
        "of",
        "the",
        "value",
        "fix",
        "it",
        "if",
        "the",
        "file",
        "is",
        "there",
    ),
]
PHRASES = [
    "fix the error in the file",
    "the return value of self",
    "if the file is",
    "error: in the file",  # words that meet across punctuation
    "value of the 文件 in the",  # across CJK: never paired
    "the\ufdd0error in",  # the index's own pair mark, in a user's text
    "prefix the errors",
]
QUERIES = [
    *PHRASES,
    "fix the error in the file",
    '"the return value of self"',
    "he return value of sel",  # first and last words cut: they end and begin words
    "x the error in the fil",
    "the file of the value",  # every word everywhere, never this phrase
    '"is not the same"',
    '"of the value is"',
    "error in",
    "error: in",
    "文件 in the",
    "the\ufdd0error",
    "the\ufdd0error in",
    "fix the error",
    "the errors",
    "prefix the",
    "the value",
    "value of",
    "of",
    "is the",
]


def _texts(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        words = [rng.choice(FILLER) for _ in range(rng.randrange(8, 40))]
        text = " ".join(words)
        if rng.random() < 0.15:
            at = rng.randrange(len(text))
            text = text[:at] + " " + rng.choice(PHRASES) + " " + text[at:]
        out.append(text)
    return out


def _write(workspace: Path, sessions: int, per_session: int, seed: int) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    pieces = []
    for s in range(sessions):
        folder = new_session_dir(workspace, now=1_700_000_000 + seed * 100 + s)
        with SessionWriter(folder, fsync=False) as writer:
            conv = Conversation()
            writer.attach(conv)
            for i, text in enumerate(_texts(rng, per_session)):
                msg = Message(role="user" if i % 2 == 0 else "assistant", content=text)
                conv.append(msg)
                pieces.append((folder.name, msg.id, text))
    return pieces


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    workspace = tmp_path_factory.mktemp("phrases")
    return workspace, _write(workspace, sessions=3, per_session=150, seed=1)


@pytest.mark.parametrize("query", QUERIES)
def test_everyday_phrases_match_the_oracle_live_and_rebuilt(history, query: str):
    workspace, pieces = history
    index = HistoryIndex(workspace)
    try:
        want = expected(pieces, query)[:40]
        assert [h.message_uuid for h in index.search(query, limit=40)] == want
        session = pieces[0][0]
        assert [h.message_uuid for h in index.search(query, session_id=session, limit=40)] == expected(
            pieces, query, session
        )[:40]
    finally:
        index.close()


def test_a_rebuilt_index_answers_every_phrase_the_same(history):
    workspace, pieces = history
    index = HistoryIndex(workspace)
    try:
        index.rebuild()
        for query in QUERIES:
            assert [h.message_uuid for h in index.search(query, limit=40)] == expected(pieces, query)[:40], (
                query
            )
    finally:
        index.close()


def _rows_read(index: HistoryIndex, query: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(hits, candidate rows read back from the logs) for one search."""
    read = [0]
    real = history_rows.RowReader.text

    def counting(self, row):
        read[0] += 1
        return real(self, row)

    monkeypatch.setattr(history_rows.RowReader, "text", counting)
    try:
        hits = index.search(query, limit=5)
    finally:
        monkeypatch.setattr(history_rows.RowReader, "text", real)
    return len(hits), read[0]


def test_an_absent_phrase_of_common_words_reads_no_row_however_long_the_history(tmp_path, monkeypatch):
    """Before pairs, every row holding all the words was read back: here every row."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    counts, pieces = [], []
    queries = ('"the file of the value"', '"the return value of the test"', '"fix the value in the error"')
    for round_ in range(2):
        pieces += _write(workspace, sessions=2, per_session=200, seed=10 + round_)
        index = HistoryIndex(workspace)
        try:
            for query in queries:
                hits, read = _rows_read(index, query, monkeypatch)
                assert hits == 0
                counts.append(read)
        finally:
            index.close()
    # Rows that hold every word: hundreds, doubled by the second round; rows read: a few, where
    # the phrase's pairs meet by chance in a row of shuffled words.
    holding = min(len(expected(pieces, q.strip('"'))) for q in queries)
    assert holding >= 200
    assert max(counts) <= 10, counts


def test_a_present_phrase_reads_about_as_many_rows_as_it_returns(tmp_path, monkeypatch):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    _write(workspace, sessions=3, per_session=200, seed=20)
    index = HistoryIndex(workspace)
    try:
        for query in ('"fix the error in the file"', '"the return value of self"', '"if the file is"'):
            hits, read = _rows_read(index, query, monkeypatch)
            assert hits == 5
            assert read <= 10, (query, read)
    finally:
        index.close()


def test_the_magic_finds_an_everyday_phrase(ip, workspace: Path):
    pieces = _write(workspace, sessions=1, per_session=60, seed=3)
    out = run(ip, 'sessions search --all "fix the error in the file"')
    want = expected(pieces, '"fix the error in the file"')
    assert want and f"{min(len(want), 10)} match" in out
    assert out.count("fix the error in the file") >= min(len(want), 10) + 1  # the header and each snippet
    out = run(ip, 'sessions search --all "the file of the value"')
    assert "no match" in out


def test_a_phrase_in_single_quotes_is_the_phrase_and_reads_no_row_when_absent(
    ip, workspace: Path, monkeypatch
):
    """IPython hands the magic its quotes: ``'…'`` was searched quotes and all, and every row
    holding the words was read back (1.5 s at 64 MB through the bench's magic row)."""
    pieces = _write(workspace, sessions=1, per_session=60, seed=3)
    double = run(ip, 'sessions search --all "fix the error in the file"')
    single = run(ip, "sessions search --all 'fix the error in the file'")
    assert expected(pieces, '"fix the error in the file"') and single == double
    read = [0]
    real = history_rows.RowReader.text

    def counting(self, *args, **kwargs):
        read[0] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(history_rows.RowReader, "text", counting)
    assert "no match" in run(ip, "sessions search --all 'the file of the value'")
    assert read[0] <= 10, read
