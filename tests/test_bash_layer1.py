"""bash output goes to Layer 1 whole: a long output is spilled in full, with a preview in the conversation."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scripts import read_log, script, scripted_agent, turn


def test_a_120000_byte_bash_output_is_spilled_in_full(workspace: Path, agents):
    # 1,200 numbered lines of 99 bytes + newline: every byte distinct enough to check.
    command = "for i in $(seq 1 1200); do printf '%04d%095d\\n' $i 0; done"
    path = workspace.parent / "bash-big.json"
    path.write_text(
        json.dumps(script(turn("running", ("bash", {"command": command}, "call_bash")), turn("done"))),
        encoding="utf-8",
    )
    agent = scripted_agent(workspace)
    agents.append(agent)
    assert agent.run("run it", script=str(path)).status == "done"
    session = agent.session.dir
    expected = "".join(f"{i:04d}{0:095d}\n" for i in range(1, 1201)).rstrip("\n")
    assert len(expected.encode()) == 119_999
    [spill] = [e for e in read_log(session) if e["type"] == "spill"]
    assert spill["call_id"] == "call_bash" and spill["tool"] == "bash"
    assert (session / spill["path"]).read_text(encoding="utf-8") == expected  # every byte
    result = next(m for m in agent.session.conversation.messages() if m.tool_result is not None)
    assert result.tool_result.content.startswith("[Tool result too large")
    assert "0001" in result.tool_result.content  # the preview's head
    lines = (session / "conversation.jsonl").read_bytes().splitlines()
    assert max(len(line) for line in lines) < 5_000  # the log holds the preview, not the body
