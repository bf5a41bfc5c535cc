"""The ``bash`` tool: one command in the workspace, bounded in time and in output size.

The command runs in its own session (process group). When it ends, times out or is
interrupted, its group is killed and so is every process that carries the run's token in
its environment (``RUN_MARK``): a ``setsid`` or double-forked child is found that way too.
Output is read as it comes and kept whole up to ``MAX_OUTPUT_BYTES`` (20 MiB, spooled to a
temporary file), then handed to Layer 1, which spills what is over ``spill_bytes`` with a
preview; past the cap the first and last parts are kept (redacted before the cut), so
``yes`` with a long timeout cannot exhaust memory.
"""

from __future__ import annotations

import os
import secrets
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import Field

from ..envtrust import subprocess_env
from ..errors import ToolError
from ..redact import Redactor
from .registry import Tool, ToolArgs

# The whole output is kept up to this hard cap (spooled to a temporary file past
# SPOOL_MEMORY_BYTES) and handed to Layer 1, which spills what is over spill_bytes with a
# preview. Past the cap, the first HEAD_BYTES and the last TAIL_BYTES are kept, with a note.
MAX_OUTPUT_BYTES = 20 << 20
TAIL_BYTES = 1 << 20
HEAD_BYTES = MAX_OUTPUT_BYTES - TAIL_BYTES
SPOOL_MEMORY_BYTES = 1 << 20
# Redaction runs before any cut: each kept part is redacted with this much of what is cut
# beyond it, so a cut cannot separate a secret from its label ("AWS_SECRET_ACCESS_KEY=" | value).
REDACT_MARGIN = 4096
# After bash exits, a background child (`server &`) may keep the output pipe open forever;
# wait this long for the rest of the output, then return without it.
DRAIN_GRACE_SECONDS = 1.0
# How often to look at the process while its output is quiet (exit, deadline).
_POLL_SECONDS = 0.1
_READ_CHUNK = 65_536


class OutputBuffer:
    """Keeps a stream whole up to ``head + tail`` bytes; beyond, its first ``head`` and last ``tail``.

    The head is spooled (memory up to ``SPOOL_MEMORY_BYTES``, then a temporary file), the tail
    is a ring in memory, so memory stays bounded however much is fed. ``text()`` redacts
    before it cuts (``REDACT_MARGIN``).
    """

    def __init__(
        self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES, *, margin: int = REDACT_MARGIN
    ) -> None:
        self._head_limit = head
        self._tail_limit = tail
        self._margin = margin
        self._head_cap = head + margin
        self._tail_cap = tail + margin
        self._head = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES)  # noqa: SIM115 - closed in text()
        self._head_size = 0
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_cap - self._head_size
        if room > 0:
            part = data[:room]
            self._head.write(part)
            self._head_size += len(part)
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self._tail_cap:
                del self.tail[: len(self.tail) - self._tail_cap]

    @property
    def truncated(self) -> bool:
        return self.total > self._head_cap + self._tail_cap

    def _head_bytes(self) -> bytes:
        self._head.seek(0)
        return self._head.read()

    def close(self) -> None:
        self._head.close()

    def text(self, redactor: Redactor | None = None) -> str:
        """The output as text; past the cap, head and tail (redacted, then cut) around a note."""
        try:
            head = self._head_bytes()
        finally:
            self.close()
        if not self.truncated:
            return (head + self.tail).decode("utf-8", errors="replace")
        redactor = redactor or Redactor()
        head_text = redactor.text(head.decode("utf-8", errors="replace"))
        tail_text = redactor.text(bytes(self.tail).decode("utf-8", errors="replace"))
        kept_head = _first_bytes(head_text, self._head_limit)
        kept_tail = _last_bytes(tail_text, self._tail_limit)
        omitted = self.total - self._head_limit - self._tail_limit
        return (
            kept_head
            + f"\n[… {omitted:,} bytes omitted: the output passed the {self._head_limit + self._tail_limit:,}-byte "
            "cap; its first and last parts are kept …]\n" + kept_tail
        )


def _first_bytes(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    return data[:limit].decode("utf-8", errors="ignore") if len(data) > limit else text


def _last_bytes(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    return data[len(data) - limit :].decode("utf-8", errors="ignore") if len(data) > limit else text


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


# Every process a command starts inherits this variable (value: one run's token), so what it
# left behind is found by its environment even after ``setsid`` or a double fork moved it out
# of the process group and away from bash. Only a process that clears its environment
# (``env -i``, some daemons) escapes this; see README "Tools".
RUN_MARK = "PSEUDOCLAUDE_BASH_RUN"
_KILL_ROUNDS = 5


def kill_leftovers(proc: subprocess.Popen[bytes], token: str) -> int:
    """Kill the command's process group and every process carrying the run's token; how many were found.

    Repeated a few rounds: a process may fork while its siblings are being killed.
    """
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.poll() is None:
        proc.wait()
    found = 0
    mark = f"{RUN_MARK}={token}".encode()
    for _ in range(_KILL_ROUNDS):
        pids = _marked_pids(mark)
        if not pids:
            break
        found += len(pids)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.01)
    return found


def _marked_pids(mark: bytes) -> list[int]:
    """Live processes whose environment holds ``mark`` (Linux ``/proc``; elsewhere none are found)."""
    me = os.getpid()
    out: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read()
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue  # gone, or another user's
        if state not in (b"Z", b"X") and (b"\0" + mark + b"\0" in b"\0" + env):
            out.append(int(name))
    return out


class BashArgs(ToolArgs):
    command: str = Field(description="The command line, run by /bin/bash -c in the workspace.")
    timeout: float = Field(120, gt=0, le=600, description="Seconds before the command is killed (max 600).")


def _command_env() -> dict[str, str]:
    """The kernel's environment, with its interpreter first on PATH.

    ``python`` in a command then means the kernel's Python (its venv, its packages), even
    when the kernel was started without activating that venv. Variables that run code as a
    program starts (``BASH_ENV``, ``LD_PRELOAD``, ``PYTHONSTARTUP``, …) are left out unless
    the user's own environment had them when the package loaded (workspace trust, SPEC §19).
    """
    env = subprocess_env()
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bindir, env.get("PATH", os.defpath)])
    return env


def bash(workspace: Path, args: BashArgs) -> str:
    token = secrets.token_hex(8)
    env = _command_env()
    env[RUN_MARK] = token
    proc = subprocess.Popen(
        ["/bin/bash", "-c", args.command],
        cwd=Path(workspace).resolve(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own session and process group, so killpg reaches its children
        env=env,
    )
    assert proc.stdout is not None
    out = OutputBuffer(HEAD_BYTES, TAIL_BYTES, margin=REDACT_MARGIN)
    try:
        timed_out, pipe_left_open = _pump(proc, out, time.monotonic() + args.timeout)
    except BaseException:
        out.close()
        raise
    finally:
        # On exit, timeout or interrupt: nothing the command started outlives it.
        proc.stdout.close()
        left = kill_leftovers(proc, token)
    pipe_left_open = pipe_left_open or left > 0
    text = relative_paths(out.text().rstrip("\n"), workspace)
    if timed_out:
        raise ToolError(
            f"{text or '(no output)'}\n\ntimed out after {args.timeout:g} s; "
            "the command and everything it started were killed"
        )
    lines = [text] if text else []
    if pipe_left_open:
        lines.append(
            "(background processes the command left running were stopped when it ended; "
            "a tool call cannot leave a process behind)"
        )
    code = proc.returncode
    if code < 0:
        lines.append(f"exit code {code} (killed by {signal.Signals(-code).name})")
    elif code:
        lines.append(f"exit code {code}")
    return "\n".join(lines) or "(no output)"


def relative_paths(text: str, workspace: Path) -> str:
    """``text`` with the workspace's absolute path taken off the paths inside it: a traceback's
    ``File "/home/ann/proj/stats.py"`` reads ``File "stats.py"``, as the tools name files. What
    the model reads (and every count of it) is then the same wherever the workspace lives, and a
    home folder's path, often the person's name, is not sent (issue 44)."""
    for root in dict.fromkeys((str(Path(workspace).resolve()), os.path.abspath(workspace))):
        text = text.replace(root.rstrip(os.sep) + os.sep, "")
    return text


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
                "command and all it started are killed after `timeout` seconds (default 120), and "
                "background processes are stopped when it ends. Long output is saved in full to a "
                "file with a preview shown (read it in parts). A non-zero exit status is "
                "reported as 'exit code N'."
            ),
            args=BashArgs,
            handler=lambda a: bash(workspace, a),
            side_effect=True,
        )
    ]
