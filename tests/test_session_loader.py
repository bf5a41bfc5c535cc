"""The session loader (SPEC §6.3): replay, replace atomicity, bad lines, trims, metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pseudoclaude_nb.errors import SessionError
from pseudoclaude_nb.messages import pairing_problems
from pseudoclaude_nb.session import load_session

_ts = [1_700_000_000.0]


def _next_ts() -> float:
    _ts[0] += 1.0
    return _ts[0]


def msg(
    id: str,
    role: str = "user",
    content: str = "",
    *,
    calls: list[str] = (),
    result: str | None = None,
    replace_id: str | None = None,
    model: str | None = None,
    ts: float | None = None,
    **extra: Any,
) -> dict:
    entry: dict[str, Any] = {
        "v": 1,
        "type": "message",
        "id": id,
        "ts": ts if ts is not None else _next_ts(),
        "role": role,
        "content": content,
        "tool_calls": [{"id": c, "name": "read_file", "arguments": {"path": c}} for c in calls],
        "tool_result": {"call_id": result, "content": f"result of {result}", "is_error": False}
        if result
        else None,
    }
    if replace_id:
        entry["replace_id"] = replace_id
    if model:
        entry["model"] = model
    entry.update(extra)
    return entry


def replace(rid: str, count: Any, reason: str = "compact") -> dict:
    return {
        "v": 1,
        "type": "replace",
        "id": "r-" + rid,
        "ts": _next_ts(),
        "reason": reason,
        "replace_id": rid,
        "count": count,
    }


def usage(
    messages: int, *, inp: int = 100, out: int = 10, cc: int = 0, cr: int = 0, model: str | None = None
) -> dict:
    return {
        "v": 1,
        "type": "usage",
        "id": f"u{messages}-{inp}",
        "ts": _next_ts(),
        "input_tokens": inp,
        "output_tokens": out,
        "cache_creation_input_tokens": cc,
        "cache_read_input_tokens": cr,
        "messages": messages,
        "model": model,
    }


def note(text: str = "n") -> dict:
    return {"v": 1, "type": "note", "id": "n-" + text, "ts": _next_ts(), "text": text, "level": "info"}


def line(entry: dict | str | bytes) -> bytes:
    if isinstance(entry, bytes):
        return entry + b"\n"
    if isinstance(entry, str):
        return entry.encode() + b"\n"
    return json.dumps(entry, ensure_ascii=False).encode() + b"\n"


def write_log(tmp_path: Path, *entries: dict | str | bytes, tail: bytes = b"") -> Path:
    d = tmp_path / "20260101-000000-abcd"
    d.mkdir(exist_ok=True)
    log = d / "conversation.jsonl"
    log.write_bytes(b"".join(line(e) for e in entries) + tail)
    return d


def ids(result) -> list[str]:
    return [m.id for m in result.messages]


# --- plain replay ---------------------------------------------------------------------------------


def test_messages_replay_in_order(tmp_path):
    d = write_log(
        tmp_path, msg("u1", content="hi"), msg("a1", "assistant", "hello"), msg("u2", content="bye")
    )
    r = load_session(d)
    assert ids(r) == ["u1", "a1", "u2"]
    assert [m.role for m in r.messages] == ["user", "assistant", "user"]
    assert r.messages[1].content == "hello"
    assert r.bad_lines == [] and not r.torn_tail and not r.torn_replace
    assert not r.truncated_tool_calls and r.orphan_results == 0 and not r.incomplete
    assert r.problems() == []
    assert r.physical_messages == 3


def test_tool_calls_and_results_are_restored(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="go"),
        msg("a1", "assistant", calls=["c1", "c2"]),
        msg("r1", result="c1"),
        msg("r2", result="c2"),
        msg("a2", "assistant", "done"),
    )
    r = load_session(d)
    assert ids(r) == ["u1", "a1", "r1", "r2", "a2"]
    assert [c.id for c in r.messages[1].tool_calls] == ["c1", "c2"]
    assert r.messages[1].tool_calls[0].arguments == {"path": "c1"}
    assert r.messages[3].tool_result.call_id == "c2"
    assert pairing_problems(r.messages) == []


def test_path_may_be_dir_or_jsonl(tmp_path):
    d = write_log(tmp_path, msg("u1", content="x"))
    by_dir, by_file = load_session(d), load_session(d / "conversation.jsonl")
    assert ids(by_dir) == ids(by_file) == ["u1"]
    assert by_dir.path == by_file.path == d / "conversation.jsonl"
    assert by_dir.session_id == d.name
    assert load_session(str(d)).messages == by_dir.messages


def test_missing_file_raises_session_error_with_path(tmp_path):
    d = tmp_path / "20260101-000000-0000"
    d.mkdir()
    with pytest.raises(SessionError) as info:
        load_session(d)
    assert str(d / "conversation.jsonl") in str(info.value)
    with pytest.raises(SessionError, match="nowhere"):
        load_session(tmp_path / "nowhere" / "conversation.jsonl")


def test_empty_log(tmp_path):
    d = write_log(tmp_path)
    r = load_session(d)
    assert r.messages == [] and r.bad_lines == [] and not r.torn_tail and r.bytes == 0


# --- replace atomicity -------------------------------------------------------------------------------


def test_complete_replace_commits(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="a"),
        msg("a1", "assistant", "b"),
        replace("R", 2),
        msg("s1", content="summary", replace_id="R"),
        msg("s2", "assistant", "ok", replace_id="R"),
        msg("u2", content="after"),
    )
    r = load_session(d)
    assert ids(r) == ["s1", "s2", "u2"]
    assert not r.torn_replace and r.replaces == 1
    assert r.physical_messages == 5


def test_replace_cut_by_eof_keeps_old_state(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="a"),
        msg("a1", "assistant", "b"),
        replace("R", 3),
        msg("s1", content="summary", replace_id="R"),
        msg("s2", "assistant", "x", replace_id="R"),
    )
    r = load_session(d)
    assert ids(r) == ["u1", "a1"]
    assert r.torn_replace is True
    assert r.replaces == 0
    assert not r.incomplete and r.bad_lines == []
    assert "an unfinished replace was discarded (the state before it stands)" in r.problems()


def test_replace_marker_alone_at_eof_keeps_old_state(tmp_path):
    d = write_log(tmp_path, msg("u1", content="a"), replace("R", 1))
    r = load_session(d)
    assert ids(r) == ["u1"] and r.torn_replace


def test_replace_cut_by_another_entry_keeps_old_state_then_continues(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="a"),
        replace("R", 3),
        msg("s1", content="summary", replace_id="R"),
        msg("u2", content="plain append"),  # another entry first: the replace is void
        msg("s2", "assistant", "stray", replace_id="R"),  # stray: ignored
        msg("s3", content="stray", replace_id="R"),
        msg("a2", "assistant", "reply"),
    )
    r = load_session(d)
    assert ids(r) == ["u1", "u2", "a2"]
    assert r.torn_replace is True
    assert r.bad_lines == []


@pytest.mark.parametrize(
    "cutter",
    [usage(1), note("x"), {"v": 1, "type": "future-thing", "id": "f", "ts": 5.0}],
    ids=["usage", "note", "unknown-type"],
)
def test_replace_cut_by_non_message_entry(tmp_path, cutter):
    d = write_log(
        tmp_path,
        msg("u1", content="a"),
        replace("R", 2),
        msg("s1", content="s", replace_id="R"),
        cutter,
        msg("s2", content="s", replace_id="R"),
    )
    r = load_session(d)
    assert ids(r) == ["u1"] and r.torn_replace


def test_replace_cut_by_entry_of_another_replace(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="a"),
        replace("R1", 2),
        msg("s1", content="first", replace_id="R1"),
        replace("R2", 1),
        msg("t1", content="second", replace_id="R2"),
    )
    r = load_session(d)
    assert ids(r) == ["t1"]
    assert r.torn_replace is True and r.replaces == 1


def test_stray_tagged_entries_without_a_replace_are_ignored(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="a"),
        msg("x1", content="stray", replace_id="NOPE"),
        msg("a1", "assistant", "b"),
    )
    r = load_session(d)
    assert ids(r) == ["u1", "a1"]


def test_stray_tagged_entries_after_a_committed_replace_are_ignored(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="a"),
        replace("R", 1),
        msg("s1", content="s", replace_id="R"),
        msg("s2", content="extra", replace_id="R"),
        msg("u2", content="b"),
    )
    r = load_session(d)
    assert ids(r) == ["s1", "u2"]
    assert not r.torn_replace


def test_count_zero_replace_empties(tmp_path):
    d = write_log(tmp_path, msg("u1", content="a"), msg("a1", "assistant", "b"), replace("R", 0, "edit"))
    r = load_session(d)
    assert r.messages == [] and not r.torn_replace and r.replaces == 1
    d2 = write_log(tmp_path, msg("u1", content="a"), replace("R", 0), msg("u2", content="fresh start"))
    assert ids(load_session(d2)) == ["u2"]


def test_several_replaces_last_one_wins(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="a"),
        replace("R1", 1),
        msg("s1", content="one", replace_id="R1"),
        msg("u2", content="b"),
        replace("R2", 2),
        msg("s1", content="one", replace_id="R2"),
        msg("t2", "assistant", "two", replace_id="R2"),
    )
    r = load_session(d)
    assert ids(r) == ["s1", "t2"] and r.replaces == 2 and not r.torn_replace


@pytest.mark.parametrize("count", [-1, "3", None, 1.5])
def test_replace_with_bad_count_is_a_bad_line(tmp_path, count):
    d = write_log(tmp_path, msg("u1", content="a"), replace("R", count), msg("u2", content="b"))
    r = load_session(d)
    assert r.bad_lines == [2]
    assert ids(r) == ["u1", "u2"]


# --- bad lines --------------------------------------------------------------------------------------


def test_bad_lines_by_number_and_replay_continues(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="a"),  # 1
        "this is not json",  # 2
        "[1, 2, 3]",  # 3 JSON, not an object
        '"a string"',  # 4
        "42",  # 5
        {"v": 1, "type": "message", "id": "norole", "ts": 1.0, "content": "x"},  # 6 missing role
        msg("a1", "assistant", "b"),  # 7
        b"\xff\xfe{not utf-8}",  # 8
        msg("bad", role="system", content="x"),  # 9 role out of range
        {"v": 1, "type": "message", "ts": 1.0, "role": "user", "content": "no id"},  # 10
        msg("u2", content="c"),  # 11
    )
    r = load_session(d)
    assert ids(r) == ["u1", "a1", "u2"]
    assert r.bad_lines == [2, 3, 4, 5, 6, 8, 9, 10]
    assert r.incomplete is True
    assert not r.torn_tail
    assert r.problems()[0] == "recovery incomplete: lines 2, 3, 4, 5, 6, 8, 9, 10 unreadable"


def test_many_bad_lines_are_summarised(tmp_path):
    d = write_log(tmp_path, *(["garbage"] * 12), msg("u1", content="a"))
    r = load_session(d)
    assert r.bad_lines == list(range(1, 13))
    assert r.problems()[0] == "recovery incomplete: lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 (+2 more) unreadable"


def test_blank_lines_are_ignored_but_counted_for_numbers(tmp_path):
    d = write_log(tmp_path, msg("u1", content="a"), "", "   ", "garbage", "", msg("a1", "assistant", "b"))
    r = load_session(d)
    assert ids(r) == ["u1", "a1"]
    assert r.bad_lines == [4]


def test_only_blank_lines(tmp_path):
    d = write_log(tmp_path, "", "", "")
    r = load_session(d)
    assert r.messages == [] and r.bad_lines == [] and not r.incomplete


def test_bad_line_inside_a_pending_snapshot_does_not_cut_it(tmp_path):
    # Not a spec rule, but pin down today's behaviour: only *entries* cut a snapshot.
    d = write_log(
        tmp_path,
        msg("u1", content="a"),
        replace("R", 2),
        msg("s1", content="s", replace_id="R"),
        "garbage",
        msg("s2", content="t", replace_id="R"),
    )
    r = load_session(d)
    assert ids(r) == ["s1", "s2"] and r.bad_lines == [4]


# --- torn tail ----------------------------------------------------------------------------------------


def test_torn_tail_only(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="a"),
        msg("a1", "assistant", "b"),
        tail=b'{"v":1,"type":"message","id":"a2","ts":3.0,"role":"us',
    )
    r = load_session(d)
    assert ids(r) == ["u1", "a1"]
    assert r.torn_tail is True
    assert r.bad_lines == []
    assert r.incomplete is False
    assert r.problems() == ["a torn line from a crash was skipped"]


def test_bad_last_line_with_newline_is_not_a_torn_tail(tmp_path):
    d = write_log(tmp_path, msg("u1", content="a"), '{"v":1,"type":"mess')
    r = load_session(d)
    assert not r.torn_tail and r.bad_lines == [2] and r.incomplete


def test_torn_tail_plus_other_bad_lines_is_incomplete(tmp_path):
    d = write_log(tmp_path, msg("u1", content="a"), "garbage", msg("u2", content="b"), tail=b'{"v":1,"ty')
    r = load_session(d)
    assert r.torn_tail and r.bad_lines == [2] and r.incomplete


def test_complete_last_line_without_newline_counts(tmp_path):
    d = write_log(tmp_path, msg("u1", content="a"), tail=json.dumps(msg("u2", content="b")).encode())
    r = load_session(d)
    assert ids(r) == ["u1", "u2"] and not r.torn_tail


def test_torn_tail_inside_multibyte_character(tmp_path):
    full = json.dumps(msg("u2", content="café ☕"), ensure_ascii=False).encode()
    cut = full[: full.index("☕".encode()) + 1]  # one byte into a 3-byte character
    d = write_log(tmp_path, msg("u1", content="a"), tail=cut)
    r = load_session(d)
    assert ids(r) == ["u1"] and r.torn_tail and not r.incomplete


def test_torn_line_marked_by_the_writer_is_a_torn_tail(tmp_path):
    torn_note = {**note("torn"), "kind": "torn-line", "level": "warning"}
    d = write_log(tmp_path, msg("u1", content="a"), '{"v":1,"type":"mes', torn_note, msg("u2", content="b"))
    r = load_session(d)
    assert ids(r) == ["u1", "u2"]
    assert r.torn_tail and r.bad_lines == [] and not r.incomplete


def test_torn_note_does_not_excuse_a_distant_bad_line(tmp_path):
    torn_note = {**note("torn"), "kind": "torn-line"}
    d = write_log(tmp_path, "garbage", msg("u1", content="a"), torn_note)
    r = load_session(d)
    assert r.bad_lines == [1] and r.incomplete


# --- dangling calls and orphans ---------------------------------------------------------------------------


def test_trailing_call_without_result_is_cut(tmp_path):
    d = write_log(tmp_path, msg("u1", content="go"), msg("a1", "assistant", "I'll look", calls=["c1"]))
    r = load_session(d)
    assert ids(r) == ["u1"]
    assert r.truncated_tool_calls is True
    assert "tool calls without results were cut" in r.problems()
    assert not r.incomplete


def test_partial_parallel_results_are_cut_with_their_call(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="go"),
        msg("a0", "assistant", "hi"),
        msg("u2", content="more"),
        msg("a1", "assistant", calls=["c1", "c2", "c3"]),
        msg("r1", result="c1"),
        msg("r3", result="c3"),
    )
    r = load_session(d)
    assert ids(r) == ["u1", "a0", "u2"]
    assert r.truncated_tool_calls is True
    assert r.orphan_results == 0  # cut with their call, not counted as orphans
    assert pairing_problems(r.messages) == []


def test_fully_answered_trailing_calls_are_kept(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="go"),
        msg("a1", "assistant", calls=["c1", "c2"]),
        msg("r2", result="c2"),
        msg("r1", result="c1"),
    )
    r = load_session(d)
    assert ids(r) == ["u1", "a1", "r2", "r1"]
    assert not r.truncated_tool_calls and r.problems() == []


def test_orphan_results_are_dropped_and_counted(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="go"),
        msg("r0", result="ghost1"),
        msg("a1", "assistant", "hm"),
        msg("u2", content="again"),
        msg("a2", "assistant", calls=["c1"]),
        msg("r1", result="c1"),
        msg("r9", result="ghost2"),
        msg("a3", "assistant", "done"),
    )
    r = load_session(d)
    assert ids(r) == ["u1", "a1", "u2", "a2", "r1", "a3"]
    assert r.orphan_results == 2
    assert "2 tool results without their call were dropped" in r.problems()
    assert pairing_problems(r.messages) == []
    assert not r.incomplete


def test_duplicate_result_counts_as_orphan(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="go"),
        msg("a1", "assistant", calls=["c1"]),
        msg("r1", result="c1"),
        msg("r1b", result="c1"),
        msg("a2", "assistant", "ok"),
    )
    r = load_session(d)
    assert ids(r) == ["u1", "a1", "r1", "a2"] and r.orphan_results == 1


def test_replace_that_leaves_dangling_call_is_settled(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="go"),
        replace("R", 2),
        msg("s1", content="x", replace_id="R"),
        msg("s2", "assistant", calls=["c9"], replace_id="R"),
    )
    r = load_session(d)
    assert ids(r) == ["s1"] and r.truncated_tool_calls and not r.torn_replace


def test_loaded_state_is_always_protocol_valid(tmp_path):
    d = write_log(
        tmp_path,
        msg("r0", result="x"),
        msg("u1", content="go"),
        msg("a1", "assistant", calls=["a", "b"]),
        msg("ra", result="a"),
        msg("u2", content="interrupt"),
        msg("rb", result="b"),
        msg("a2", "assistant", calls=["c"]),
    )
    r = load_session(d)
    assert pairing_problems(r.messages) == []
    assert r.truncated_tool_calls and r.orphan_results >= 2
    assert r.repaired


# --- forward compatibility ------------------------------------------------------------------------------


def test_unknown_types_and_fields_are_ignored(tmp_path):
    d = write_log(
        tmp_path,
        {**msg("u1", content="a"), "v": 1, "sentiment": "happy", "extra": {"nested": [1, 2]}},
        {"v": 2, "type": "hologram", "id": "h", "ts": 9.0, "payload": "zzz"},
        msg("a1", "assistant", calls=["c1"], tool_calls_meta="x"),
        {
            **msg("r1", result="c1"),
            "tool_result": {"call_id": "c1", "content": "ok", "is_error": False, "mime": "text/plain"},
        },
        {**msg("a2", "assistant", "done"), "tool_calls": [], "reasoning": "hidden"},
    )
    r = load_session(d)
    assert ids(r) == ["u1", "a1", "r1", "a2"]
    assert r.bad_lines == [] and r.problems() == []
    assert r.messages[2].tool_result.content == "ok"


def test_unknown_fields_in_tool_calls_are_ignored(tmp_path):
    entry = msg("a1", "assistant", calls=["c1"])
    entry["tool_calls"][0]["index"] = 0
    d = write_log(tmp_path, msg("u1", content="go"), entry, msg("r1", result="c1"))
    r = load_session(d)
    assert ids(r) == ["u1", "a1", "r1"] and r.bad_lines == []


def test_spills_and_notes_are_collected(tmp_path):
    spill = {
        "v": 1,
        "type": "spill",
        "id": "s",
        "ts": 3.0,
        "call_id": "c1",
        "tool": "bash",
        "path": "tool-results/c1.txt",
        "bytes": 10,
        "sha256": "0" * 64,
    }
    d = write_log(tmp_path, msg("u1", content="a"), spill, note("hello"))
    r = load_session(d)
    assert [s.call_id for s in r.spills] == ["c1"]
    assert [n.text for n in r.notes] == ["hello"]


# --- metadata --------------------------------------------------------------------------------------------


def test_models_from_messages_and_usage(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="a", model="alpha"),
        msg("a1", "assistant", "b"),
        usage(2, model="alpha"),
        msg("u2", content="c", model="beta"),
        usage(3, model="gamma"),
        msg("a2", "assistant", "d"),
    )
    r = load_session(d)
    assert r.first_model == "alpha"
    assert r.last_model == "gamma"


def test_no_model_anywhere(tmp_path):
    d = write_log(tmp_path, msg("u1", content="a"), usage(1, model=None))
    r = load_session(d)
    assert r.first_model is None and r.last_model is None


def test_title_is_first_user_text_collapsed_and_capped(tmp_path):
    long = "Please   refactor\nthe  parser " + "x" * 200
    d = write_log(
        tmp_path,
        msg("a0", "assistant", "greeting"),
        msg("r0", result="zz"),
        msg("u1", content=long),
        msg("u2", content="second"),
    )
    r = load_session(d)
    expected = " ".join(long.split())[:80]
    assert r.title == expected
    assert len(r.title) == 80
    assert r.title.startswith("Please refactor the parser x")


def test_title_empty_without_user_text(tmp_path):
    d = write_log(tmp_path, msg("a0", "assistant", "hi"))
    assert load_session(d).title == ""


def test_timestamps(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="a", ts=100.0),
        note("x") | {"ts": 150.0},
        msg("a1", "assistant", "b", ts=200.0),
    )
    r = load_session(d)
    assert r.first_ts == 100.0 and r.last_ts == 200.0


def test_usage_anchor_counts_all_tokens_and_length(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="a"),
        msg("a1", "assistant", "b"),
        usage(2, inp=100, out=10, cc=20, cr=300),
    )
    r = load_session(d)
    assert r.usage_anchor == (430, 2)


def test_latest_usage_is_the_anchor(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="a"),
        msg("a1", "assistant", "b"),
        usage(2, inp=10),
        msg("u2", content="c"),
        msg("a2", "assistant", "d"),
        usage(4, inp=50),
    )
    assert load_session(d).usage_anchor == (60, 4)


def test_usage_anchor_reset_by_replace(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="a"),
        msg("a1", "assistant", "b"),
        usage(2),
        replace("R", 1),
        msg("s1", content="summary", replace_id="R"),
    )
    r = load_session(d)
    assert r.usage_anchor is None
    d2 = write_log(tmp_path, msg("u1", content="a"), usage(1, inp=5, out=0), replace("R", 0))
    assert load_session(d2).usage_anchor is None


def test_usage_anchor_survives_a_torn_replace(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="a"),
        msg("a1", "assistant", "b"),
        usage(2, inp=7, out=1),
        replace("R", 2),
        msg("s1", content="summary", replace_id="R"),
    )
    r = load_session(d)
    assert r.torn_replace and r.usage_anchor == (8, 2)


def test_usage_anchor_dropped_when_beyond_the_trimmed_state(tmp_path):
    d = write_log(tmp_path, msg("u1", content="a"), msg("a1", "assistant", calls=["c1"]), usage(2))
    r = load_session(d)
    assert ids(r) == ["u1"] and r.usage_anchor is None


def test_bad_usage_entry_keeps_previous_anchor(tmp_path):
    bad = usage(1)
    bad["messages"] = "lots"
    d = write_log(tmp_path, msg("u1", content="a"), usage(1, inp=3, out=0), bad)
    r = load_session(d)
    assert r.usage_anchor == (3, 1) and r.bad_lines == []


def test_problems_lists_every_phrase(tmp_path):
    d = write_log(
        tmp_path,
        msg("u1", content="go"),
        "garbage",
        msg("r0", result="ghost"),
        msg("a1", "assistant", calls=["c1"]),
        replace("R", 2),
        msg("s", content="x", replace_id="R"),
        tail=b'{"v":1',
    )
    r = load_session(d)
    assert r.problems() == [
        "recovery incomplete: line 2 unreadable",
        "a torn line from a crash was skipped",
        "an unfinished replace was discarded (the state before it stands)",
        "tool calls without results were cut",
        "1 tool results without their call were dropped",
    ]


@pytest.mark.parametrize(
    "content",
    [
        b"\x00\x00\x00",
        b"{" * 5000,
        b'{"v":1,"type":"message","id":"x","ts":"yesterday","role":"user","content":"a"}',
        b'{"v":1,"type":"message","id":"x","ts":1,"role":"user","content":123}',
        b'{"v":1,"type":"message","id":"x","ts":1,"role":"user","tool_calls":"abc"}',
        b'{"v":1,"type":"message","id":"x","ts":1,"role":"user","tool_result":{"call_id":5}}',
        b'{"v":1,"type":"message","id":["x"],"ts":1,"role":"user"}',
        b'{"v":1,"type":"message","id":"x","ts":1,"role":"user","replace_id":["r"]}',
        b'{"v":1,"type":["message"],"id":"x","ts":1}',
        b'{"v":1,"type":"replace","id":"x","ts":1,"replace_id":{"a":1},"count":1}',
        b'{"v":1,"type":"usage","id":"x","ts":1,"input_tokens":[1],"messages":1}',
        b'{"type":"message"}',
        b"{}",
        b"null",
    ],
)
def test_hostile_lines_never_raise(tmp_path, content):
    d = write_log(tmp_path, msg("u1", content="keep"), content, msg("u2", content="keep too"))
    r = load_session(d)
    assert [m.id for m in r.messages][0] == "u1"
    assert ids(r)[-1] == "u2"
    assert pairing_problems(r.messages) == []
