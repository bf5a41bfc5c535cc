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


def fill(ip, disk, leave: int) -> None:
    """Fill the disk once the history index (same disk, written in the background) is idle."""
    current_agent(ip).history.flush()
    disk.fill(leave)


def log_bytes(session_dir: Path) -> bytes:
    return (session_dir / "conversation.jsonl").read_bytes()


@pytest.mark.parametrize("leave", [4 << 10, 16 << 10, 64 << 10], ids=["4K", "16K", "64K"])
@pytest.mark.script_may_remain  # "never": the failed spill stops the run
def test_a_full_disk_during_a_spill_never_logs_the_raw_body_and_converges(
    small_disk,
    ip,
    workspace: Path,
    tmp_path: Path,
    leave: int,
) -> None:
    disk = small_disk
    big = "".join(f"line {i:05d} " + "x" * 90 + "\n" for i in range(1_100))  # ~118 KB
    (workspace / "big.txt").write_text(big, encoding="utf-8")
    hello = write(tmp_path / "hello.json", script(turn("hi")))
    run(ip, f"agent --provider scripted --script {hello} hello")
    session = current_agent(ip).session
    reading = write(
        tmp_path / "read.json",
        script(
            turn("reading", ("read_file", {"path": "big.txt", "limit": 5_000}, "call_big")), turn("never")
        ),
    )

    fill(ip, disk, leave)
    assert disk.is_full_for(len(big))
    out = run(ip, f"agent --provider scripted --script {reading} --mode auto read big.txt")

    assert "error: could not spill" in out and "No space left on device" in out and "held in memory" in out
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
    assert session.context.shared.ledger.decision("call_big") == "spilled"
    assert not [p for p in (session.dir / "tool-results").iterdir() if p.name.endswith(".tmp")]


@pytest.mark.script_may_remain  # "never": the failed spill stops the run
def test_while_the_disk_stays_full_the_run_goes_on_with_the_stand_in_and_says_so(
    small_disk,
    ip,
    workspace: Path,
    tmp_path: Path,
) -> None:
    disk = small_disk
    (workspace / "big.txt").write_text("".join(f"row {i:05d} " + "y" * 90 + "\n" for i in range(1_100)))
    reading = write(
        tmp_path / "read.json",
        script(
            turn("reading", ("read_file", {"path": "big.txt", "limit": 5_000}, "call_big")), turn("never")
        ),
    )
    hello = write(tmp_path / "hello.json", script(turn("hi")))
    run(ip, f"agent --provider scripted --script {hello} hello")
    session = current_agent(ip).session
    fill(ip, disk, 64 << 10)  # room for log lines, not for the 118 KB spill file
    assert "No space left on device" in run(
        ip, f"agent --provider scripted --script {reading} --mode auto read"
    )

    still = write(tmp_path / "still.json", script(turn("fine")))
    out = run(ip, f"agent --provider scripted --script {still} still full?")
    assert "still wait in memory for disk space" in out
    assert "could not be saved to a file" in result_of(session.conversation.messages(), "call_big").content
    # The run went on with the stand-in; the history index (same disk, written in the
    # background) may have taken the last blocks meanwhile, and then the log says so.
    if "error:" in out:
        assert "could not write session log" in out and "No space left on device" in out
    else:
        assert load_session(session.dir).messages == session.conversation.messages()

    disk.free()
    done = write(tmp_path / "done.json", script(turn("done")))
    assert "error:" not in run(ip, f"agent --provider scripted --script {done} now")
    assert result_of(session.conversation.messages(), "call_big").spilled
    assert load_session(session.dir).messages == session.conversation.messages()
    assert b"row 01099" not in log_bytes(session.dir)


# --- Layer 2 -------------------------------------------------------------------------------------

WINDOW = 20_000  # with the reserves below: Layer 2 at 18,000 tokens
SUMMARY = "## Confirmed requirements\n" + "".join(
    f"- point {i:04d} of the summary, kept\n" for i in range(400)
)


def _long_session(ip, tmp_path: Path, summaries: tuple[str, ...] = ()) -> None:
    for name, value in (("summary_reserve", 1_000), ("safety_margin", 1_000), ("recent_tokens", 200)):
        ip.run_line_magic("config", f"PseudoClaude.{name} = {value}")
    first = write(
        tmp_path / "first.json",
        script(turn("long answer: " + "a " * 45_000), context_window=WINDOW, summaries=list(summaries)),
    )
    run(ip, f"agent --provider scripted --script {first} tell me everything")


@pytest.mark.script_may_remain  # "never": the failed replace stops the run
def test_a_full_disk_during_the_compaction_replace_changes_nothing_and_the_next_run_compacts(
    small_disk,
    ip,
    workspace: Path,
    tmp_path: Path,
) -> None:
    disk = small_disk
    _long_session(ip, tmp_path)
    session = current_agent(ip).session
    context = session.context
    before = session.conversation.messages()
    anchor, ratio = context.shared.anchor, context.shared.calibration.ratio
    assert context.shared.estimate() >= context.shared.settings.threshold  # the next run compacts first
    assert len(SUMMARY) > 12_000  # its replace needs more than the room left

    second = write(
        tmp_path / "second.json", script(turn("never"), context_window=WINDOW, summaries=[SUMMARY])
    )
    fill(ip, disk, 4 << 10)  # room for the prompt's line, not for the replace
    out = run(ip, f"agent --provider scripted --script {second} and now?")

    assert "error: the compaction was not applied" in out and "No space left on device" in out
    assert "not compacted" in out
    memory = session.conversation.messages()
    assert memory[: len(before)] == before and memory[-1].content == "and now?"  # the old state
    assert (
        context.shared.compactions == 0
        and context.shared.breaker.failures == 0
        and not context.shared.breaker.open
    )
    assert context.shared.anchor == anchor and context.shared.calibration.ratio == ratio
    loaded = load_session(session.dir)
    assert loaded.messages == memory and loaded.compacts == []  # no entry a restore would count

    disk.free()
    third = write(tmp_path / "third.json", script(turn("done"), context_window=WINDOW, summaries=[SUMMARY]))
    out = run(ip, f"agent --provider scripted --script {third} go on")

    assert "error:" not in out, out
    memory = session.conversation.messages()
    assert memory[0].content.startswith("<summary>") and "point 0399" in memory[0].content
    assert context.shared.compactions == 1 and context.shared.breaker.failures == 0
    loaded = load_session(session.dir)
    assert loaded.messages == memory and loaded.bad_lines == []
    assert [(c.trigger, c.ok) for c in loaded.compacts] == [("auto", True)]


def test_percent_compact_on_a_full_disk_says_so_and_counts_nothing(
    small_disk,
    ip,
    workspace: Path,
    tmp_path: Path,
) -> None:
    from IPython.core.error import UsageError

    disk = small_disk
    _long_session(ip, tmp_path)
    # A short exchange in a wide window (no automatic compaction); %compact asks this run's provider.
    short = write(tmp_path / "short.json", script(turn("ok"), summaries=[SUMMARY, SUMMARY]))
    run(ip, f"agent --provider scripted --script {short} thanks")
    session = current_agent(ip).session
    before = session.conversation.messages()
    fill(ip, disk, 0)
    with pytest.raises(UsageError, match="the compaction was not applied.*No space left on device"):
        ip.run_line_magic("compact", "")
    assert session.conversation.messages() == before
    assert session.context.shared.breaker.failures == 0 and session.context.shared.compactions == 0
    disk.free()
    assert "compacted: ~" in run(ip, "compact")
    assert load_session(session.dir).messages == session.conversation.messages()


def test_a_full_disk_during_the_rollover_replace_keeps_the_window_and_the_handoff(
    small_disk,
    ip,
    workspace: Path,
    tmp_path: Path,
) -> None:
    disk = small_disk
    (workspace / "budget.py").write_text("def evaluate_budget(state):\n    return 'continue'\n")
    handoff = {
        "confirmed_requirements": [{"text": "the reminder is sent once", "source": "user"}],
        "agent_inferences": ["the off-by-one is in remaining <= threshold"],
    }
    related = [{"path": "budget.py", "role": "implementation"}]
    call = ("new_context", {"handoff": handoff, "related_files": related}, "nc")
    first = write(tmp_path / "first.json", script(turn("handing over", call)))
    # The original request is pinned into the next window verbatim: its replace outgrows the room left.
    request = "Fix the budget rule in budget.py. " + "Keep evaluate_budget(state) pure. " * 400
    options = "--mode auto --strategy rollover --max-steps 1"
    run(ip, f"agent --provider scripted --script {first} {options} {request}")
    session = current_agent(ip).session
    strategy = session.context.strategy
    assert strategy.name == "rollover" and session.context.shared.handoff is not None
    before = session.conversation.messages()

    second = write(tmp_path / "second.json", script(turn("never")))
    fill(ip, disk, 4 << 10)
    out = run(ip, f"agent --provider scripted --script {second} --strategy rollover please go on")

    assert "error: the rollover was not applied" in out and "No space left on device" in out
    memory = session.conversation.messages()
    assert memory[: len(before)] == before and memory[-1].content == "please go on"
    assert session.context.shared.handoff is not None and session.context.shared.rollovers == 0
    loaded = load_session(session.dir)
    assert loaded.messages == memory and [e.phase for e in loaded.rollovers] == ["intent"]

    disk.free()
    third = write(tmp_path / "third.json", script(turn("Continuing.")))
    out = run(ip, f"agent --provider scripted --script {third} --strategy rollover go on")
    assert "error:" not in out, out
    memory = session.conversation.messages()
    assert (
        "<original_request>" in memory[0].content and "Keep evaluate_budget(state) pure." in memory[0].content
    )
    assert session.context.shared.rollovers == 1
    loaded = load_session(session.dir)
    assert loaded.messages == memory and [e.phase for e in loaded.rollovers] == ["intent", "commit"]
