"""Files a cloned repository ships beside its code, attacked from outside (issue 28's audit).

Each test builds the workspace a hostile repository could carry, then drives the product as
a person would (``%agent`` on the scripted provider, ``%sessions``): nothing outside the
workspace may reach the model's context, be written, or hang the kernel.
"""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

from pseudoclaude_nb.magics import current_agent
from tests.scripts import run_magic, turn, write_script

SECRET = "TOP-SECRET-OUTSIDE: the bank pin is 4242"


def outside_file(tmp_path: Path) -> Path:
    """A file of the person's, outside the workspace (``~/.netrc``, ``~/.ssh/id_rsa``…)."""
    folder = tmp_path / "person"
    folder.mkdir(exist_ok=True)
    path = folder / "notes.txt"
    path.write_text(SECRET + "\n")
    return path


def system_prompt_of_a_run(ip, workspace: Path) -> tuple[str, str]:
    """(the system prompt the model got, what the run printed)."""
    path = write_script(workspace, "hi", turn("Hello."))
    out = run_magic(ip, f'agent --provider scripted --script {path} "hi"')
    return current_agent(ip).last_provider.requests[0].system, out


def test_a_project_file_linking_out_of_the_workspace_is_not_read(ip, workspace: Path, tmp_path: Path) -> None:
    # PSEUDOCLAUDE.md -> ~/notes.txt: before, the person's file went into every request's
    # system prompt (and to whatever host the repository's .env names).
    os.symlink(outside_file(tmp_path), workspace / "PSEUDOCLAUDE.md")
    system, out = system_prompt_of_a_run(ip, workspace)
    assert SECRET not in system
    assert "PSEUDOCLAUDE.md was not read into the prompt" in out and "outside the workspace" in out


def test_a_hard_linked_project_file_is_not_read(ip, workspace: Path, tmp_path: Path) -> None:
    os.link(outside_file(tmp_path), workspace / "PSEUDOCLAUDE.md")
    system, out = system_prompt_of_a_run(ip, workspace)
    assert SECRET not in system
    assert "hard links" in out


def test_a_project_file_linking_inside_the_workspace_is_read(ip, workspace: Path) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "agent.md").write_text("Use pnpm, never npm.\n")
    os.symlink("docs/agent.md", workspace / "PSEUDOCLAUDE.md")
    system, out = system_prompt_of_a_run(ip, workspace)
    assert "## Project instructions (PSEUDOCLAUDE.md)\nUse pnpm, never npm." in system
    assert "not read" not in out


def test_a_fifo_project_file_is_refused_without_hanging(ip, workspace: Path) -> None:
    os.mkfifo(workspace / "PSEUDOCLAUDE.md")
    system, out = system_prompt_of_a_run(ip, workspace)
    assert "Project instructions" not in system
    assert "not a regular file" in out


def test_only_the_head_of_a_huge_project_file_is_read(workspace: Path) -> None:
    from pseudoclaude_nb.prompt import PROJECT_FILE_CAP, system_sections

    with open(workspace / "PSEUDOCLAUDE.md", "wb") as f:
        f.write(b"Be brief.\n")
        f.truncate(64 << 20)  # sparse; a clone (a tarball) can carry one of any size
    tracemalloc.start()
    try:
        sections = system_sections(workspace)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sections[1][1].startswith("## Project instructions (PSEUDOCLAUDE.md)\nBe brief.")
    assert peak < 4 * PROJECT_FILE_CAP  # before: the whole 64 MiB was read, then cut
