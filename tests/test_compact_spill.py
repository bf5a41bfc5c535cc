"""Layer 1 (SPEC §8.1, §15, §16): spill large tool results to files, leave a preview.

The pure parts (file names, the spill file, the preview, the batch choice) are tested
directly; the rules that depend on the order of things (a ``spill`` entry before the
result's message, the preview in the *next request*, the batch snapshot, the failure
semantics) are tested through ``Agent`` with the real ``ScriptedProvider`` and real tools.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
from pathlib import Path

import pytest

from pseudoclaude_nb.context import spill as spill_module
from pseudoclaude_nb.context.spill import (
    PREVIEW_BYTES,
    Ledger,
    batch_to_spill,
    head_at_boundary,
    latest_batch,
    preview,
    safe_name,
    write_spill,
)
from pseudoclaude_nb.events import Spilled
from pseudoclaude_nb.messages import Message, ToolCall, ToolResult, pairing_problems
from pseudoclaude_nb.session import load_session
from pseudoclaude_nb.tools import Permissions, build_tools
from tests.scripts import read_log as log_entries
from tests.scripts import scripted_agent as make_agent
from tests.scripts import turn, write_script

MARKER = "[… preview ends here …]"
LINE_LIMIT = 64 * 1024


# --- helpers ----------------------------------------------------------------------------------


def log_line_sizes(session_dir: Path) -> list[int]:
    return [len(line) for line in (session_dir / "conversation.jsonl").read_bytes().split(b"\n")]


def text_file(workspace: Path, name: str, lines: int, width: int = 99, char: str = "y") -> Path:
    path = workspace / name
    path.write_text((char * width + "\n") * lines, encoding="utf-8")
    return path


def tool_output(workspace: Path, name: str, arguments: dict) -> str:
    """What the real tool returns for these arguments (the text a spill must keep)."""
    call = ToolCall(id="probe", name=name, arguments=arguments)
    result = build_tools(workspace).run(call, Permissions("auto"))
    assert not result.is_error, result.content
    return result.content


def result_message(messages: list[Message], call_id: str) -> Message:
    found = [m for m in messages if m.tool_result is not None and m.tool_result.call_id == call_id]
    assert len(found) == 1, f"{call_id}: {len(found)} results"
    return found[0]


def result_bytes(messages: list[Message]) -> int:
    return sum(len(m.tool_result.content.encode("utf-8")) for m in messages if m.tool_result is not None)


def same_messages(a: list[Message], b: list[Message]) -> bool:
    return [m.to_dict() for m in a] == [m.to_dict() for m in b]


# --- safe_name ------------------------------------------------------------------------------------------

ODD_IDS = [
    "toolu_01ABCdef",
    "call_abc-123",
    "a/b",
    "a_b",
    "a.b",
    "a:b",
    "../../etc/passwd",
    "..",
    ".",
    "/absolute/path",
    "C:\\windows\\id",
    "idé",
    "id_",
    "日本語",
    "🙂",
    "x" * 200,
    "x" * 199 + "y",
    "with space",
    "nul\x00byte",
]


@pytest.mark.parametrize("call_id", ODD_IDS)
def test_safe_name_stays_inside_tool_results(tmp_path: Path, call_id: str):
    name = safe_name(call_id)
    assert re.fullmatch(r"[A-Za-z0-9_-]+", name), name
    assert len(name) <= 100
    folder = tmp_path / "tool-results"
    assert (folder / f"{name}.txt").resolve().parent == folder.resolve()


def test_safe_name_keeps_plain_ids_readable():
    assert safe_name("toolu_01ABCdef") == "toolu_01ABCdef"
    assert safe_name("call_abc-123") == "call_abc-123"


def test_distinct_ids_give_distinct_names():
    names = [safe_name(i) for i in ODD_IDS]
    assert len(set(names)) == len(ODD_IDS)


def test_spill_files_of_odd_ids_land_in_tool_results(tmp_path: Path):
    for i, call_id in enumerate(ODD_IDS):
        spill = write_spill(tmp_path, call_id, "bash", f"text {i}")
        assert spill.path.startswith("tool-results/")
        assert (tmp_path / spill.path).read_text(encoding="utf-8") == f"text {i}"
    files = list((tmp_path / "tool-results").iterdir())
    assert len(files) == len(ODD_IDS)  # nothing overwrote anything else
    assert not (tmp_path.parent / "etc").exists()
    assert sorted(p.parent for p in tmp_path.rglob("*.txt")) == [tmp_path / "tool-results"] * len(ODD_IDS)


# --- write_spill ----------------------------------------------------------------------------------------


def test_write_spill_writes_the_full_text_with_size_and_hash(tmp_path: Path):
    text = "línea ünïcode 漢字\n" * 5_000
    spill = write_spill(tmp_path, "call_1", "read_file", text)
    data = text.encode("utf-8")
    assert spill.call_id == "call_1" and spill.tool == "read_file"
    assert spill.path == "tool-results/call_1.txt"
    assert spill.bytes == len(data)
    assert spill.sha256 == hashlib.sha256(data).hexdigest()
    assert (tmp_path / spill.path).read_bytes() == data
    assert spill.entry_fields() == {
        "call_id": "call_1",
        "tool": "read_file",
        "path": "tool-results/call_1.txt",
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def test_write_spill_reuses_an_identical_file(tmp_path: Path):
    first = write_spill(tmp_path, "call_1", "bash", "same text")
    path = tmp_path / first.path
    os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))  # a known old mtime
    again = write_spill(tmp_path, "call_1", "bash", "same text")
    assert again == first
    assert path.stat().st_mtime_ns == 1_000_000_000_000_000_000  # not rewritten


def test_write_spill_rewrites_a_different_file(tmp_path: Path):
    first = write_spill(tmp_path, "call_1", "bash", "old text")
    path = tmp_path / first.path
    os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    second = write_spill(tmp_path, "call_1", "bash", "new and longer text")
    assert second.path == first.path
    assert path.read_text(encoding="utf-8") == "new and longer text"
    assert second.sha256 == hashlib.sha256(b"new and longer text").hexdigest() != first.sha256
    assert path.stat().st_mtime_ns != 1_000_000_000_000_000_000


def test_write_spill_is_atomic_when_the_write_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    first = write_spill(tmp_path, "call_1", "bash", "the old complete text")
    path = tmp_path / first.path

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError) as info:
        write_spill(tmp_path, "call_1", "bash", "a new text that never fully lands")
    monkeypatch.undo()
    assert info.value.errno == errno.ENOSPC
    # The old file is whole, and no temporary file is left behind for a later run to find.
    assert path.read_text(encoding="utf-8") == "the old complete text"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_write_spill_failure_on_a_new_file_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)
    with pytest.raises(OSError):
        write_spill(tmp_path, "call_2", "bash", "text")
    monkeypatch.undo()
    assert list((tmp_path / "tool-results").iterdir()) == []


# --- head_at_boundary -----------------------------------------------------------------------------------


def test_short_text_is_its_own_head():
    assert head_at_boundary("short\ntext") == "short\ntext"
    exact = "a" * PREVIEW_BYTES
    assert head_at_boundary(exact) == exact


@pytest.mark.parametrize("char", ["é", "漢", "🙂"])
@pytest.mark.parametrize("before", range(PREVIEW_BYTES - 5, PREVIEW_BYTES + 1))
def test_head_never_splits_a_character(char: str, before: int):
    # ASCII up to `before` bytes, then multibyte characters across the 2,000-byte cut.
    text = "a" * before + char * 10
    head = head_at_boundary(text)
    data = head.encode("utf-8")
    assert len(data) <= PREVIEW_BYTES
    assert text.startswith(head)
    assert "\ufffd" not in head
    # The cut loses less than one character: it is at the last boundary before the limit.
    assert len(data) > PREVIEW_BYTES - len(char.encode("utf-8"))


def test_head_of_pure_multibyte_text_is_whole_characters():
    text = "漢字" * 2_000  # 3 bytes each; 2,000 is not a multiple of 3
    head = head_at_boundary(text)
    assert head == "漢字" * 333  # 1,998 bytes: 666 whole characters
    assert len(head.encode("utf-8")) == 1_998


def test_head_prefers_a_line_end():
    text = "abcdef\n" * 1_000  # 7-byte lines: 285 whole lines fit in 2,000 bytes
    assert head_at_boundary(text) == "abcdef\n" * 285


def test_head_prefers_a_line_end_with_multibyte_lines():
    text = "漢字漢字\n" * 500  # 13-byte lines
    head = head_at_boundary(text)
    assert head == "漢字漢字\n" * (PREVIEW_BYTES // 13)
    assert head.endswith("\n")


def test_head_ignores_a_line_end_too_far_back():
    # A single early newline: cutting there would throw away almost the whole preview.
    text = "x\n" + "y" * 10_000
    head = head_at_boundary(text)
    assert head == "x\n" + "y" * (PREVIEW_BYTES - 2)


# --- preview ------------------------------------------------------------------------------------------


def test_preview_says_size_path_and_how_to_read_more():
    text = "".join(f"line {i:06d} of the output\n" for i in range(5_000))
    size = len(text.encode("utf-8"))
    shown = ".pseudoclaude/sessions/20260101-000000-abcd/tool-results/call_1.txt"
    out = preview(text, shown)
    assert f"{size:,} bytes" in out
    assert shown in out
    assert "read_file" in out and "offset" in out and "limit" in out
    assert "grep" in out
    assert head_at_boundary(text) in out
    assert out.startswith("[Tool result too large")
    assert out.endswith(MARKER)
    assert len(out.encode("utf-8")) < PREVIEW_BYTES + 1_000


def test_preview_of_text_without_final_newline_still_ends_with_the_marker():
    out = preview("z" * 60_000, "tool-results/c.txt")
    assert out.endswith("\n" + MARKER)
    assert "z" * PREVIEW_BYTES in out
    assert "z" * (PREVIEW_BYTES + 1) not in out


# --- batch_to_spill and the ledger ---------------------------------------------------------------------


def results(*sizes: int) -> list[Message]:
    return [
        Message(role="user", tool_result=ToolResult(call_id=f"c{i}", content="r" * size))
        for i, size in enumerate(sizes)
    ]


def test_batch_under_the_limit_spills_nothing():
    assert batch_to_spill(results(40_000, 40_000, 40_000), Ledger(), 200_000) == []


def test_batch_spills_the_largest_first_until_the_rest_fits():
    batch = results(10_000, 90_000, 60_000, 70_000)  # 230,000 > 100,000
    chosen = batch_to_spill(batch, Ledger(), 100_000)
    assert [m.tool_result.call_id for m in chosen] == ["c1", "c3"]  # 90k, then 70k: 70k left


def test_batch_never_re_decides_a_kept_result():
    batch = results(10_000, 90_000, 60_000, 70_000)
    ledger = Ledger()
    ledger.record("c1", "kept")  # the 90k result was decided before
    chosen = batch_to_spill(batch, ledger, 100_000)
    assert [m.tool_result.call_id for m in chosen] == ["c3", "c2"]
    everything_kept = Ledger()
    for m in batch:
        everything_kept.record(m.tool_result.call_id, "kept")
    assert batch_to_spill(batch, everything_kept, 1) == []


def test_ledger_record_freezes_and_force_overrides():
    ledger = Ledger()
    assert ledger.decision("c") is None
    ledger.record("c", "kept")
    ledger.record("c", "spilled")
    assert ledger.decision("c") == "kept"
    ledger.force("c", "spilled")
    assert ledger.decision("c") == "spilled"
    ledger.record("d", "spilled")
    assert ledger.spilled == 2


def test_latest_batch_is_the_results_after_the_last_call_message():
    call = Message(role="assistant", tool_calls=(ToolCall(id="a", name="t"), ToolCall(id="b", name="t")))
    ra = Message(role="user", tool_result=ToolResult(call_id="a", content="1"))
    rb = Message(role="user", tool_result=ToolResult(call_id="b", content="2"))
    user = Message(role="user", content="hi")
    assert latest_batch([user, call, ra, rb]) == [ra, rb]
    assert latest_batch([user]) == []
    assert latest_batch([user, call, ra, rb, Message(role="assistant", content="done")]) == []


# --- single spill through the runner ----------------------------------------------------------------------


def test_a_large_result_is_spilled_when_appended(workspace: Path, agents):
    text_file(workspace, "big.txt", 1_200)  # read_file output ≈ 128 KB
    args = {"path": "big.txt", "limit": 5_000}
    expected = tool_output(workspace, "read_file", args)
    assert len(expected.encode("utf-8")) > 100_000
    path = write_script(workspace, "s", turn("reading", ("read_file", args, "call_big")), turn("done"))
    agent = make_agent(workspace, path)
    agents.append(agent)
    events: list = []
    summary = agent.run("read big.txt", listeners=[events.append])
    assert summary.status == "done", summary.error
    session = agent.session.dir

    # The log: the spill entry comes before the result's message entry, which holds the preview.
    log = log_entries(session)
    spill_at = [i for i, e in enumerate(log) if e["type"] == "spill"]
    result_at = [
        i
        for i, e in enumerate(log)
        if e["type"] == "message" and (e.get("tool_result") or {}).get("call_id") == "call_big"
    ]
    assert len(spill_at) == 1 and len(result_at) == 1
    assert spill_at[0] < result_at[0]
    spill = log[spill_at[0]]
    assert spill["call_id"] == "call_big" and spill["tool"] == "read_file"
    assert spill["path"] == "tool-results/call_big.txt"
    logged_result = log[result_at[0]]["tool_result"]["content"]
    assert logged_result.startswith("[Tool result too large")
    assert expected not in (session / "conversation.jsonl").read_text(encoding="utf-8")

    # The file holds the full text, with the logged size and hash.
    data = (session / spill["path"]).read_bytes()
    assert data.decode("utf-8") == expected
    assert spill["bytes"] == len(data)
    assert spill["sha256"] == hashlib.sha256(data).hexdigest()

    # The conversation and the next request hold the preview, which names the file
    # relative to the workspace.
    shown = str((session / spill["path"]).relative_to(workspace.resolve()))
    in_conversation = result_message(agent.session.conversation.messages(), "call_big").tool_result.content
    assert in_conversation == logged_result
    assert shown in in_conversation and f"{len(data):,} bytes" in in_conversation
    assert in_conversation.endswith(MARKER)
    requests = agent.last_provider.requests
    assert len(requests) == 2
    assert result_message(requests[1].messages, "call_big").tool_result.content == in_conversation
    assert all(len(m.tool_result.content) < 50_000 for m in requests[1].messages if m.tool_result)

    spilled = [e for e in events if isinstance(e, Spilled)]
    assert [(e.call_id, e.tool, e.path, e.bytes, e.reason) for e in spilled] == [
        ("call_big", "read_file", shown, len(data), "single")
    ]
    assert agent.session.context.shared.ledger.decision("call_big") == "spilled"
    assert same_messages(load_session(session).messages, agent.session.conversation.messages())


def test_a_result_under_spill_bytes_is_kept(workspace: Path, agents):
    text_file(workspace, "medium.txt", 400)  # read_file output ≈ 43 KB < 50,000
    args = {"path": "medium.txt"}
    expected = tool_output(workspace, "read_file", args)
    path = write_script(workspace, "s", turn("reading", ("read_file", args, "call_m")), turn("done"))
    agent = make_agent(workspace, path)
    agents.append(agent)
    assert agent.run("read it").status == "done"
    assert not any(e["type"] == "spill" for e in log_entries(agent.session.dir))
    assert result_message(agent.last_provider.requests[1].messages, "call_m").tool_result.content == expected
    assert not (agent.session.dir / "tool-results").exists()


def test_a_lowered_spill_bytes_setting_applies(workspace: Path, agents):
    text_file(workspace, "medium.txt", 100)  # ≈ 10.7 KB
    path = write_script(
        workspace, "s", turn("reading", ("read_file", {"path": "medium.txt"}, "call_m")), turn("done")
    )
    agent = make_agent(workspace, path, spill_bytes=5_000)
    agents.append(agent)
    assert agent.run("read it").status == "done"
    assert [e["call_id"] for e in log_entries(agent.session.dir) if e["type"] == "spill"] == ["call_m"]


def test_no_log_line_holds_a_5_mb_tool_output(workspace: Path, agents):
    text_file(workspace, "huge.txt", 2_600, width=1_990, char="q")  # ≈ 5.2 MB through read_file
    args = {"path": "huge.txt", "limit": 3_000}
    path = write_script(workspace, "s", turn("reading", ("read_file", args, "call_huge")), turn("done"))
    agent = make_agent(workspace, path)
    agents.append(agent)
    assert agent.run("read the huge file").status == "done"
    session = agent.session.dir
    [spill] = [e for e in log_entries(session) if e["type"] == "spill"]
    assert spill["bytes"] > 5_000_000
    assert (session / spill["path"]).stat().st_size == spill["bytes"]
    sizes = log_line_sizes(session)
    assert max(sizes) <= LINE_LIMIT, f"largest log line {max(sizes):,} bytes"
    assert (session / "conversation.jsonl").stat().st_size < 100_000
    loaded = load_session(session)
    assert pairing_problems(loaded.messages) == []
    assert same_messages(loaded.messages, agent.session.conversation.messages())


# --- the batch rule through the runner -------------------------------------------------------------------

BATCH_LINES = (380, 400, 420, 440, 460)  # read_file outputs ≈ 40.7–49.2 KB: each < 50,000, together ≈ 225 KB


def batch_files(workspace: Path) -> list[tuple[str, dict, str]]:
    calls = []
    for i, lines in enumerate(BATCH_LINES):
        text_file(workspace, f"part{i}.txt", lines)
        calls.append(("read_file", {"path": f"part{i}.txt"}, f"c{i}"))
    return calls


def test_a_batch_over_the_cap_spills_the_largest_until_the_rest_fits(workspace: Path, agents):
    calls = batch_files(workspace)
    outputs = {cid: tool_output(workspace, name, args) for name, args, cid in calls}
    sizes = {cid: len(text.encode("utf-8")) for cid, text in outputs.items()}
    assert all(size < 50_000 for size in sizes.values())
    assert sum(sizes.values()) > 200_000
    assert sum(sizes.values()) - sizes["c4"] <= 200_000  # spilling the largest is enough

    path = write_script(workspace, "s", turn("reading five files", *calls), turn("done"))
    agent = make_agent(workspace, path)
    agents.append(agent)
    events: list = []
    assert agent.run("read the parts", listeners=[events.append]).status == "done"
    session = agent.session.dir
    log = log_entries(session)

    # Spilled before the next request; the conversation replaced by a snapshot.
    spills = [e for e in log if e["type"] == "spill"]
    assert [e["call_id"] for e in spills] == ["c4"]
    assert (session / spills[0]["path"]).read_text(encoding="utf-8") == outputs["c4"]
    replaces = [e for e in log if e["type"] == "replace"]
    assert [r["reason"] for r in replaces] == ["snapshot"]
    snapshot = [e for e in log if e.get("replace_id") == replaces[0]["replace_id"] and e["type"] == "message"]
    assert len(snapshot) == replaces[0]["count"]
    assert log.index(spills[0]) < log.index(replaces[0])

    # The request the provider got fits, with c4 as a preview and the others in full.
    sent = agent.last_provider.requests[1].messages
    assert result_bytes(sent) <= 200_000
    assert result_message(sent, "c4").tool_result.content.startswith("[Tool result too large")
    for cid in ("c0", "c1", "c2", "c3"):
        assert result_message(sent, cid).tool_result.content == outputs[cid]
    assert pairing_problems(sent) == []
    assert [(e.call_id, e.reason) for e in events if isinstance(e, Spilled)] == [("c4", "batch")]

    ledger = agent.session.context.shared.ledger
    assert [ledger.decision(f"c{i}") for i in range(5)] == ["kept"] * 4 + ["spilled"]
    assert same_messages(load_session(session).messages, agent.session.conversation.messages())


def test_batch_decisions_are_frozen(workspace: Path, agents):
    calls = batch_files(workspace)
    path = write_script(workspace, "s", turn("reading five files", *calls), turn("done"))
    agent = make_agent(workspace, path)
    agents.append(agent)
    assert agent.run("read the parts").status == "done"
    before = agent.session.conversation.messages()

    # A stricter setting later does not re-decide the kept results (the manager-level
    # check is in test_compact_manage.py).
    agent.settings.spill_batch_bytes = 50_000
    path2 = write_script(workspace, "s2", turn("still fine"))
    assert agent.run("go on", script=path2).status == "done"
    assert [e["call_id"] for e in log_entries(agent.session.dir) if e["type"] == "spill"] == ["c4"]
    assert same_messages(agent.session.conversation.messages()[: len(before)], before)


def test_the_batch_cap_holds_after_a_run_stopped_at_max_steps(workspace: Path, agents):
    calls = batch_files(workspace)
    path = write_script(workspace, "s", turn("reading five files", *calls))
    agent = make_agent(workspace, path, max_steps=1)
    agents.append(agent)
    assert agent.run("read the parts").status == "max-steps"
    path2 = write_script(workspace, "s2", turn("done"))
    assert agent.run("continue", script=path2, max_steps=5).status == "done"
    sent = agent.last_provider.requests[0].messages
    assert result_bytes(sent) <= 200_000


# --- spill failure -------------------------------------------------------------------------------------------


@pytest.mark.script_may_remain  # "never reached": the failed spill stops the run
def test_a_failed_spill_keeps_a_bounded_stand_in_and_stops_the_run(
    workspace: Path, agents, monkeypatch: pytest.MonkeyPatch
):
    text_file(workspace, "big.txt", 1_000)
    args = {"path": "big.txt", "limit": 5_000}
    expected = tool_output(workspace, "read_file", args)
    path = write_script(
        workspace,
        "s",
        turn(
            "reading",
            ("read_file", args, "call_big"),
            ("read_file", {"path": "big.txt", "limit": 1}, "call_small"),
        ),
        turn("never reached"),
    )
    agent = make_agent(workspace, path)
    agents.append(agent)

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(spill_module, "write_spill", disk_full)
    summary = agent.run("read big.txt")
    assert summary.status == "error"
    message = str(summary.error)
    assert "spill" in message and "No space left on device" in message and "held in memory" in message
    assert len(agent.last_provider.requests) == 1  # stopped: no request after the failure

    # Memory and log hold the same bounded stand-in: the head and a note, never the raw body.
    messages = agent.session.conversation.messages()
    kept = result_message(messages, "call_big").tool_result.content
    assert kept.startswith("[Tool result too large for the context: ") and "could not be saved" in kept
    assert len(kept.encode("utf-8")) < 3_000 and expected[:1_000] in kept
    assert expected[-200:] not in (agent.session.dir / "conversation.jsonl").read_text(encoding="utf-8")
    small = result_message(messages, "call_small").tool_result  # closed, not run
    assert small.is_error
    assert pairing_problems(messages) == []
    loaded = load_session(agent.session.dir)
    assert pairing_problems(loaded.messages) == []
    assert same_messages(loaded.messages, messages)
    assert not any(e["type"] == "spill" for e in log_entries(agent.session.dir))

    context = agent.session.context
    assert context.shared.ledger.decision("call_big") is None  # not frozen: still to be spilled

    # Once the disk has room, %compact --layer1 writes the full text held in memory.
    monkeypatch.undo()
    assert context.spiller.spill_all() == 1
    after = agent.session.conversation.messages()
    assert result_message(after, "call_big").tool_result.content.startswith("[Tool result too large")
    assert result_message(after, "call_big").tool_result.spilled
    assert context.shared.ledger.decision("call_big") == "spilled"
    [spill] = [e for e in log_entries(agent.session.dir) if e["type"] == "spill"]
    assert (agent.session.dir / spill["path"]).read_text(encoding="utf-8") == expected
    assert same_messages(load_session(agent.session.dir).messages, after)
    assert context.spiller.spill_all() == 0  # nothing waits any more
