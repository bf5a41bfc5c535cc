"""The ``bash`` tool: one command in the workspace, bounded in time and in output size.

The command runs in its own session (process group) so a timeout or an interrupt kills
everything it started, not just bash. Output is read as it comes and only the first and last
15,000 bytes are kept, so ``yes`` with a long timeout cannot exhaust memory.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from pydantic import Field

from ..errors import ToolError
from .registry import Tool, ToolArgs

MAX_OUTPUT_BYTES = 30_000
HEAD_BYTES = TAIL_BYTES = MAX_OUTPUT_BYTES // 2
# After bash exits, a background child (`server &`) may keep the output pipe open forever;
# wait this long for the rest of the output, then return without it.
DRAIN_GRACE_SECONDS = 1.0
# How often to look at the process while its output is quiet (exit, deadline).
_POLL_SECONDS = 0.1
_READ_CHUNK = 65_536


class OutputBuffer:
    """Keeps the first ``head`` and last ``tail`` bytes of a stream and counts what it drops."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self._head_limit = head
        self._tail_limit = tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self._tail_limit:
                del self.tail[: len(self.tail) - self._tail_limit]

    def text(self) -> str:
        if self.total <= self._head_limit + self._tail_limit:
            return (self.head + self.tail).decode("utf-8", errors="replace")
        head = bytes(self.head[: _complete_prefix(self.head)])
        tail = bytes(self.tail[_first_char_start(self.tail) :])
        omitted = self.total - len(head) - len(tail)
        return (
            head.decode("utf-8", errors="replace")
            + f"\n[… {omitted} bytes omitted …]\n"
            + tail.decode("utf-8", errors="replace")
        )


def _complete_prefix(data: bytes | bytearray) -> int:
    """Length of ``data`` without a UTF-8 character cut off at its end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: keep looking for the lead byte
        needed = 1 if byte < 0x80 else 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4
        return len(data) - back if needed > back else len(data)
    return len(data)


def _first_char_start(data: bytes | bytearray) -> int:
    """Offset of the first byte in ``data`` that is not the middle of a UTF-8 character."""
    for i in range(min(3, len(data))):
        if data[i] & 0xC0 != 0x80:
            return i
    return min(3, len(data))


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone
    proc.wait()


class BashArgs(ToolArgs):
    command: str = Field(description="The command line, run by /bin/bash -c in the workspace.")
    timeout: float = Field(120, gt=0, le=600, description="Seconds before the command is killed (max 600).")


def _command_env() -> dict[str, str]:
    """The kernel's environment, with its interpreter first on PATH.

    ``python`` in a command then means the kernel's Python (its venv, its packages), even
    when the kernel was started without activating that venv.
    """
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bindir, env.get("PATH", os.defpath)])
    return env


def bash(workspace: Path, args: BashArgs) -> str:
    proc = subprocess.Popen(
        ["/bin/bash", "-c", args.command],
        cwd=Path(workspace).resolve(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, so killpg reaches every child
        env=_command_env(),
    )
    assert proc.stdout is not None
    out = OutputBuffer()
    try:
        timed_out, pipe_left_open = _pump(proc, out, time.monotonic() + args.timeout)
    except BaseException:
        # KeyboardInterrupt (the runner reports it) or anything unexpected: leave nothing running.
        _kill_group(proc)
        raise
    finally:
        proc.stdout.close()
    text = out.text().rstrip("\n")
    if timed_out:
        raise ToolError(
            f"{text or '(no output)'}\n\ntimed out after {args.timeout:g} s; "
            "the command and everything it started were killed"
        )
    lines = [text] if text else []
    if pipe_left_open:
        lines.append(
            "(background processes still hold the output open; their later output is not "
            "captured: redirect it to a file)"
        )
    code = proc.returncode
    if code < 0:
        lines.append(f"exit code {code} (killed by {signal.Signals(-code).name})")
    elif code:
        lines.append(f"exit code {code}")
    return "\n".join(lines) or "(no output)"


def _pump(proc: subprocess.Popen[bytes], out: OutputBuffer, deadline: float) -> tuple[bool, bool]:
    """Read output until EOF; return (timed out, pipe still open after bash exited)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    timed_out = False
    exited_at: float | None = None
    while True:
        now = time.monotonic()
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is None and now >= deadline:
            _kill_group(proc)
            timed_out = True
            exited_at = time.monotonic()
        if exited_at is not None:
            wait = DRAIN_GRACE_SECONDS - (now - exited_at)
            if wait <= 0:
                return timed_out, True
        else:
            wait = min(_POLL_SECONDS, deadline - now)
        readable, _, _ = select.select([fd], [], [], max(wait, 0))
        if readable:
            data = os.read(fd, _READ_CHUNK)
            if data:
                out.feed(data)
                continue
            if exited_at is None:
                # EOF while bash still runs (it closed its output, or EOF beat the exit).
                try:
                    proc.wait(timeout=max(deadline - time.monotonic(), 0))
                except subprocess.TimeoutExpired:
                    _kill_group(proc)
                    return True, False
            return timed_out, False


def shell_tools(workspace: Path) -> list[Tool]:
    return [
        Tool(
            name="bash",
            description=(
                "Run a command with /bin/bash -c; the working directory is the workspace and "
                "stdin is empty (no interactive input). stdout and stderr are merged. The "
                "command and all it started are killed after `timeout` seconds (default 120). "
                f"Output over {MAX_OUTPUT_BYTES:,} bytes keeps the first and last "
                f"{HEAD_BYTES:,} bytes. A non-zero exit status is reported as 'exit code N'."
            ),
            args=BashArgs,
            handler=lambda a: bash(workspace, a),
            side_effect=True,
        )
    ]
