"""The workspace boundary: ``..``, absolute paths and symlinks cannot leave the workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from pseudoclaude_nb.errors import BoundaryError
from pseudoclaude_nb.messages import ToolCall
from pseudoclaude_nb.tools import Permissions, build_tools, resolve_in_workspace


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace and, next to it, an outside directory holding a secret."""
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret\n")
    (workspace / "inside.txt").write_text("fine\n")
    return workspace, outside


def test_relative_path_resolves_inside(layout: tuple[Path, Path]) -> None:
    workspace, _ = layout
    assert resolve_in_workspace(workspace, "inside.txt") == (workspace / "inside.txt").resolve()
    assert resolve_in_workspace(workspace, "sub/../inside.txt") == (workspace / "inside.txt").resolve()
    assert resolve_in_workspace(workspace, "new/file.txt", write=True).name == "file.txt"


def test_absolute_path_inside_is_fine(layout: tuple[Path, Path]) -> None:
    workspace, _ = layout
    target = str(workspace / "inside.txt")
    assert resolve_in_workspace(workspace, target) == Path(target).resolve()


def test_dotdot_is_refused_with_path_and_workspace(layout: tuple[Path, Path]) -> None:
    workspace, _ = layout
    with pytest.raises(BoundaryError) as info:
        resolve_in_workspace(workspace, "../outside/secret.txt")
    message = str(info.value)
    assert "../outside/secret.txt" in message
    assert str(workspace.resolve()) in message


def test_absolute_path_elsewhere_is_refused(layout: tuple[Path, Path]) -> None:
    workspace, outside = layout
    with pytest.raises(BoundaryError):
        resolve_in_workspace(workspace, str(outside / "secret.txt"))
    with pytest.raises(BoundaryError):
        resolve_in_workspace(workspace, "/")


def test_symlinked_file_escape_is_refused(layout: tuple[Path, Path]) -> None:
    workspace, outside = layout
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(BoundaryError):
        resolve_in_workspace(workspace, "link.txt")


def test_symlinked_parent_dir_escape_is_refused(layout: tuple[Path, Path]) -> None:
    workspace, outside = layout
    (workspace / "linkdir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(BoundaryError):
        resolve_in_workspace(workspace, "linkdir/secret.txt")
    with pytest.raises(BoundaryError):
        resolve_in_workspace(workspace, "linkdir/new.txt", write=True)


def test_dangling_symlink_pointing_outside_is_refused_for_write(layout: tuple[Path, Path]) -> None:
    workspace, outside = layout
    (workspace / "dangling").symlink_to(outside / "not-yet.txt")
    with pytest.raises(BoundaryError):
        resolve_in_workspace(workspace, "dangling", write=True)


def test_symlink_within_workspace_is_fine(layout: tuple[Path, Path]) -> None:
    workspace, _ = layout
    (workspace / "alias.txt").symlink_to(workspace / "inside.txt")
    assert resolve_in_workspace(workspace, "alias.txt") == (workspace / "inside.txt").resolve()


def test_workspace_given_through_a_symlink(layout: tuple[Path, Path], tmp_path: Path) -> None:
    workspace, _ = layout
    alias = tmp_path / "ws-alias"
    alias.symlink_to(workspace, target_is_directory=True)
    assert resolve_in_workspace(alias, str(alias / "inside.txt")).read_text() == "fine\n"
    with pytest.raises(BoundaryError):
        resolve_in_workspace(alias, "../outside/secret.txt")


def test_symlink_loop_is_refused_not_crashing(layout: tuple[Path, Path]) -> None:
    workspace, _ = layout
    (workspace / "a").symlink_to(workspace / "b")
    (workspace / "b").symlink_to(workspace / "a")
    try:
        resolved = resolve_in_workspace(workspace, "a")
    except BoundaryError:
        resolved = None  # refusing a loop is fine; crashing with another exception type is not
    if resolved is not None:
        assert resolved.is_relative_to(workspace.resolve())
    assert _run(workspace, "read_file", path="a").is_error


def test_nul_byte_in_path_is_a_boundary_error(layout: tuple[Path, Path]) -> None:
    workspace, _ = layout
    with pytest.raises(BoundaryError):
        resolve_in_workspace(workspace, "bad\0name")


def test_state_dir_is_readable_but_not_writable(layout: tuple[Path, Path]) -> None:
    workspace, _ = layout
    spilled = workspace / ".pseudoclaude" / "sessions" / "s1" / "tool-results" / "c1.txt"
    spilled.parent.mkdir(parents=True)
    spilled.write_text("spilled body\n")
    assert resolve_in_workspace(workspace, ".pseudoclaude/sessions/s1/tool-results/c1.txt") == spilled
    with pytest.raises(BoundaryError, match="session logs"):
        resolve_in_workspace(workspace, ".pseudoclaude/sessions/s1/conversation.jsonl", write=True)
    with pytest.raises(BoundaryError):
        resolve_in_workspace(workspace, "sub/../.pseudoclaude/x", write=True)
    # A file merely named like the directory elsewhere is fine.
    assert resolve_in_workspace(workspace, "docs/.pseudoclaude/x", write=True).name == "x"


# --- through the tools -----------------------------------------------------------------


def _run(workspace: Path, name: str, **arguments):
    call = ToolCall(id="c", name=name, arguments=arguments)
    return build_tools(workspace).run(call, Permissions("auto"))


def test_tools_refuse_escapes_as_error_results(layout: tuple[Path, Path]) -> None:
    workspace, outside = layout
    (workspace / "linkdir").symlink_to(outside, target_is_directory=True)
    attempts = [
        ("read_file", {"path": "../outside/secret.txt"}),
        ("read_file", {"path": str(outside / "secret.txt")}),
        ("read_file", {"path": "linkdir/secret.txt"}),
        ("write_file", {"path": "../outside/new.txt", "content": "x"}),
        ("write_file", {"path": "linkdir/new.txt", "content": "x"}),
        ("edit_file", {"path": "linkdir/secret.txt", "old_string": "top", "new_string": "no"}),
        ("grep", {"pattern": "secret", "path": ".."}),
        ("grep", {"pattern": "secret", "path": "linkdir"}),
        ("list_files", {"pattern": "../outside/*"}),
    ]
    for name, arguments in attempts:
        result = _run(workspace, name, **arguments)
        assert result.is_error, (name, arguments, result.content)
        assert "outside the workspace" in result.content
        assert "top secret" not in result.content
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_write_into_state_dir_refused_but_read_allowed(layout: tuple[Path, Path]) -> None:
    workspace, _ = layout
    log = workspace / ".pseudoclaude" / "sessions" / "s1" / "conversation.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text('{"v": 1}\n')
    written = _run(workspace, "write_file", path=".pseudoclaude/sessions/s1/conversation.jsonl", content="")
    assert written.is_error and "session logs" in written.content
    edited = _run(
        workspace,
        "edit_file",
        path=".pseudoclaude/sessions/s1/conversation.jsonl",
        old_string="1",
        new_string="2",
    )
    assert edited.is_error
    assert log.read_text() == '{"v": 1}\n'
    read = _run(workspace, "read_file", path=".pseudoclaude/sessions/s1/conversation.jsonl")
    assert not read.is_error and '{"v": 1}' in read.content
