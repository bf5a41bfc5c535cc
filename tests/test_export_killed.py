"""A ``kill -9`` during ``%sessions export`` leaves nothing behind for good (issue 41 #11).

The adversary's run: a killed export left ``.exp-….zip.*.tmp`` in the person's folder forever.
Here a real process exports a real session and is killed with SIGKILL while its zip is half
written (its log reader is slowed so the kill lands there); the next export, from this process,
removes what it left, and only that.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from pseudoclaude_nb.session.archive import export_session
from tests.scripts import script, scripted_agent, turn

ROOT = Path(__file__).resolve().parents[1]

EXPORTER = textwrap.dedent(
    """
    import sys, time
    from pseudoclaude_nb.session.archive import export as export_module

    real = export_module._add_log
    def slow(*args, **kwargs):
        print("writing", flush=True)
        time.sleep(120)  # killed in here, the zip half written
        return real(*args, **kwargs)
    export_module._add_log = slow
    export_module.export_session(sys.argv[1], sys.argv[2], sys.argv[3])
    """
)


def a_session(workspace: Path, agents: list) -> str:
    path = workspace.parent / "s.json"
    path.write_text(json.dumps(script(turn("an answer worth sharing"))), encoding="utf-8")
    agent = scripted_agent(workspace, str(path))
    agents.append(agent)
    assert agent.run("hello").status == "done"
    session_id = agent.session.id
    agent.close()
    return session_id


def temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_a_killed_export_leaves_nothing_after_the_next_one(workspace: Path, agents, tmp_path: Path) -> None:
    session_id = a_session(workspace, agents)
    shared = tmp_path / "to-share"
    shared.mkdir()
    (shared / ".notes.tmp").write_text("the person's own file", encoding="utf-8")  # never touched
    proc = subprocess.Popen(
        [sys.executable, "-c", EXPORTER, str(workspace), session_id, str(shared / "exp-1.zip")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
        left = [n for n in temporaries(shared) if n != ".notes.tmp"]
        assert len(left) == 1 and left[0].startswith(".exp-1.zip.")  # half a zip, on disk
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)  # reaped: its pid is gone
    assert proc.returncode == -signal.SIGKILL
    assert [n for n in temporaries(shared) if n != ".notes.tmp"] == left  # the kill left it

    # The next export (anywhere: here, another folder) removes it; the person's files stay.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    export_session(workspace, session_id, elsewhere / "exp-2.zip")
    assert temporaries(shared) == [".notes.tmp"] and not (shared / "exp-1.zip").exists()
    assert (elsewhere / "exp-2.zip").is_file() and temporaries(elsewhere) == []
    assert list((workspace / ".pseudoclaude" / "exports").iterdir()) == []  # no note left


def test_an_export_under_way_in_another_process_is_left_alone(
    workspace: Path, agents, tmp_path: Path
) -> None:
    session_id = a_session(workspace, agents)
    proc = subprocess.Popen(
        [sys.executable, "-c", EXPORTER, str(workspace), session_id, str(tmp_path / "slow.zip")],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "writing"
        before = temporaries(tmp_path)
        export_session(workspace, session_id, tmp_path / "quick.zip")
        time.sleep(0.1)
        assert temporaries(tmp_path) == before and len(before) == 1  # still being written
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
