"""A full disk during Layer 1 and Layer 2, through ``%agent`` in a real IPython shell.

On the CI machine the workspace is a real tmpfs filled by a filler file (``disk_support``):
the spill file, the log and the sidecar meet the kernel's own ENOSPC. The log must never
hold a raw body over ``spill_bytes``, memory must equal what the log loads as, the user is
told, and once space returns the next run converges.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.messages import pairing_problems
from pseudoclaude_nb.session import load_session
from tests.disk_support import small_disk  # noqa: F401 - a fixture
from tests.scripts import run_magic as run
from tests.scripts import script, turn


def write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def result_of(messages, call_id: str):
    return next(m.tool_result for m in messages if m.tool_result and m.tool_result.call_id == call_id)


def log_bytes(session_dir: Path) -> bytes:
    return (session_dir / "conversation.jsonl").read_bytes()


@pytest.mark.parametrize("leave", [4 << 10, 16 << 10, 64 << 10], ids=["4K", "16K", "64K"])
def test_a_full_disk_during_a_spill_never_logs_the_raw_body_and_converges(
    small_disk, ip, workspace: Path, tmp_path: Path, leave: int  # noqa: F811
) -> None:
    disk = small_disk
    big = "".join(f"line {i:05d} " + "x" * 90 + "\n" for i in range(1_100))  # ~118 KB
    (workspace / "big.txt").write_text(big, encoding="utf-8")
    hello = write(tmp_path / "hello.json", script(turn("hi")))
    run(ip, f"agent --provider scripted --script {hello} hello")
    session = current_agent(ip).session
    reading = write(
        tmp_path / "read.json",
        script(turn("reading", ("read_file", {"path": "big.txt", "limit": 5_000}, "call_big")), turn("never")),
    )

    disk.fill(leave)
    assert disk.is_full_for(len(big))
    out = run(ip, f"agent --provider scripted --script {reading} --mode auto read big.txt")

    assert "error:" in out and "No space left on device" in out
    memory = session.conversation.messages()
    assert pairing_problems(memory) == []
    tail = b"line 01099"  # the body's last line: only a spill file may hold it
    assert tail not in log_bytes(session.dir)
    stand_in = result_of(memory, "call_big")
    assert stand_in.spilled is None and "could not be saved to a file" in stand_in.content
    assert len(stand_in.content.encode("utf-8")) < 3_000
    if session.writer.failed is None:  # the log took the stand-in: memory equals the log
        assert load_session(session.dir).messages == memory

    disk.free()
    going_on = write(tmp_path / "on.json", script(turn("done")))
    out = run(ip, f"agent --provider scripted --script {going_on} go on")

    assert "error:" not in out, out
    assert session.writer.failed is None
    memory = session.conversation.messages()
    loaded = load_session(session.dir)
    assert loaded.messages == memory and loaded.bad_lines == [] and pairing_problems(memory) == []
    preview = result_of(memory, "call_big")
    assert preview.spilled and preview.content.startswith("[Tool result too large for the context: ")
    body = (session.dir / preview.spilled).read_text(encoding="utf-8")
    assert body.rstrip("\n").endswith("line 01099 " + "x" * 90) and len(body) > len(big)  # numbered
    assert tail not in log_bytes(session.dir)
    assert session.context.ledger.decision("call_big") == "spilled"
    assert not [p for p in (session.dir / "tool-results").iterdir() if p.name.endswith(".tmp")]


def test_while_the_disk_stays_full_the_run_goes_on_with_the_stand_in_and_says_so(
    small_disk, ip, workspace: Path, tmp_path: Path  # noqa: F811
) -> None:
    disk = small_disk
    (workspace / "big.txt").write_text("".join(f"row {i:05d} " + "y" * 90 + "\n" for i in range(1_100)))
    reading = write(
        tmp_path / "read.json",
        script(turn("reading", ("read_file", {"path": "big.txt", "limit": 5_000}, "call_big")), turn("never")),
    )
    hello = write(tmp_path / "hello.json", script(turn("hi")))
    run(ip, f"agent --provider scripted --script {hello} hello")
    session = current_agent(ip).session
    disk.fill(64 << 10)  # room for log lines, not for the 118 KB spill file
    assert "No space left on device" in run(ip, f"agent --provider scripted --script {reading} --mode auto read")

    still = write(tmp_path / "still.json", script(turn("fine")))
    out = run(ip, f"agent --provider scripted --script {still} still full?")
    assert "error:" not in out and "still wait in memory for disk space" in out
    assert "could not be saved to a file" in result_of(session.conversation.messages(), "call_big").content
    assert load_session(session.dir).messages == session.conversation.messages()

    disk.free()
    done = write(tmp_path / "done.json", script(turn("done")))
    assert "error:" not in run(ip, f"agent --provider scripted --script {done} now")
    assert result_of(session.conversation.messages(), "call_big").spilled
    assert load_session(session.dir).messages == session.conversation.messages()
    assert b"row 01099" not in log_bytes(session.dir)
