"""What is sent, and every count printed from it, does not depend on where the workspace lives
(issue 44): the system prompt names the workspace folder, not its path. So the committed
notebook outputs hold wherever TMPDIR or the clone is (macOS's /var/folders/…/T is 40 characters
longer than /tmp), and a home folder's path (often the person's name) is not sent.
"""

from __future__ import annotations

from pathlib import Path

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.prompt import build_system_prompt


def test_the_prompt_names_the_folder_not_its_path(tmp_path: Path) -> None:
    short = tmp_path / "a" / "project"
    long = tmp_path / "var" / "folders" / "zz" / ("z" * 28) / "T" / "project"
    assert build_system_prompt(short) == build_system_prompt(long)
    assert "`project`" in build_system_prompt(short) and str(tmp_path) not in build_system_prompt(short)


def test_the_estimate_is_the_same_at_any_depth(tmp_path: Path, agents) -> None:
    estimates = []
    for parent in ("a", "var/folders/zz/zyxvpxvq6csfxvn_n0000000000000/T"):
        ws = tmp_path / parent / "ws"
        ws.mkdir(parents=True)
        agent = Agent(PseudoClaude(workspace=str(ws), provider="demo", fsync=False))
        agents.append(agent)
        estimates.append(agent.context_manifest()["estimated_tokens"])
    assert estimates[0] == estimates[1]


def test_a_commands_output_names_workspace_files_relative_to_it(tmp_path: Path) -> None:
    """A traceback prints absolute paths; the model reads them as the tools name files."""
    from pseudoclaude_nb.tools.shell import BashArgs, bash

    ws = tmp_path / "deep" / "er" / "ws"
    ws.mkdir(parents=True)
    (ws / "sub").mkdir()
    (ws / "sub" / "boom.py").write_text("import sys\nprint(__file__)\nsys.exit(1 / 0)\n")
    out = bash(ws, BashArgs(command="python3 sub/boom.py"))
    assert str(tmp_path) not in out
    assert out.splitlines()[0] == "sub/boom.py" and 'File "sub/boom.py", line 3' in out
