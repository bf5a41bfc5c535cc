"""Attacks on the workspace boundary (SPEC §12, §16), through the tools as a model calls them.

Every path-taking tool is tried with ``..`` in many spellings, absolute paths, symlinks out
of the workspace (files, directories, chains, dangling, to ``/``) and writes into
``.pseudoclaude/`` (this or another session, the trash, through an alias). Refusals are
error *results*; the secret outside never appears in any result and nothing outside (or in
``.pseudoclaude/``) changes.

Decided here, and documented in the README: tools may *read* anything inside the workspace,
``.pseudoclaude/`` included — a spill preview tells the model to ``read_file`` its session's
``tool-results/`` file, and the logs are the user's own data in the user's own folder (and
redacted, SPEC §6.2) — so reading another session's spilled results is allowed. Writes into
``.pseudoclaude/`` are refused, whichever session. ``bash`` and ``run_python`` are not
path-bounded (a shell can ``cat`` anything); their boundary is the permission mode.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pseudoclaude_nb.messages import ToolCall, ToolResult
from pseudoclaude_nb.tools import Permissions, build_tools

SECRET = "top secret outside the workspace"


@pytest.fixture
def box(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with two sessions' state, and an outside folder holding a secret."""
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    (ws / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (ws / "inside.txt").write_text("fine\n")
    for sid in ("20260101-000000-aaaa", "20260101-000000-bbbb"):
        d = ws / ".pseudoclaude" / "sessions" / sid
        (d / "tool-results").mkdir(parents=True)
        (d / "conversation.jsonl").write_text('{"v": 1}\n')
        (d / "tool-results" / "call_1.txt").write_text(f"spilled result of {sid}\n")
    (ws / ".pseudoclaude" / "trash" / "old").mkdir(parents=True)
    return ws, outside


def run(ws: Path, name: str, mode: str = "auto", **arguments) -> ToolResult:
    return build_tools(ws).run(ToolCall(id="c", name=name, arguments=arguments), Permissions(mode))


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def assert_refused(result: ToolResult, *words: str) -> None:
    assert result.is_error, result.content
    assert SECRET not in result.content
    for word in words:
        assert word in result.content, result.content


def _reading_calls(path: str) -> list[tuple[str, dict]]:
    return [
        ("read_file", {"path": path}),
        ("grep", {"pattern": "secret", "path": path}),
        ("list_files", {"pattern": path.rstrip("/") + "/*"}),
    ]


def _writing_calls(path: str) -> list[tuple[str, dict]]:
    return [
        ("write_file", {"path": path, "content": "pwned"}),
        ("edit_file", {"path": path, "old_string": "top", "new_string": "pwned"}),
    ]


# --- ".." in many spellings -------------------------------------------------------------------------

DOTDOT = [
    "../outside/secret.txt",
    "./../outside/secret.txt",
    "sub/../../outside/secret.txt",
    "sub/./../.././outside/secret.txt",
    "sub//..//..//outside//secret.txt",
    "../../../../../../../../" + "{outside}/secret.txt",
    "inside.txt/../../outside/secret.txt",
]


@pytest.mark.parametrize("template", DOTDOT)
def test_dotdot_is_refused_for_every_tool(box, template: str) -> None:
    ws, outside = box
    path = template.format(outside=str(outside).lstrip("/"))
    before = snapshot(outside)
    for name, args in [("read_file", {"path": path}), ("grep", {"pattern": "secret", "path": path})]:
        assert_refused(run(ws, name, **args), "outside the workspace")
    for name, args in _writing_calls(path):
        assert_refused(run(ws, name, **args), "outside the workspace")
    assert_refused(run(ws, "list_files", pattern=str(Path(path).parent) + "/*"), "outside the workspace")
    assert snapshot(outside) == before


def test_dotdot_directory_listing_and_grep_are_refused(box) -> None:
    ws, _ = box
    for pattern in ("../*", "../**/*", "sub/../../*", "../outside/**/*.txt"):
        assert_refused(run(ws, "list_files", pattern=pattern), "outside the workspace")
    for path in ("..", "../", "sub/../..", "../outside"):
        assert_refused(run(ws, "grep", pattern="secret", path=path), "outside the workspace")


# --- absolute paths ---------------------------------------------------------------------------------


def test_absolute_paths_outside_are_refused(box) -> None:
    ws, outside = box
    before = snapshot(outside)
    for path in (
        str(outside / "secret.txt"),
        "/" + str(outside / "secret.txt"),  # "//tmp/…" is the same place
        f"{ws}/../outside/secret.txt",
        "/etc/passwd",
        "/",
    ):
        for name, args in _reading_calls(path)[:2] + _writing_calls(path):
            assert_refused(run(ws, name, **args), "outside the workspace")
    assert snapshot(outside) == before


def test_absolute_path_inside_the_workspace_is_fine(box) -> None:
    ws, _ = box
    assert run(ws, "read_file", path=str(ws / "inside.txt")).content == "     1\tfine"


def test_tilde_is_not_expanded_to_the_home_directory(box, monkeypatch) -> None:
    ws, outside = box
    monkeypatch.setenv("HOME", str(outside))
    result = run(ws, "read_file", path="~/secret.txt")
    assert result.is_error and "does not exist" in result.content and SECRET not in result.content
    written = run(ws, "write_file", path="~/note.txt", content="x")
    assert not written.is_error
    assert (ws / "~" / "note.txt").read_text() == "x"  # a folder literally named "~", inside
    assert not (outside / "note.txt").exists()


# --- symlinks --------------------------------------------------------------------------------------


def test_symlinks_out_of_the_workspace_are_refused(box) -> None:
    ws, outside = box
    (ws / "file-link").symlink_to(outside / "secret.txt")
    (ws / "dir-link").symlink_to(outside, target_is_directory=True)
    (ws / "root-link").symlink_to("/", target_is_directory=True)
    (ws / "up").symlink_to("..", target_is_directory=True)  # relative, to the parent
    (ws / "chain-1").symlink_to(ws / "chain-2")
    (ws / "chain-2").symlink_to(ws / "dir-link")
    (ws / "sub" / "deep").symlink_to("../../outside", target_is_directory=True)
    (ws / "dangling").symlink_to(outside / "not-yet.txt")
    before = snapshot(outside)
    reads = ["file-link", "dir-link/secret.txt", "root-link/etc/passwd", "up/outside/secret.txt"]
    reads += ["chain-1/secret.txt", "sub/deep/secret.txt"]
    for path in reads:
        for name, args in _reading_calls(path)[:2]:
            assert_refused(run(ws, name, **args), "outside the workspace")
        for name, args in _writing_calls(path):
            assert_refused(run(ws, name, **args), "outside the workspace")
    for path in ("dir-link/new.txt", "chain-1/new.txt", "dangling", "sub/deep/new.txt", "up/outside/new.txt"):
        assert_refused(run(ws, "write_file", path=path, content="pwned"), "outside the workspace")
    for pattern in ("dir-link/*", "chain-1/**/*", "up/outside/*", "sub/deep/*"):
        assert_refused(run(ws, "list_files", pattern=pattern), "outside the workspace")
    assert snapshot(outside) == before
    assert not (outside / "not-yet.txt").exists()


def test_a_workspace_wide_search_skips_links_out(box) -> None:
    ws, outside = box
    (ws / "file-link.txt").symlink_to(outside / "secret.txt")
    (ws / "dir-link").symlink_to(outside, target_is_directory=True)
    grep = run(ws, "grep", pattern="secret")
    assert not grep.is_error and SECRET not in grep.content
    listed = run(ws, "list_files", pattern="**/*")
    assert "dir-link/secret.txt" not in listed.content  # the linked folder is not walked


def test_a_symlink_loop_is_an_error_not_a_hang(box) -> None:
    ws, _ = box
    (ws / "loop-a").symlink_to(ws / "loop-b")
    (ws / "loop-b").symlink_to(ws / "loop-a")
    for name, args in _reading_calls("loop-a")[:2] + _writing_calls("loop-a"):
        assert run(ws, name, **args).is_error


# --- .pseudoclaude/: readable, never writable -------------------------------------------------------


def test_writes_into_any_sessions_state_are_refused(box) -> None:
    ws, _ = box
    state = ws / ".pseudoclaude"
    (ws / "alias").symlink_to(state, target_is_directory=True)
    before = snapshot(state)
    targets = [
        ".pseudoclaude/sessions/20260101-000000-bbbb/conversation.jsonl",
        ".pseudoclaude/sessions/20260101-000000-bbbb/tool-results/call_1.txt",
        ".pseudoclaude/sessions/20260101-000000-aaaa/tool-results/new.txt",
        ".pseudoclaude/sessions/20260101-000000-aaaa/meta.json",
        ".pseudoclaude/trash/old/conversation.jsonl",
        ".pseudoclaude/memory/MEMORY.md",
        ".pseudoclaude/.gitignore",
        "./.pseudoclaude/sessions/x/conversation.jsonl",
        "sub/../.pseudoclaude/sessions/x/conversation.jsonl",
        str(state / "sessions" / "x" / "conversation.jsonl"),
        "alias/sessions/20260101-000000-bbbb/conversation.jsonl",
        ".PseudoClaude/sessions/x.txt",  # the same folder on case-insensitive file systems
    ]
    for path in targets:
        for name, args in _writing_calls(path):
            assert_refused(run(ws, name, **args), "session logs")
    assert snapshot(state) == before
    assert not (ws / ".PseudoClaude").exists()


def test_reading_another_sessions_spilled_results_is_allowed(box) -> None:
    ws, _ = box
    other = ".pseudoclaude/sessions/20260101-000000-bbbb/tool-results/call_1.txt"
    read = run(ws, "read_file", path=other)
    assert not read.is_error and "spilled result of 20260101-000000-bbbb" in read.content
    grep = run(ws, "grep", pattern="spilled result", path=".pseudoclaude/sessions")
    assert grep.content.count("spilled result of") == 2
    listed = run(ws, "list_files", pattern=".pseudoclaude/sessions/**/*.txt")
    assert listed.content.count("tool-results/call_1.txt") == 2
    # A workspace-wide search does not wander into the logs unless pointed there.
    assert "spilled result" not in run(ws, "grep", pattern="spilled result").content


# --- odd strings -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["bad\0name", "x" * 5000, "/".join(["d"] * 3000), "a\nb", "\udcff", "", " ", "."],
    ids=["nul", "long-name", "deep", "newline", "surrogate", "empty", "space", "dot"],
)
def test_odd_paths_end_as_error_results_not_crashes(box, path: str) -> None:
    ws, outside = box
    before = snapshot(outside)
    for name, args in _reading_calls(path)[:1] + _writing_calls(path):
        result = run(ws, name, **args)
        assert isinstance(result, ToolResult) and SECRET not in result.content
        if name != "write_file":
            assert result.is_error, (name, path)
    assert snapshot(outside) == before


# --- the permission mode is bash's boundary ------------------------------------------------------------


def test_read_only_mode_refuses_writes_and_commands(box) -> None:
    ws, outside = box
    for name, args in [
        ("write_file", {"path": "new.txt", "content": "x"}),
        ("edit_file", {"path": "inside.txt", "old_string": "fine", "new_string": "bad"}),
        ("bash", {"command": f"cat {outside / 'secret.txt'}"}),
    ]:
        result = run(ws, name, "read-only", **args)
        assert result.is_error and SECRET not in result.content, name
    assert not (ws / "new.txt").exists() and (ws / "inside.txt").read_text() == "fine\n"
    assert os.listdir(outside) == ["secret.txt"]
