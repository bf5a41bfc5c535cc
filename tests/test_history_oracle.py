"""History search against a brute-force oracle over real session logs (issue 18).

Sessions are written by the product's writer from realistic text (English prose, Python
source, Chinese, tool calls and results, a spilled file); every query of a published kind —
ASCII words, identifiers, phrases, 1- and 2-character CJK and ASCII terms, absent terms —
must return exactly the rows a scan of every message finds, newest first. The index holds
no text, so this also checks that what it reads back from the logs by offset is right.
"""

from __future__ import annotations

import random
from pathlib import Path

import orjson
import pytest

from bench.corpora import chinese, english, python
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.history import HistoryIndex
from pseudoclaude_nb.messages import Message, ToolCall, ToolResult
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir
from tests.scripts import run_magic as run

QUERIES = [
    "the",  # a common word
    "TextWrapper",
    "parse_args",
    "def __init__",
    "ValueError",
    "import os",
    '"return self"',
    "self.assert",
    "压缩",
    "上下文",
    "猫",
    "模型 estimate",
    "qz",
    "id",
    "x",
    "Q",
    "no_such_identifier_anywhere",
    "zzqqxx",
    "压缩 qz",
]


MIXINS = [
    "TextWrapper(width=3)",
    "textwrapper",
    "Text Wrapper",
    "args.parse_args()",
    "parse args",
    "def __init__(self):",
    "def  __init__",
    "raise ValueError('bad')",
    "import os.path",
    "os import",
    "self.assertEqual(a, b)",
    "return selfish",
    "模型的估算 estimate",
    "压 缩",
]


def _texts(seed: int) -> list[str]:
    rng = random.Random(seed)
    pools = [english(60_000), python(60_000), chinese(20_000)]
    out = []
    for _ in range(60):
        pool = rng.choice(pools)
        start = rng.randrange(0, max(1, len(pool) - 400))
        text = pool[start : start + rng.randrange(20, 400)]
        if rng.random() < 0.1:
            text += rng.choice([" qz", " QZ-7", " id=3", " x", " 猫咪"])
        if rng.random() < 0.3:  # identifiers and near misses (same words, other order or spacing)
            text += " " + rng.choice(MIXINS)
        out.append(text)
    return out


def build_sessions(workspace: Path, count: int = 3) -> list[tuple[str, str, str]]:
    """(session id, message id, text) of every searchable piece, in the order written."""
    pieces = []
    for s in range(count):
        folder = new_session_dir(workspace, now=1_700_000_000 + s)
        with SessionWriter(folder, fsync=False) as writer:
            conv = Conversation()
            writer.attach(conv)
            for i, text in enumerate(_texts(s)):
                if i % 5 == 3:
                    call = ToolCall(id=f"call_{s}_{i}", name="grep", arguments={"pattern": text[:30]})
                    msg = Message(role="assistant", content="", tool_calls=(call,))
                    conv.append(msg)
                    pieces.append((folder.name, msg.id, f"grep {orjson.dumps(call.arguments).decode()}"))
                    result = Message(role="user", tool_result=ToolResult(call_id=call.id, content=text))
                    conv.append(result)
                    pieces.append((folder.name, result.id, text))
                else:
                    msg = Message(role="user" if i % 2 == 0 else "assistant", content=text)
                    conv.append(msg)
                    if text.strip():
                        pieces.append((folder.name, msg.id, text))
    return pieces


def oracle(pieces: list[tuple[str, str, str]], terms: list[str], session: str | None = None) -> list[str]:
    """Message ids of the pieces holding every term (case-insensitive), newest first."""
    return [
        uid
        for sid, uid, text in reversed(pieces)
        if (session is None or sid == session) and all(t.lower() in text.lower() for t in terms)
    ]


def expected(pieces: list[tuple[str, str, str]], query: str, session: str | None = None) -> list[str]:
    """The phrase first, then every word (what ``search`` promises), de-duplicated by piece."""
    quoted = query[0] == query[-1] == '"'
    phrase = query.strip('"')
    first = oracle(pieces, [phrase], session)
    if quoted or len(phrase.split()) == 1:
        return first
    rest = [u for u in oracle(pieces, phrase.split(), session) if u not in first]
    return first + rest


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    workspace = tmp_path_factory.mktemp("oracle")
    pieces = build_sessions(workspace)
    return workspace, pieces


@pytest.mark.parametrize("query", QUERIES)
def test_every_kind_of_query_matches_the_oracle(history, query: str):
    workspace, pieces = history
    index = HistoryIndex(workspace)
    try:
        hits = index.search(query, limit=50)
        want = expected(pieces, query)[:50]
        assert [h.message_uuid for h in hits] == want
        for h in hits:
            for term in query.strip('"').split():
                if len(query.strip('"').split()) == 1:
                    assert term.lower() in h.snippet.lower() or h.snippet.endswith("…")
        session = pieces[0][0]
        mine = index.search(query, session_id=session, limit=50)
        assert [h.message_uuid for h in mine] == expected(pieces, query, session)[:50]
    finally:
        index.close()


def test_a_rebuilt_index_answers_the_same_and_stores_no_text(history):
    workspace, pieces = history
    index = HistoryIndex(workspace)
    try:
        before = {q: [h.message_uuid for h in index.search(q, limit=50)] for q in QUERIES}
        seen = []
        stats = index.rebuild(progress=lambda done, total: seen.append((done, total)))
        assert stats.sessions == 3 and stats.rows == len(pieces)
        assert seen and seen[-1][0] == seen[-1][1] == stats.log_bytes
        assert [d for d, _ in seen] == sorted(d for d, _ in seen)
        assert {q: [h.message_uuid for h in index.search(q, limit=50)] for q in QUERIES} == before
        data = index.path.read_bytes()
        # No sentence of the logs is in the index file: it holds words, not text.
        long_texts = [t for _, _, t in pieces if len(t) > 80 and t.isascii()]
        assert long_texts and not [t for t in long_texts if t[10:70].encode() in data]
    finally:
        index.close()


def test_magic_search_and_reindex_with_a_progress_line(ip, workspace: Path):
    pieces = build_sessions(workspace, count=2)
    out = run(ip, "sessions reindex")
    assert "reindex [" in out and "100%" in out  # the terminal's progress line
    assert "reindexed 2 sessions" in out and "× the logs" in out
    found = run(ip, "sessions search 压缩 --all")
    want = expected(pieces, "压缩")
    assert found.startswith(f"{min(len(want), 20)} match") if want else "no match" in found
    assert "no match" in run(ip, "sessions search zzqqxx --all")


def test_a_lost_index_over_big_logs_is_built_in_one_pass(tmp_path, monkeypatch):
    from pseudoclaude_nb import history as history_module

    pieces = build_sessions(tmp_path, count=2)
    index = HistoryIndex(tmp_path)
    try:
        assert index.search("压缩", limit=50)
        index.path.unlink()  # lost (or deleted as corrupt)
        monkeypatch.setattr(history_module, "BUILD_BYTES", 1000)
        builds = []
        real = HistoryIndex.rebuild
        monkeypatch.setattr(
            HistoryIndex, "rebuild", lambda self, *a, **k: builds.append(1) or real(self, *a, **k)
        )
        assert [h.message_uuid for h in index.search("压缩", limit=50)] == expected(pieces, "压缩")[:50]
        assert builds == [1]
        index.search("qz")
        assert builds == [1]  # once: then it catches up as usual
    finally:
        index.close()


def test_in_a_notebook_the_progress_is_a_widget_bar():
    from pseudoclaude_nb.magics.history import ReindexProgress

    progress = ReindexProgress(notebook=True)
    progress(0, 4_000_000)
    progress(1_000_000, 4_000_000)
    assert progress.bar.value == 0.25 and progress.label.value == "1.0 of 4.0 MB"
    progress(4_000_000, 4_000_000)
    progress.finish()
    assert progress.bar.value == 1.0 and progress.bar.bar_style == "success"
