"""bash: workspace cwd, exit codes, output caps, and killing the whole process group."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from pseudoclaude_nb.messages import ToolCall, ToolResult
from pseudoclaude_nb.tools import Permissions, build_tools, shell
from pseudoclaude_nb.tools.shell import OutputBuffer, _complete_prefix, _first_char_start


@pytest.fixture
def run(tmp_path: Path):
    registry = build_tools(tmp_path)

    def run(command: str, **arguments) -> ToolResult:
        call = ToolCall(id="c", name="bash", arguments={"command": command, **arguments})
        return registry.run(call, Permissions("auto"))

    return run


def _is_dead(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    if Path("/proc/self/stat").exists():
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        return state in ("Z", "X")  # a zombie has been killed; it only awaits reaping
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _wait_dead(pid: int, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _is_dead(pid):
            return True
        time.sleep(0.05)
    return False


def test_runs_in_the_workspace_with_merged_output(tmp_path: Path, run) -> None:
    result = run("pwd; echo out; echo err >&2")
    assert not result.is_error
    assert result.content == f"{tmp_path.resolve()}\nout\nerr"


def test_nonzero_exit_is_a_normal_result_naming_the_code(run) -> None:
    result = run("echo partial; exit 3")
    assert not result.is_error
    assert result.content == "partial\nexit code 3"
    assert run("exit 2").content == "exit code 2"


def test_empty_output(run) -> None:
    assert run("true").content == "(no output)"


def test_stdin_is_empty_so_reading_it_does_not_hang(run) -> None:
    started = time.monotonic()
    result = run("cat; read -r line || echo eof", timeout=5)
    assert result.content == "eof"
    assert time.monotonic() - started < 4


def test_timeout_kills_the_whole_process_group(tmp_path: Path, run) -> None:
    started = time.monotonic()
    result = run("echo started; sleep 30 & echo $! > bg.pid; sleep 30", timeout=1)
    elapsed = time.monotonic() - started
    assert result.is_error
    assert "timed out after 1 s" in result.content
    assert "started" in result.content
    assert elapsed < 5
    background = int((tmp_path / "bg.pid").read_text())
    assert _wait_dead(background), "the background child survived the timeout"


def test_fractional_timeout(run) -> None:
    result = run("sleep 10", timeout=0.3)
    assert result.is_error and "timed out after 0.3 s" in result.content


def test_timeout_out_of_range_is_rejected(run) -> None:
    assert run("true", timeout=0).is_error
    assert run("true", timeout=10_000).is_error


def test_background_child_holding_the_pipe_does_not_block(tmp_path: Path, run) -> None:
    started = time.monotonic()
    result = run("echo hi; sleep 20 & echo $! > bg.pid", timeout=30)
    elapsed = time.monotonic() - started
    background = int((tmp_path / "bg.pid").read_text())
    try:
        assert elapsed < 5
        assert not result.is_error
        assert result.content.startswith("hi\n")
        assert "background processes" in result.content
        assert _wait_dead(background), "the background child outlived the call"
    finally:
        try:
            os.kill(background, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.skipif(
    signal.getsignal(signal.SIGINT) is not signal.default_int_handler,
    reason="needs Python's default SIGINT handler",
)
def test_keyboard_interrupt_kills_the_group_and_propagates(tmp_path: Path, run) -> None:
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run("sleep 30 & echo $! > bg.pid; wait", timeout=20)
    finally:
        timer.cancel()
    background = int((tmp_path / "bg.pid").read_text())
    assert _wait_dead(background), "the child survived the interrupt"


@pytest.fixture
def small_cap(monkeypatch):
    """The old 30,000-byte cap, so the head/tail rule is cheap to exercise."""
    monkeypatch.setattr(shell, "HEAD_BYTES", 15_000)
    monkeypatch.setattr(shell, "TAIL_BYTES", 15_000)
    monkeypatch.setattr(shell, "REDACT_MARGIN", 0)


def _split(content: str) -> tuple[str, int, str]:
    head, rest = content.split("\n[… ", 1)
    omitted = int(rest.split(" bytes omitted")[0].replace(",", ""))
    return head, omitted, rest.split("…]\n", 1)[1]


def test_large_output_keeps_head_and_tail(run, small_cap) -> None:
    result = run("printf 'HEAD-'; head -c 100000 /dev/zero | tr '\\0' x; printf -- '-TAIL'")
    assert not result.is_error
    content = result.content
    assert content.startswith("HEAD-xxx")
    assert content.endswith("xxx-TAIL")
    head, omitted, tail = _split(content)
    assert omitted == 70_010
    assert len(head.encode()) == 15_000 and len(tail.encode()) == 15_000


def test_large_output_is_cut_at_character_boundaries(run, small_cap) -> None:
    # 'a' shifts the 3-byte '€' so both cut points fall inside a character.
    result = run("printf a; yes '€€€€€€€€€€' | head -c 60000")
    assert "\ufffd" not in result.content
    head, omitted, tail = _split(result.content)
    kept = len(head.encode()) + len(tail.encode())
    assert kept + omitted <= 60_001 and omitted >= 30_001
    assert kept <= 30_000


def test_output_at_exactly_the_cap_is_kept_whole(run, small_cap) -> None:
    result = run("head -c 30000 /dev/zero | tr '\\0' y")
    assert result.content == "y" * 30_000


def test_output_under_the_20_mib_cap_is_kept_whole(run) -> None:
    result = run("head -c 120000 /dev/zero | tr '\\0' y; echo; echo END")
    assert result.content == "y" * 120_000 + "\nEND"


# --- the buffer itself -----------------------------------------------------------------


def test_output_buffer_with_chunked_feed() -> None:
    data = ("a" + "€" * 100).encode()
    buf = OutputBuffer(head=10, tail=10, margin=0)
    for i in range(0, len(data), 7):
        buf.feed(data[i : i + 7])
    text = buf.text()
    assert buf.total == len(data)
    assert "\ufffd" not in text
    head, rest = text.split("\n[… ")
    assert head == "a€€€"  # 10 bytes would cut the fourth '€'
    assert rest.endswith("…]\n€€€")  # the last 10 bytes start mid-character


def test_utf8_boundary_helpers() -> None:
    euro = "€".encode()
    assert _complete_prefix(b"ab" + euro[:2]) == 2
    assert _complete_prefix(b"ab" + euro) == 5
    assert _complete_prefix(b"abc") == 3
    assert _first_char_start(euro[1:] + b"z") == 2
    assert _first_char_start(b"z") == 0


def test_command_that_closes_its_output_still_times_out(run) -> None:
    started = time.monotonic()
    result = run("exec >&- 2>&-; sleep 30", timeout=1)
    assert result.is_error and "timed out after 1 s" in result.content
    assert "(no output)" in result.content
    assert time.monotonic() - started < 5


def test_killed_by_a_signal_is_named(run) -> None:
    result = run("kill -TERM $$")
    assert not result.is_error
    assert result.content == "exit code -15 (killed by SIGTERM)"
