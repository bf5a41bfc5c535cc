"""A kernel restart mid-run is said when the session runs again (issue 30).

A real kernel runs ``%agent`` whose tool sleeps; the kernel is restarted while it sleeps
(no ``RunFinished``, the notebook keeps its running line); the next ``%agent`` on that
session, in the new kernel, says "the last run was cut by a kernel restart at step 1"
first. A run that ends leaves no marker behind.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from bench.kernel_wire import Wire

SLOW = {
    "model": "m",
    "turns": [{"text": "Waiting.", "tool_calls": [{"name": "bash", "arguments": {"command": "sleep 30"}}]}],
}
AFTER = {"model": "m", "turns": [{"text": "Back again."}]}


def _text(outputs: list[dict]) -> str:
    return "\n".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in outputs)


def test_a_restart_mid_run_is_said_on_the_next_run(tmp_path: Path) -> None:
    (tmp_path / "slow.json").write_text(json.dumps(SLOW))
    (tmp_path / "after.json").write_text(json.dumps(AFTER))
    with Wire(tmp_path, env={"PSEUDOCLAUDE_HOME": str(tmp_path / "home")}) as wire:
        wire.run("%load_ext pseudoclaude_nb\n%config PseudoClaude.workspace = '.'")
        wire.kc.execute('%agent --new --provider scripted --script slow.json --mode auto "wait"')
        sessions = tmp_path / ".pseudoclaude" / "sessions"
        deadline = time.monotonic() + 60
        while not list(sessions.glob("*/running.json")) and time.monotonic() < deadline:
            time.sleep(0.1)
        (marker,) = sessions.glob("*/running.json")
        time.sleep(1.0)  # the tool is sleeping now
        wire.km.restart_kernel(now=True)
        wire.kc.wait_for_ready(timeout=60)
        while True:  # what the old kernel still sent
            try:
                wire.kc.get_iopub_msg(timeout=1)
            except Exception:  # noqa: BLE001 - queue.Empty: drained
                break
        session = marker.parent.name
        wire.run("%load_ext pseudoclaude_nb\n%config PseudoClaude.workspace = '.'")
        cell = wire.run(
            f'%agent --session {session} --provider scripted --script after.json --mode auto "go on"'
        )
    text = _text(cell.outputs)
    assert "the last run was cut by a kernel restart at step 1" in text, text
    assert "Back again." in text and "✓ done" in text
    assert not marker.exists()  # this run finished: nothing to say next time
