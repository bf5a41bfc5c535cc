"""The loader's fast path (SPEC §6.3, §15): resume reads from the last complete replace.

Resume cost must follow the effective state: a large log is read backwards to its last
complete replace, and only that region (plus the head and a short look-back) is read.
Bytes read are counted, never time. Wherever it is used, the fast path must give the
state a full replay gives; what it does not read (damage before the replace, counts of
the whole log) is named in the loader's docstring and checked here too.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import Message, ToolCall, Usage
from pseudoclaude_nb.session import entries, fast_load, load_session
from pseudoclaude_nb.session import loader as loader_module
from pseudoclaude_nb.session.entries import CompactEntry, MessageEntry, UsageEntry, parse_entry, valid_message
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir
from tests.test_loader_fuzz import _real_log, damage
from tests.test_truncation import write_real_session

# Fields a fast load always gives exactly as a full replay does: the effective state.
EXACT = (
    "messages",
    "usage_anchor",
    "truncated_tool_calls",
    "orphan_results",
    "last_ts",
    "effective_from_line",
    "effective_from_byte",
)
# ... and these when the head and the look-back hold what they look for (real logs have
# title, model and first timestamp on line 1; here: when nothing between them was skipped).
# torn_tail too: a crash's torn line that the writer mended *before* the last replace lies in
# the skipped part, which a fast load does not report on (a torn last line it does: below).
PREFIX = (
    "title",
    "first_model",
    "first_ts",
    "last_model",
    "spills",
    "compacts",
    "rollovers",
    "notes",
    "torn_tail",
)


def loads(path: Path):
    """(full replay, fast load with the size threshold at 0) of one log."""
    full = load_session(path, full=True)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(loader_module, "FAST_MIN_SKIP", 0)
        fast = load_session(path)
    return full, fast


def assert_same(full, fast, where: str = "") -> None:
    gap = fast.skipped is not None and fast.skipped[0] < fast.skipped[1]
    for name in EXACT + (() if gap else PREFIX):
        assert getattr(fast, name) == getattr(full, name), f"{name} differs {where}"
    if full.torn_tail and not fast.torn_tail:
        assert gap, f"a torn line after the last replace must be reported {where}"
    if fast.skipped is None:  # it fell back to a full replay: everything is the same
        assert fast.bad_lines == full.bad_lines and fast.torn_replace == full.torn_replace
    else:
        assert fast.bad_lines == [], "a fast load never numbers a line it could not place"


# --- the same state as a full replay -------------------------------------------------------------


def test_every_truncation_of_a_real_log_loads_the_same_fast(workspace, tmp_path):
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    log, _final = write_real_session(workspace, scripts)
    data = log.read_bytes()
    cut = tmp_path / "cut" / "conversation.jsonl"
    cut.parent.mkdir()
    used = 0
    for k in range(len(data) + 1):
        cut.write_bytes(data[:k])
        full, fast = loads(cut)
        assert_same(full, fast, f"when truncated at byte {k}")
        used += fast.skipped is not None
    assert used > 500  # every prefix holding the edit's complete replace takes the fast path


@pytest.fixture(scope="module")
def real_logs(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    root = tmp_path_factory.mktemp("fast-logs")
    return [
        _real_log(root, "replaced", exchanges=5, replace_at=2),
        _real_log(root, "late-replace", exchanges=3, replace_at=2),
    ]


@pytest.fixture(scope="module")
def one_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One log path, overwritten by every example."""
    return tmp_path_factory.mktemp("fast-probe") / "conversation.jsonl"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_logs_load_the_same_fast(real_logs, one_log, data) -> None:
    base = data.draw(st.sampled_from(real_logs))
    one_log.write_bytes(data.draw(damage(base)))
    full, fast = loads(one_log)
    assert_same(full, fast)


# --- a large log: bounded reads ----------------------------------------------------------------------

# The logs below are a few MB (quick to write); the threshold is lowered to match.
SMALL_SKIP = 1 << 20


@pytest.fixture
def small_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loader_module, "FAST_MIN_SKIP", SMALL_SKIP)


def big_log(workspace: Path, *, mb: int = 6, after: int = 30, torn_last: bool = False) -> Path:
    """A log of ``mb`` MB of exchanges, then a compact replace and ``after`` more messages."""
    folder = new_session_dir(workspace)
    conversation = Conversation()
    filler = "x" * 3_000
    with SessionWriter(folder, model="big-model", fsync=False) as writer:
        writer.attach(conversation)
        conversation.add_user("the big task")
        i = 0
        while (folder / "conversation.jsonl").stat().st_size < mb << 20:
            call = ToolCall(id=f"c{i}", name="read_file", arguments={"path": f"f{i}.py"})
            conversation.add_assistant_tool_calls("reading", [call])
            conversation.add_tool_result(call.id, f"{i} {filler}")
            writer.record(
                UsageEntry.new(
                    Usage(input_tokens=i, output_tokens=1), messages=len(conversation), model="big-model"
                )
            )
            i += 1
        writer.record(CompactEntry.new(trigger="auto", before_tokens=9, after_tokens=1, ok=False, error="x"))
        tail = conversation.messages()[-4:]
        conversation.replace("compact", [Message(role="user", content="<summary>all of it</summary>"), *tail])
        writer.record(CompactEntry.new(trigger="auto", before_tokens=9, after_tokens=1, ok=True, error=None))
        for k in range(after):
            conversation.add_user(f"more {k}")
        writer.record(
            UsageEntry.new(
                Usage(input_tokens=5, output_tokens=1), messages=len(conversation), model="big-model"
            )
        )
    log = folder / "conversation.jsonl"
    if torn_last:
        # A second replace whose snapshot a crash cut off: the first one stands.
        with open(log, "ab") as f:
            f.write(entries.encode(entries.ReplaceEntry.new("compact", "torn", 3).raw))
            f.write(
                entries.encode(entries.message_entry(Message(role="user", content="half"), replace_id="torn"))
            )
    return log


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return big_log(tmp_path_factory.mktemp("big"))


def test_resume_of_a_large_log_reads_a_bounded_part(big, small_skip):
    size = big.stat().st_size
    fast = load_session(big)
    full = load_session(big, full=True)
    assert fast.partial and fast.skipped is not None
    # The first backward chunk, the look-back and the head: a few hundred KB of 6 MB.
    bound = fast_load.FIRST_CHUNK + fast_load.LOOKBACK + fast_load.HEAD_CHUNK
    assert fast.bytes_read <= bound < size // 3
    assert full.bytes_read == size
    assert_same(full, fast)
    for name in ("title", "first_model", "first_ts", "last_model"):
        assert getattr(fast, name) == getattr(full, name), name
    assert [m.content for m in fast.messages[:1]] == ["<summary>all of it</summary>"]
    assert fast.title == "the big task" and fast.first_model == "big-model"
    assert fast.usage_anchor == (6, len(fast.messages))
    # What the look-back saw: the failed attempt and the success that led to the replace.
    assert [c.ok for c in fast.compacts] == [False, True]
    # Counts describe the part read; the full replay counts the whole log.
    assert fast.physical_messages < full.physical_messages
    assert full.replaces == 1 and fast.replaces == 1


def test_the_region_grows_with_the_effective_state_not_the_log(tmp_path, small_skip):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    small = big_log(tmp_path / "a", mb=5, after=10)
    large = big_log(tmp_path / "b", mb=10, after=10)
    a, b = load_session(small), load_session(large)
    assert a.partial and b.partial
    assert abs(a.bytes_read - b.bytes_read) < 64 << 10


def test_a_torn_last_replace_falls_back_to_the_one_before(tmp_path, small_skip):
    log = big_log(tmp_path, torn_last=True)
    fast, full = load_session(log), load_session(log, full=True)
    assert fast.partial and fast.torn_replace and full.torn_replace
    assert_same(full, fast)


def test_a_bad_line_after_the_replace_means_a_full_replay(tmp_path, small_skip):
    log = big_log(tmp_path)
    with open(log, "ab") as f:
        f.write(b"{not json\n")
        f.write(entries.encode(entries.NoteEntry.new("after the damage").raw))
    fast = load_session(log)
    lines = log.read_bytes().split(b"\n")
    assert not fast.partial and fast.bytes_read == log.stat().st_size
    assert fast.bad_lines == [len(lines) - 2]  # its true number
    assert fast.problems()[0].startswith("recovery incomplete")


def test_damage_before_the_replace_is_only_seen_by_a_full_load(tmp_path, small_skip):
    log = big_log(tmp_path)
    data = bytearray(log.read_bytes())
    middle = data.index(b"\n", len(data) // 2) + 1
    data[middle : middle + 1] = b"\xff"  # the line after the middle is unreadable now
    log.write_bytes(bytes(data))
    fast, full = load_session(log), load_session(log, full=True)
    assert fast.partial and fast.bad_lines == [] and not fast.problems()
    assert len(full.bad_lines) == 1 and full.incomplete
    assert fast.messages == full.messages


def test_a_large_log_without_any_replace_is_replayed_whole(tmp_path, small_skip):
    folder = new_session_dir(tmp_path)
    with SessionWriter(folder, fsync=False) as writer:
        conversation = Conversation()
        writer.attach(conversation)
        while (folder / "conversation.jsonl").stat().st_size < 5 << 20:
            conversation.add_user("y" * 4_000)
    loaded = load_session(folder)
    assert not loaded.partial and loaded.bytes_read == loaded.bytes
    assert len(loaded.messages) == loaded.physical_messages


def test_the_head_is_read_only_for_title_model_and_first_timestamp(big, small_skip):
    fast = load_session(big)
    head_end, look_start = fast.skipped
    assert head_end <= fast_load.HEAD_CHUNK
    first = orjson.loads(big.read_bytes().split(b"\n", 1)[0])
    assert fast.first_ts == first["ts"]
    assert look_start > head_end


# --- the replay's cheap validity check ------------------------------------------------------------------

_ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
_CALL = st.one_of(
    _ANY,
    st.fixed_dictionaries(
        {"id": st.one_of(st.text(max_size=4), _ANY), "name": st.one_of(st.text(max_size=4), _ANY)},
        optional={
            "arguments": st.one_of(st.dictionaries(st.text(max_size=3), _ANY, max_size=2), _ANY),
            "x": _ANY,
        },
    ),
)
_RESULT = st.one_of(
    _ANY,
    st.fixed_dictionaries(
        {"call_id": st.one_of(st.text(max_size=4), _ANY), "content": st.one_of(st.text(max_size=8), _ANY)},
        optional={"is_error": _ANY},
    ),
)
_ENTRY = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(st.text(max_size=6), _ANY),
        "role": st.one_of(st.sampled_from(["user", "assistant", "system"]), _ANY),
        "content": st.one_of(st.text(max_size=8), _ANY),
        "ts": st.one_of(st.floats(allow_nan=False), st.integers(-(2**40), 2**40), _ANY),
        "tool_calls": st.one_of(st.lists(_CALL, max_size=2), _ANY),
        "tool_result": _RESULT,
        "replace_id": _ANY,
        "model": _ANY,
    },
)


@settings(max_examples=400, deadline=None)
@given(_ENTRY)
def test_an_entry_the_replay_takes_as_plainly_valid_is_a_valid_message(entry) -> None:
    """The replay defers validation for such entries: pydantic must accept them as they are."""
    entry = {"v": 1, "type": "message", **entry}
    parsed = parse_entry(entry)
    if isinstance(parsed, MessageEntry) and parsed.parsed is None:  # taken as plainly valid
        message = Message.model_validate(entry)
        assert message == valid_message(entry) == parsed.message


def test_a_sidecar_is_never_written_from_a_partial_load(big, tmp_path, small_skip):
    from pseudoclaude_nb.session.catalog import write_meta

    fast = load_session(big)
    assert fast.partial
    meta = write_meta(big.parent, fast)
    assert meta["physical_messages"] == load_session(big, full=True).physical_messages


def test_a_first_line_longer_than_the_head_scan_still_gives_the_title(tmp_path: Path) -> None:
    # Found by the damaged-log property in CI: the head scan stops at a line over its 1 MiB
    # limit; when that line lies in what the backward read holds, the fast load must read
    # the title from it, as the full replay does (not the region's first message).
    log = tmp_path / "conversation.jsonl"
    first = entries.message_entry(Message(role="user", content="the real task " + "x" * (1_200_000)))
    rid = "r" * 32
    snapshot = entries.message_entry(Message(role="user", content="(edited)"), replace_id=rid)
    # 2 MB after the replace, so the backward read that finds it reaches the start of the file.
    later = b"".join(
        entries.encode(entries.message_entry(Message(role="assistant", content=f"{i} " + "y" * 50_000)))
        for i in range(40)
    )
    log.write_bytes(
        entries.encode(first)
        + entries.encode(entries.ReplaceEntry.new("edit", rid, 1).raw)
        + entries.encode(snapshot)
        + later
    )
    full, fast = loads(log)
    assert full.title.startswith("the real task")
    assert fast.title == full.title
    assert_same(full, fast)
