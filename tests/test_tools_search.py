"""list_files and grep: globbing, skipped directories, caps, and explicit paths into them."""

from __future__ import annotations

from pathlib import Path

import pytest

from pseudoclaude_nb.messages import ToolCall, ToolResult
from pseudoclaude_nb.tools import Permissions, build_tools
from pseudoclaude_nb.tools.search import glob_to_regex


@pytest.fixture
def run(tmp_path: Path):
    registry = build_tools(tmp_path)

    def run(name: str, **arguments) -> ToolResult:
        return registry.run(ToolCall(id="c", name=name, arguments=arguments), Permissions("auto"))

    return run


def _touch(root: Path, *paths: str, text: str = "x\n") -> None:
    for p in paths:
        (root / p).parent.mkdir(parents=True, exist_ok=True)
        (root / p).write_text(text)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    _touch(
        tmp_path,
        "README.md",
        "src/app.py",
        "src/pkg/util.py",
        "src/pkg/__pycache__/util.cpython-311.pyc",
        ".git/config",
        ".pseudoclaude/sessions/s1/tool-results/c1.txt",
        ".ipynb_checkpoints/nb-checkpoint.ipynb",
        "web/node_modules/lib/index.js",
        "web/main.js",
        ".env",
    )
    return tmp_path


@pytest.mark.parametrize(
    ("pattern", "path", "matches"),
    [
        ("**/*.py", "a.py", True),
        ("**/*.py", "src/pkg/a.py", True),
        ("*.py", "src/a.py", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/pkg/a.py", False),
        ("src/**", "src/pkg/a.py", True),
        ("file?.txt", "file1.txt", True),
        ("file[0-9].txt", "filex.txt", False),
        ("file[!0-9].txt", "filex.txt", True),
        ("a+b.txt", "a+b.txt", True),
    ],
)
def test_glob_to_regex(pattern: str, path: str, matches: bool) -> None:
    assert bool(glob_to_regex(pattern).match(path)) is matches


# --- list_files ------------------------------------------------------------------------


def test_list_all_files_sorted_skipping_clutter(tree: Path, run) -> None:
    result = run("list_files")
    assert not result.is_error
    assert result.content.splitlines() == [
        ".env",
        "README.md",
        "src/app.py",
        "src/pkg/util.py",
        "web/main.js",
    ]


def test_list_with_a_pattern(tree: Path, run) -> None:
    assert run("list_files", pattern="**/*.py").content.splitlines() == [
        "src/app.py",
        "src/pkg/util.py",
    ]
    assert run("list_files", pattern="src/*.py").content == "src/app.py"
    assert run("list_files", pattern="*.md").content == "README.md"
    assert run("list_files", pattern="./src/pkg/").content == "src/pkg/util.py"


def test_list_into_a_skipped_dir_when_named_explicitly(tree: Path, run) -> None:
    result = run("list_files", pattern=".pseudoclaude/**/*.txt")
    assert result.content == ".pseudoclaude/sessions/s1/tool-results/c1.txt"
    assert run("list_files", pattern="web/node_modules/**/*").content == "web/node_modules/lib/index.js"


def test_list_absolute_pattern_inside_workspace(tree: Path, run) -> None:
    assert run("list_files", pattern=f"{tree}/src/*.py").content == "src/app.py"


def test_list_does_not_list_directories(tree: Path, run) -> None:
    assert "src/pkg" not in run("list_files", pattern="src/*").content.splitlines()


def test_list_no_match(tree: Path, run) -> None:
    result = run("list_files", pattern="**/*.rs")
    assert not result.is_error and "no files match" in result.content
    assert "no files match" in run("list_files", pattern="missing/dir/*").content


def test_list_is_capped_at_1000(tmp_path: Path, run) -> None:
    (tmp_path / "many").mkdir()
    for i in range(1005):
        (tmp_path / "many" / f"f{i:04d}.txt").write_text("")
    lines = run("list_files").content.splitlines()
    assert len(lines) == 1001
    assert lines[0] == "many/f0000.txt" and lines[999] == "many/f0999.txt"
    assert "5 more files" in lines[-1] and "1005" in lines[-1]


# --- grep ------------------------------------------------------------------------------


def test_grep_outputs_path_line_and_text(tmp_path: Path, run) -> None:
    _touch(tmp_path, "src/a.py", text="import os\nx = 1\nimport re\n")
    _touch(tmp_path, "b.txt", text="nothing\n")
    result = run("grep", pattern=r"^import \w+")
    assert result.content.splitlines() == ["src/a.py:1:import os", "src/a.py:3:import re"]


def test_grep_skips_clutter_dirs(tree: Path, run) -> None:
    lines = run("grep", pattern="x").content.splitlines()
    paths = {line.split(":")[0] for line in lines}
    assert paths == {".env", "README.md", "src/app.py", "src/pkg/util.py", "web/main.js"}


def test_grep_inside_a_skipped_dir_when_pointed_at(tree: Path, run) -> None:
    (tree / ".pseudoclaude/sessions/s1/tool-results/c1.txt").write_text("a\nneedle here\n")
    result = run("grep", pattern="needle", path=".pseudoclaude")
    assert result.content == ".pseudoclaude/sessions/s1/tool-results/c1.txt:2:needle here"
    assert run("grep", pattern="needle").content == "no matches"
    single = run("grep", pattern="needle", path=".pseudoclaude/sessions/s1/tool-results/c1.txt")
    assert single.content.endswith(":2:needle here")


def test_grep_glob_by_name_and_by_path(tree: Path, run) -> None:
    by_name = run("grep", pattern="x", glob="*.py").content.splitlines()
    assert [line.split(":")[0] for line in by_name] == ["src/app.py", "src/pkg/util.py"]
    by_path = run("grep", pattern="x", path="src", glob="pkg/*.py").content.splitlines()
    assert [line.split(":")[0] for line in by_path] == ["src/pkg/util.py"]


def test_grep_is_capped_at_200_matches(tmp_path: Path, run) -> None:
    _touch(tmp_path, "many.txt", text="hit\n" * 500)
    lines = run("grep", pattern="hit").content.splitlines()
    assert len(lines) == 201
    assert lines[199] == "many.txt:200:hit"
    assert "200 matches" in lines[-1]


def test_grep_invalid_regex_is_an_error(tmp_path: Path, run) -> None:
    result = run("grep", pattern="(unclosed")
    assert result.is_error and "invalid regular expression" in result.content


def test_grep_no_matches(tmp_path: Path, run) -> None:
    _touch(tmp_path, "a.txt")
    result = run("grep", pattern="zzz")
    assert (result.content, result.is_error) == ("no matches", False)


def test_grep_skips_binary_files(tmp_path: Path, run) -> None:
    (tmp_path / "blob.bin").write_bytes(b"needle\0")
    _touch(tmp_path, "t.txt", text="needle\n")
    assert run("grep", pattern="needle").content == "t.txt:1:needle"
    assert run("grep", pattern="needle", path="blob.bin").is_error


def test_grep_does_not_follow_symlinks_out_of_the_workspace(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("password=hunter2\n")
    (outside / "sub").mkdir()
    (outside / "sub" / "more.txt").write_text("password=swordfish\n")
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    (workspace / "linkdir").symlink_to(outside / "sub", target_is_directory=True)
    (workspace / "own.txt").write_text("password=mine\n")
    registry = build_tools(workspace)
    call = ToolCall(id="c", name="grep", arguments={"pattern": "password"})
    result = registry.run(call, Permissions("auto"))
    assert result.content == "own.txt:1:password=mine"


def test_grep_missing_path_is_an_error(tmp_path: Path, run) -> None:
    result = run("grep", pattern="x", path="nope")
    assert result.is_error and "does not exist" in result.content
