"""One parser of log entries (issue 12): every reader of ``conversation.jsonl`` agrees on a fuzzed log.

The loader, the history index, the timeline, the spill browser and rollover's first-request
scan all read entries through ``session.entries.parse_entry``; on any log — valid entries,
entries of the wrong shape, unknown types and lines that are not JSON — they must count the
same messages, the same bad lines and the same spills.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pseudoclaude_nb.history import HistoryIndex
from pseudoclaude_nb.history.indexer import uuid_hash
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session import load_session, new_session_dir
from pseudoclaude_nb.session.entries import MessageEntry, SpillEntry, parse_entry, parse_line
from pseudoclaude_nb.session.loader import first_request
from pseudoclaude_nb.session.timeline import build_timeline
from pseudoclaude_nb.widgets.spills import spill_rows

text = st.text(alphabet="ab é\n☕", max_size=12)
ids = st.sampled_from(["m1", "m2", "m3", "m4"])
message = st.fixed_dictionaries(
    {
        "v": st.just(1),
        "type": st.just("message"),
        "id": ids | st.none() | st.integers(),
        "ts": st.floats(1.0, 2.0) | st.none() | st.text(max_size=2),
        "role": st.sampled_from(["user", "assistant", "system", 3]),
        "content": text | st.none() | st.integers(),
        "tool_calls": st.just([]) | st.none() | st.just([{"id": "c1", "name": "bash", "arguments": {}}]),
    },
    optional={
        "tool_result": st.none() | st.fixed_dictionaries({"call_id": st.just("c1"), "content": text}),
        "host": st.none() | st.just("rollover-remind") | st.integers(),
    },
)
spill = st.fixed_dictionaries(
    {
        "v": st.just(1),
        "type": st.just("spill"),
        "id": st.just("s"),
        "ts": st.just(1.5),
        "call_id": st.just("c1") | st.none(),
        "tool": st.just("bash"),
        "path": st.just("tool-results/c1.txt") | st.integers(),
        "bytes": st.integers(0, 10) | st.text(max_size=2),
        "sha256": st.just("0" * 64),
    }
)
other = st.fixed_dictionaries(
    {
        "v": st.just(1),
        "type": st.sampled_from(["note", "compact", "rollover", "usage", "future-kind", "replace"]),
        "id": st.just("o"),
        "ts": st.just(1.7),
    },
    optional={"text": text, "ok": st.booleans(), "count": st.integers(-1, 2), "replace_id": st.just("r")},
)
line = (
    message.map(json.dumps)
    | spill.map(json.dumps)
    | other.map(json.dumps)
    | st.sampled_from(["not json", "[1, 2]", '"a string"', "{", "null"])
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(line, max_size=14))
def test_every_reader_agrees_on_a_fuzzed_log(workspace: Path, lines: list[str]):
    session = new_session_dir(workspace)
    (session / "conversation.jsonl").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
    parsed = [parse_line(x.encode()) for x in lines]
    valid_messages = [e for e in parsed if isinstance(e, MessageEntry)]

    loaded = load_session(session, full=True)
    assert loaded.physical_messages == len(valid_messages)
    assert loaded.bad_lines == [i + 1 for i, e in enumerate(parsed) if e is None]
    assert len(loaded.spills) == sum(isinstance(e, SpillEntry) for e in parsed)

    timeline = build_timeline(session)
    kinds = [item.kind for item in timeline.items]
    assert kinds.count("bad") == len(loaded.bad_lines)
    assert sum(k in ("user", "assistant", "tool_call", "tool_result") for k in kinds) == len(valid_messages)
    assert kinds.count("spill") == len(loaded.spills)

    assert len(spill_rows(session)) == len(loaded.spills)

    first = next(
        (e.message for e in valid_messages if e.message.role == "user" and e.message.tool_result is None),
        None,
    )
    assert first_request(session / "conversation.jsonl") == ((first.id, first.content) if first else None)

    index = HistoryIndex(workspace)
    try:
        index.catch_up(session)
    finally:
        index.close()
    with sqlite3.connect(workspace / ".pseudoclaude" / "history.sqlite") as con:
        indexed = {
            uuid
            for (uuid,) in con.execute(
                "SELECT DISTINCT uh FROM docs JOIN logs USING (sid) WHERE session_id = ? AND kind != 3",
                (session.name,),
            )
        }
    # The index keeps a hash of each message id (its text stays in the log), and of each id
    # only its first version: a replace snapshot repeats messages (a spilled one as its preview).
    first_versions: dict[str, Message] = {}
    for m in (e.message for e in valid_messages):
        first_versions.setdefault(m.id, m)
    expected = {
        uuid_hash(m.id)
        for m in first_versions.values()
        if m.content.strip() or m.tool_calls or m.tool_result is not None
    }
    assert indexed == expected


def test_parse_entry_is_as_tolerant_as_the_loader():
    assert parse_entry([1]) is None and parse_entry("x") is None
    assert parse_entry({"type": "message", "id": "m", "role": "user"}) is not None  # lenient reading
    assert parse_entry({"type": "message", "role": "user"}) is None
    assert parse_entry({"type": "replace", "count": -1, "replace_id": "r"}) is None
    future = parse_entry({"type": "later", "x": 1})
    assert future is not None and future.raw == {"type": "later", "x": 1}
