"""``%memory`` (pseudoclaude_nb/magics/memory.py), SPEC §13: show, add, edit, rm, on, off,
verify, stale, rebuild with --user/--project; mistakes are UsageErrors that say the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from IPython.core.error import UsageError

from pseudoclaude_nb.magics import current_agent
from tests.scripts import run_magic, script, turn


def memory(ip, line: str = "", cell: str | None = None) -> str:
    return run_magic(ip, f"memory {line}".strip(), cell)


def test_show_on_an_empty_memory(ip) -> None:
    out = memory(ip)
    assert "memory is on (policy explicit)" in out
    assert "## Project Memory  (.pseudoclaude/memory, 0 notes)" in out and "## User Memory" in out
    assert out.count("(none)") == 2


def test_add_show_edit_verify_stale_rm(ip, workspace: Path) -> None:
    out = memory(
        ip, 'add "package manager" -d "This project uses pnpm" --type preference Use pnpm, never npm.'
    )
    assert out.strip() == "created project/package manager"
    path = workspace / ".pseudoclaude" / "memory" / "package-manager.md"
    assert "body" not in path.read_text() and path.read_text().endswith("Use pnpm, never npm.\n")

    listing = memory(ip, "show")
    assert "- package manager — This project uses pnpm (preference, updated <1 day ago, active)" in listing
    one = memory(ip, "show package manager")
    assert one.startswith(".pseudoclaude/memory/package-manager.md:") and "source: user" in one

    assert memory(ip, 'edit "package manager" -d "pnpm 9 only"').strip() == "updated project/package manager"
    memory(ip, 'edit "package manager"', cell="Use pnpm 9.\n\nCorepack pins it.\n")
    text = path.read_text()
    assert "description: pnpm 9 only" in text and text.endswith("Use pnpm 9.\n\nCorepack pins it.\n")

    assert memory(ip, "stale package manager").strip() == "project/package manager is now stale"
    assert "stale)" in memory(ip)
    assert memory(ip, "verify package manager").strip() == "project/package manager is now verified"
    assert memory(ip, "rm package manager").strip() == "deleted project/package manager"
    assert not path.exists() and not (workspace / ".pseudoclaude" / "memory" / "MEMORY.md").exists()


def test_cell_form_and_user_level(ip, tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "pc"
    monkeypatch.setenv("PSEUDOCLAUDE_HOME", str(home))
    out = memory(ip, "add editor --user --type preference", cell="# Vim keybindings\n\nEverywhere.\n")
    assert out.strip() == "created user/editor"
    text = (home / "memory" / "editor.md").read_text()
    assert "description: Vim keybindings" in text and "level: user" in text  # from the body's first line
    assert "## User Memory" in memory(ip, "show --user") and "Project Memory" not in memory(ip, "show --user")


def test_a_name_in_both_stores_needs_a_flag(ip) -> None:
    memory(ip, "add tabs -d Tabs project")
    memory(ip, "add tabs --user -d Tabs user")
    with pytest.raises(UsageError, match="both a project and a user note; pass --project or --user"):
        memory(ip, "rm tabs")
    assert memory(ip, "rm tabs --user").strip() == "deleted user/tabs"


@pytest.mark.parametrize(
    ("line", "cell", "message"),
    [
        ("forget everything", None, "unknown action 'forget'; use one of: show, list, add"),
        ("show --user --project", None, "--user or --project, not both"),
        ("rm x -d text", None, "--description and --type go with %memory add or %memory edit"),
        ("rm", None, "needs a NAME; usage: %memory rm NAME"),
        ("add", None, "needs a NAME; usage: %memory add NAME"),
        ("add lonely", None, "needs the note's text"),
        ("off now", None, "takes no name"),
        ("rm ghost", None, "no note 'ghost' in project or user memory; see %memory show"),
        ("rm ghost", "body", "only %%memory add and %%memory edit take a cell"),
        ("add x --type rumour y", None, "invalid choice"),
    ],
)
def test_mistakes_are_usage_errors_with_the_fix(ip, line: str, cell: str | None, message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace("%", "%")):
        memory(ip, line, cell)


def test_add_twice_and_edit_without_changes_say_what_to_do(ip, workspace: Path) -> None:
    memory(ip, 'add pnpm -d "Use pnpm" use pnpm')
    with pytest.raises(UsageError, match="already a project note 'pnpm'; change it with %memory edit"):
        memory(ip, "add pnpm -d again again")
    with pytest.raises(UsageError, match="nothing to change.*pnpm.md by hand"):
        memory(ip, "edit pnpm")
    with pytest.raises(UsageError, match="body is over 4096 bytes"):
        memory(ip, "edit pnpm " + "x" * 5000)


def test_off_and_on_switch_memory_in_context_json(ip) -> None:
    memory(ip, 'add pnpm -d "Use pnpm" use pnpm')
    on = json.loads(run_magic(ip, "context --json"))
    assert on["memory_included"] is True and "pnpm — Use pnpm" in on["memory_index"]
    assert "read_memory" in on["tools"]

    assert "memory is off" in memory(ip, "off")
    off = json.loads(run_magic(ip, "context --json"))
    assert off["memory_included"] is False and off["memory_index"] is None and off["memory_policy"] == "off"
    assert "read_memory" not in off["tools"] and off["parts"]["memory"] == 0
    assert "memory is off" in memory(ip)

    assert memory(ip, "on").strip() == "memory is on (policy explicit)"
    assert json.loads(run_magic(ip, "context --json"))["memory_included"] is True


def test_on_restores_the_policy_that_was_set_before_off(ip) -> None:
    ip.run_line_magic("config", 'PseudoClaude.memory_policy = "auto"')
    memory(ip, "off")
    assert current_agent(ip).settings.memory_policy == "off"
    assert memory(ip, "on").strip() == "memory is on (policy auto)"


def test_agent_no_memory_leaves_the_index_out_of_that_run_only(ip, workspace: Path) -> None:
    memory(ip, 'add pnpm -d "Use pnpm" use pnpm')
    path = workspace.parent / "s.json"
    path.write_text(json.dumps(script(turn("ok"))))
    run_magic(ip, f"agent --provider scripted --script {path} --no-memory hi")
    agent = current_agent(ip)
    assert "Use pnpm" not in agent.last_provider.requests[0].system
    run_magic(ip, f"agent --provider scripted --script {path} hi again")
    assert "pnpm — Use pnpm" in agent.last_provider.requests[0].system


def test_rebuild_after_the_index_was_edited(ip, workspace: Path) -> None:
    memory(ip, 'add pnpm -d "Use pnpm" use pnpm')
    index = workspace / ".pseudoclaude" / "memory" / "MEMORY.md"
    good = index.read_text()
    index.write_text("vandalised\n")
    (workspace / ".pseudoclaude" / "memory" / "notes.md").write_text("no header\n")
    out = memory(ip, "rebuild --project")
    assert out.splitlines()[0] == "project: .pseudoclaude/memory/MEMORY.md rebuilt from 1 note"
    assert "skipped notes.md" in out
    assert index.read_text() == good


def test_unload_removes_the_magic(ip) -> None:
    ip.run_line_magic("unload_ext", "pseudoclaude_nb")
    try:
        assert "memory" not in ip.magics_manager.magics["line"]
        assert "memory" not in ip.magics_manager.magics["cell"]
    finally:
        ip.run_line_magic("load_ext", "pseudoclaude_nb")


def test_memory_list_lists_as_mcp_list_does(ip) -> None:
    """``%memory list`` is the listing (``%memory`` alone, ``%memory show``), as ``%mcp list`` is."""
    from IPython.core.error import UsageError
    from IPython.utils.capture import capture_output

    ip.run_line_magic("memory", 'add style -d "house style" use tabs')
    with capture_output() as listed:
        ip.run_line_magic("memory", "list")
    with capture_output() as shown:
        ip.run_line_magic("memory", "")
    assert "style" in listed.stdout and listed.stdout == shown.stdout
    with pytest.raises(UsageError, match="takes no name; %memory show NAME shows one note"):
        ip.run_line_magic("memory", "list style")
