"""History search for 1- and 2-character terms (issue 18): found through the vocabulary, not a scan.

Checked against a brute-force oracle over random texts of ASCII and CJK characters.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pseudoclaude_nb.history import HistoryIndex
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session import entries
from pseudoclaude_nb.session.lifecycle import trash_session

ALPHABET = "aqzAQZ1压缩猫咪的 -_.éÉかア한"


def write_session(workspace: Path, sid: str, texts: list[str]) -> list[str]:
    d = workspace / ".pseudoclaude" / "sessions" / sid
    d.mkdir(parents=True, exist_ok=True)
    ids = []
    with open(d / "conversation.jsonl", "ab") as f:
        for i, text in enumerate(texts):
            # Ids from the session and position, not uuid4: a CI (derandomize) failure reproduces.
            role = "user" if i % 2 == 0 else "assistant"
            msg = Message(id=f"{sid[-4:]}{i:028d}", role=role, content=text, ts=1000.0 + i)
            ids.append(msg.id)
            f.write(entries.encode(entries.message_entry(msg)))
    return ids


def oracle(docs: list[tuple[str, str]], terms: list[str]) -> list[str]:
    """Message ids of the docs holding every term (case-insensitive), newest first."""
    return [
        uid for uid, text in reversed(docs) if text.strip() and all(t.lower() in text.lower() for t in terms)
    ]


texts = st.lists(st.text(alphabet=ALPHABET, min_size=0, max_size=30), min_size=1, max_size=30)
short_term = st.text(alphabet=ALPHABET.replace(" ", ""), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=texts, b=texts, query=st.lists(short_term, min_size=1, max_size=2))
def test_short_terms_match_a_brute_force_oracle(tmp_path_factory, a, b, query):
    workspace = tmp_path_factory.mktemp("ws")
    docs = []
    for sid, batch in (("20260101-000000-aaaa", a), ("20260101-000001-bbbb", b)):
        ids = write_session(workspace, sid, batch)
        docs += list(zip(ids, batch, strict=True))
    index = HistoryIndex(workspace)
    try:
        hits = index.search(" ".join(query), limit=50)
        want = oracle(docs, query)
        assert {h.message_uuid for h in hits} == set(want[:50])
        if len(query) == 1:
            assert [h.message_uuid for h in hits] == want[:50]
        # One session only: the same rows, of that session.
        sid = "20260101-000001-bbbb"
        mine = {uid for uid, _ in docs[len(a) :]}
        hits = index.search(" ".join(query), session_id=sid, limit=50)
        assert {h.message_uuid for h in hits} == {u for u in want if u in mine}
    finally:
        index.close()


def test_short_terms_are_narrowed_by_the_index_not_a_scan(workspace):
    write_session(workspace, "20260101-000000-aaaa", ["压缩 the log", "qz marks", "nothing"])
    index = HistoryIndex(workspace)
    try:
        index.search("x")  # catch up
        statements = []
        index._con.set_trace_callback(statements.append)
        assert [h.snippet for h in index.search("压缩")] == ["压缩 the log"]
        assert [h.snippet for h in index.search("QZ")] == ["qz marks"]
        assert index.search("zq") == []
        rows = [s for s in statements if "FROM docs" in s or "FROM words" in s]
        assert rows and all("words MATCH" in s for s in rows)
    finally:
        index.close()


def test_trash_deletes_the_rows_words_from_the_contentless_table(workspace):
    write_session(workspace, "20260101-000000-aaaa", ["压缩 one"])
    write_session(workspace, "20260101-000001-bbbb", ["压缩 two"])
    index = HistoryIndex(workspace)
    try:
        assert len(index.search("压缩")) == 2
        trash_session(workspace, "20260101-000000-aaaa")
        assert [h.snippet for h in index.search("压缩")] == ["压缩 two"]
        con = index._con
        # The deleted row's tokens are gone from the table, not just hidden by the join.
        assert con.execute("SELECT count(*) FROM words WHERE words MATCH '\"压缩\"'").fetchone()[0] == 1
        assert con.execute("SELECT count(*) FROM words WHERE words MATCH 'one'").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM terms WHERE term = 'one'").fetchone()[0] == 0
        assert con.execute("SELECT count(*) FROM terms WHERE term = 'two'").fetchone()[0] == 1
    finally:
        index.close()
