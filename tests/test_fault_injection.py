"""Faults (SPEC §6.2, §16): a full disk mid-run, and SIGKILL at random points of a real session.

Disk full: the run stops with a clear error, the conversation is kept, and the next run's
first write resyncs the log, which then equals the conversation.

SIGKILL: a child process runs a real session (``Agent``, scripted provider, real tools, fsync
on) with appends, ``edit`` replaces and Layer 2 compactions, and is killed at random
moments, some right after it announces a replace. The child prints the (settled) state it is
about to write before each write, so for every kill the test knows the last two states the
log may hold: the log must load as exactly one of them (old or new), protocol-valid, with
no unreadable line, and a new ``Agent`` must resume it and continue.
"""

from __future__ import annotations

import errno
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.messages import pairing_problems
from pseudoclaude_nb.session import load_session
from pseudoclaude_nb.session import writer as writer_mod
from tests.scripts import script, turn

ROOT = Path(__file__).resolve().parent.parent

# --- disk full through the Agent ------------------------------------------------------------------


def _script_file(path: Path, *turns: dict) -> str:
    path.write_text(json.dumps(script(*turns)), encoding="utf-8")
    return str(path)


class DiskFull:
    """From the ``after``-th write on the session log on, every write fails with ENOSPC (after
    writing half its bytes, if ``partial``) until ``free()`` is called."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, agent: Agent, *, after: int, partial: bool) -> None:
        self.count = 0
        self.after = after
        self.full = False
        self.freed = False
        self.failures = 0
        real = os.write

        def write(fd: int, data) -> int:
            session = agent.session
            if session is not None and fd == session.writer._fd:
                self.count += 1
                if self.count >= self.after and not self.freed:
                    self.full = True
                if self.full:
                    self.failures += 1
                    if partial:
                        real(fd, bytes(data[: len(data) // 2]))
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real(fd, data)

        monkeypatch.setattr(writer_mod.os, "write", write)

    def free(self) -> None:
        self.freed, self.full = True, False


@pytest.mark.parametrize("partial", [False, True], ids=["nothing-written", "half-written"])
@pytest.mark.parametrize("after", [1, 2, 3, 4, 5, 6])
@pytest.mark.script_may_remain  # the full disk stops run 1 at the write `after` names, maybe before turn 2
def test_disk_full_mid_run_then_the_next_run_converges(
    workspace, tmp_path, monkeypatch, after, partial
) -> None:
    settings = PseudoClaude(workspace=str(workspace), provider="scripted", permission_mode="auto")
    agent = Agent(settings)
    warmup = _script_file(tmp_path / "w.json", turn("hello"))
    assert agent.run("first, while the disk has room", script=warmup).status == "done"
    disk = DiskFull(monkeypatch, agent, after=after, partial=partial)

    run1 = _script_file(
        tmp_path / "1.json",
        turn("Writing.", ("write_file", {"path": "a.txt", "content": "alpha\n"})),
        turn("Wrote a.txt."),
    )
    summary = agent.run("write a.txt", script=run1)

    assert summary.status == "error"
    assert "free some disk space" in str(summary.error) and "No space left on device" in str(summary.error)
    assert disk.failures >= 1
    kept = agent.session.conversation.messages()
    assert "write a.txt" in [m.content for m in kept]  # memory kept what the log could not take
    assert pairing_problems(kept) == []
    assert agent.session.writer.failed is not None
    if after <= 5:  # writes 1-5 are messages (prompt, call, usage, result, answer); 6 is usage
        lagging = load_session(agent.session.dir)
        assert [m.id for m in lagging.messages] != [m.id for m in kept]  # the log is behind

    disk.free()
    run2 = _script_file(
        tmp_path / "2.json", turn("Checking.", ("read_file", {"path": "a.txt"})), turn("All good.")
    )
    again = agent.run("check a.txt", script=run2)

    assert again.status == "done", again.error
    assert agent.session.writer.failed is None
    loaded = load_session(agent.session.dir)
    assert loaded.messages == agent.session.conversation.messages()
    assert loaded.messages[: len(kept)] == kept
    assert loaded.incomplete is False and loaded.bad_lines == []
    # Resync replaces only (a half-written one may show up too, discarded by the loader).
    reasons = {e.get("reason") for e in _entries(agent.session.dir) if e.get("type") == "replace"}
    assert reasons == {"resync"} and loaded.replaces >= 1
    agent.close()


def _entries(session: Path) -> list[dict]:
    out = []
    for line in (session / "conversation.jsonl").read_bytes().split(b"\n"):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


# --- SIGKILL at random points ---------------------------------------------------------------------

# Shared by the child and the test: the state a log may load as, as a short digest.
STATE_HELPERS = r'''
import hashlib


def settled(messages):
    """What the loader makes of a state: a trailing call without all its results is cut."""
    i = len(messages)
    while i > 0 and messages[i - 1].tool_result is not None:
        i -= 1
    if i > 0 and messages[i - 1].tool_calls:
        answered = {m.tool_result.call_id for m in messages[i:]}
        if any(c.id not in answered for c in messages[i - 1].tool_calls):
            return messages[: i - 1]
    return messages


def digest(messages):
    return hashlib.sha256(",".join(m.id for m in settled(list(messages))).encode()).hexdigest()[:16]
'''

DRIVER = (
    STATE_HELPERS
    + r"""
import json
import os
import sys
from pathlib import Path

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session import writer as writer_mod


_write = os.write  # before the patch below (which is global: writer_mod.os is os)


def say(line):
    _write(1, (line + "\n").encode())  # unbuffered: a kill cannot lose what was said


# Announce every state *before* the writer writes it: the log can then only hold the
# announced state or the one before it.
_append, _replace = writer_mod.SessionWriter.append_message, writer_mod.SessionWriter.replace


def append_message(self, message):
    say("STATE " + digest(self.conversation.messages()))
    _append(self, message)


replacing = False


def replace(self, reason, messages):
    global replacing
    say("STATE " + digest(messages))
    replacing = True
    try:
        _replace(self, reason, messages)
    finally:
        replacing = False


writer_mod.SessionWriter.append_message = append_message
writer_mod.SessionWriter.replace = replace


def write(fd, data):
    if replacing:
        say("WRITING")  # a replace's one write starts now: the test may kill inside it
    return _write(fd, data)


writer_mod.os.write = write

ws, rounds = Path(sys.argv[1]), int(sys.argv[2])
settings = PseudoClaude(
    workspace=str(ws), provider="scripted", permission_mode="auto", fsync=True, recent_tokens=200
)
agent = Agent(settings)
say("READY")
# A large snapshot makes a replace's single write long enough for kills to land inside it.
padding = "the long note of round {} " + "x" * 400_000


def call(name, **arguments):
    return {"name": name, "arguments": arguments}


for r in range(rounds):
    turns = [
        {"text": f"round {r}: writing", "tool_calls": [call("write_file", path=f"f{r}.txt", content="data " * 300)]},
        {"text": "", "tool_calls": [call("read_file", path=f"f{r}.txt"), call("list_files")]},
        {"text": f"round {r} done"},
    ]
    path = ws / f"script{r}.json"
    # A window large enough that the padding never triggers an automatic compaction.
    data = {"model": "scripted-fault", "context_window": 4_000_000, "turns": turns}
    path.write_text(json.dumps({**data, "summaries": [f"summary after round {r}"]}))
    summary = agent.run(f"round {r}", script=str(path))
    if summary.status != "done":
        say(f"FAILED {summary.error}")
        sys.exit(1)
    conversation = agent.session.conversation
    messages = conversation.messages()
    start = max(i for i, m in enumerate(messages) if m.role == "user" and m.tool_result is None)
    edited = [Message(role="user", content=padding.format(r)), Message(role="assistant", content="noted")]
    say("REPLACE")
    conversation.replace("edit", edited + messages[start:])
    if r % 3 == 2:
        say("REPLACE")
        if not agent.compact().ok:
            say("FAILED compaction")
            sys.exit(1)
agent.close()
say("DONE")
"""
)

ROUNDS = 6
KILLS_AT_RANDOM = 24
KILLS_AT_REPLACE = 16
PARALLEL = 8

_helpers: dict = {}
exec(STATE_HELPERS, _helpers)  # the very code the child runs
digest = _helpers["digest"]


@dataclass
class Child:
    ws: Path
    plan: tuple[str, float]  # ("delay", seconds after READY) | ("replace", n-th marker) | ("none", 0)
    lines: list[str] = field(default_factory=list)
    returncode: int | None = None
    ready: float | None = None  # when the child said READY (its imports done)
    seconds: float = 0.0  # from READY to its end

    @property
    def states(self) -> list[str]:
        return [digest([])] + [line.split()[1] for line in self.lines if line.startswith("STATE ")]


def _run_child(driver: Path, child: Child, rng: random.Random) -> Child:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, str(driver), str(child.ws), str(ROUNDS)],
        stdout=subprocess.PIPE,
        env=env,
        cwd=child.ws,
    )
    kind, value = child.plan
    timer: threading.Timer | None = None
    replaces = 0
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.decode().strip()
        child.lines.append(line)
        if line == "READY":
            child.ready = time.monotonic()
        if line == "READY" and kind == "delay":
            timer = threading.Timer(value, proc.send_signal, args=(signal.SIGKILL,))
            timer.start()
        elif line == "REPLACE" and kind == "replace":
            replaces += 1
        elif line == "WRITING" and kind == "replace" and replaces == value:
            # The replace's one write (about 400 KB for an edit) has just begun: kill inside it
            # or inside its fsync. Half the kills go at once, half a little later.
            time.sleep(rng.choice([0.0, rng.uniform(0, 0.0005)]))
            proc.send_signal(signal.SIGKILL)
            replaces += 1  # once
    child.returncode = proc.wait(timeout=60)
    if timer is not None:
        timer.cancel()
    child.seconds = time.monotonic() - (child.ready or started)
    return child


def _check(child: Child, resume_script: str) -> dict[str, bool]:
    """The log of a killed child loads as its old or new state; a new Agent continues it."""
    root = child.ws / ".pseudoclaude" / "sessions"
    logs = list(root.glob("*/conversation.jsonl")) if root.is_dir() else []
    states = child.states
    where = f"child {child.plan} in {child.ws}: {child.lines[-3:]}"
    if not logs:
        assert len(states) == 1, where  # nothing was announced, so nothing could be written
        return {"before-session": True}
    [log] = logs
    loaded = load_session(log)
    got = digest(loaded.messages)
    assert got in states[-2:], where
    assert pairing_problems(loaded.messages) == [], where
    assert loaded.bad_lines == [] and loaded.incomplete is False, where

    agent = Agent(
        PseudoClaude(
            workspace=str(child.ws), provider="scripted", permission_mode="auto", script=resume_script
        )
    )
    try:
        resumed = agent.resume(log.parent.name)
        before = agent.session.conversation.messages()
        assert [m.id for m in before] == [m.id for m in resumed.messages], where
        summary = agent.run("after the crash")
        assert summary.status == "done", (where, summary.error)
        after = load_session(log)
        assert after.messages == agent.session.conversation.messages(), where
        assert after.messages[: len(before)] == before, where
        assert [m.content for m in after.messages[len(before) :]] == [
            "after the crash",
            "resumed and continuing",
        ]
        assert after.bad_lines == [] and pairing_problems(after.messages) == [], where
    finally:
        agent.close()
    return {
        "new": got == states[-1],
        "old": got != states[-1],
        "torn_tail": loaded.torn_tail,
        "torn_replace": loaded.torn_replace,
        "truncated_tool_calls": loaded.truncated_tool_calls,
    }


def test_sigkill_at_random_points_always_leaves_a_resumable_old_or_new_state(tmp_path: Path) -> None:
    seed = int(os.environ.get("PSEUDOCLAUDE_FAULT_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER, encoding="utf-8")
    resume_script = _script_file(tmp_path / "resume.json", turn("resumed and continuing"))
    started = time.monotonic()

    # One run to the end: the driver works, its log is the final state, and it sets the
    # time scale and the number of replace markers for the kills.
    (tmp_path / "calibration").mkdir()
    full = _run_child(driver, Child(tmp_path / "calibration", ("none", 0)), rng)
    assert full.returncode == 0 and full.lines[-1] == "DONE", full.lines[-5:]
    [log] = (tmp_path / "calibration" / ".pseudoclaude" / "sessions").glob("*/conversation.jsonl")
    final = load_session(log)
    assert digest(final.messages) == full.states[-1]
    reasons = Counter(e.get("reason") for e in _entries(log.parent) if e.get("type") == "replace")
    assert reasons == {"edit": ROUNDS, "compact": ROUNDS // 3}
    markers = full.lines.count("REPLACE")
    run_time = full.seconds

    # Up to 0.8 of the calibration run: on a loaded machine that run can take longer than the
    # children later do, and a delay past a child's end kills nothing (3 of 40 once).
    plans = [("delay", rng.uniform(0, run_time * 0.8)) for _ in range(KILLS_AT_RANDOM)]
    plans += [("replace", rng.randint(1, markers)) for _ in range(KILLS_AT_REPLACE)]
    children = []
    for i, plan in enumerate(plans):
        ws = tmp_path / f"kill{i:02d}"
        ws.mkdir()
        children.append(Child(ws, plan))
    with ThreadPoolExecutor(PARALLEL) as pool:
        done = list(pool.map(lambda c: _run_child(driver, c, random.Random(rng.random())), children))

    outcomes: Counter[str] = Counter()
    killed = 0
    for child in done:
        killed += child.returncode == -signal.SIGKILL
        for name, flag in _check(child, resume_script).items():
            outcomes[name] += flag
        shutil.rmtree(child.ws)  # megabytes of snapshots each; pytest keeps old tmp dirs
    # Almost every child is killed; one whose delay outlived it just finished, which is fine.
    assert killed >= len(plans) - 2, f"seed {seed}: only {killed} of {len(plans)} children were killed"
    print(
        f"\nfault injection (seed {seed}): {killed} SIGKILLs of {len(plans)} children, "
        f"{run_time:.2f} s per full session, {markers} replaces each; outcomes {dict(outcomes)}; "
        f"{time.monotonic() - started:.1f} s in all"
    )
