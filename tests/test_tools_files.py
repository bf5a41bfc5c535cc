"""read_file, write_file and edit_file, run through the registry as the model would."""

from __future__ import annotations

from pathlib import Path

import pytest

from pseudoclaude_nb.messages import ToolCall, ToolResult
from pseudoclaude_nb.tools import Permissions, build_tools


@pytest.fixture
def run(tmp_path: Path):
    registry = build_tools(tmp_path)

    def run(name: str, **arguments) -> ToolResult:
        return registry.run(ToolCall(id="c", name=name, arguments=arguments), Permissions("auto"))

    return run


def _lines(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


# --- read_file -------------------------------------------------------------------------


def test_read_numbers_lines_like_cat_n(tmp_path: Path, run) -> None:
    (tmp_path / "a.txt").write_text("alpha\n\tbeta\ngamma")
    result = run("read_file", path="a.txt")
    assert not result.is_error
    assert result.content == "     1\talpha\n     2\t\tbeta\n     3\tgamma"


def test_read_offset_and_limit(tmp_path: Path, run) -> None:
    (tmp_path / "big.txt").write_text(_lines(30))
    result = run("read_file", path="big.txt", offset=10, limit=5)
    lines = result.content.splitlines()
    assert lines[:5] == [f"{n:>6}\tline {n}" for n in range(10, 15)]
    assert lines[5] == "… 16 more lines; use offset=15"
    assert len(lines) == 6


def test_read_default_limit_is_2000_with_a_continuation_note(tmp_path: Path, run) -> None:
    (tmp_path / "huge.txt").write_text(_lines(3234))
    lines = run("read_file", path="huge.txt").content.splitlines()
    assert len(lines) == 2001
    assert lines[1999] == "  2000\tline 2000"
    assert lines[-1] == "… 1234 more lines; use offset=2001"
    rest = run("read_file", path="huge.txt", offset=2001).content.splitlines()
    assert rest[0] == "  2001\tline 2001" and rest[-1] == "  3234\tline 3234"


def test_read_exactly_to_the_end_has_no_note(tmp_path: Path, run) -> None:
    (tmp_path / "f.txt").write_text(_lines(5))
    assert "more lines" not in run("read_file", path="f.txt", offset=3, limit=3).content


def test_read_offset_past_end_is_an_error(tmp_path: Path, run) -> None:
    (tmp_path / "f.txt").write_text(_lines(5))
    result = run("read_file", path="f.txt", offset=9)
    assert result.is_error and "5 lines" in result.content


def test_read_rejects_bad_offset_and_limit(tmp_path: Path, run) -> None:
    (tmp_path / "f.txt").write_text(_lines(5))
    assert run("read_file", path="f.txt", offset=0).is_error
    assert run("read_file", path="f.txt", limit=0).is_error


def test_read_empty_file(tmp_path: Path, run) -> None:
    (tmp_path / "empty.txt").write_text("")
    result = run("read_file", path="empty.txt")
    assert not result.is_error and "empty" in result.content


def test_read_missing_directory_and_binary_are_errors(tmp_path: Path, run) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "blob.bin").write_bytes(b"abc\0def" + b"x" * 100)
    missing = run("read_file", path="nope.txt")
    assert missing.is_error and "does not exist" in missing.content
    directory = run("read_file", path="d")
    assert directory.is_error and "directory" in directory.content
    binary = run("read_file", path="blob.bin")
    assert binary.is_error and "binary" in binary.content


def test_nul_after_the_first_8kb_is_still_text(tmp_path: Path, run) -> None:
    (tmp_path / "late.txt").write_bytes(b"a" * 9000 + b"\n\0\n")
    assert not run("read_file", path="late.txt").is_error


def test_read_replaces_invalid_utf8(tmp_path: Path, run) -> None:
    (tmp_path / "latin.txt").write_bytes("café\n".encode("latin-1"))
    result = run("read_file", path="latin.txt")
    assert not result.is_error
    assert result.content == "     1\tcaf\ufffd"


def test_read_cuts_very_long_lines(tmp_path: Path, run) -> None:
    (tmp_path / "min.js").write_text("x" * 10_000 + "\nshort\n")
    lines = run("read_file", path="min.js").content.splitlines()
    assert len(lines[0]) < 2_100 and "8000 more characters" in lines[0]
    assert lines[1] == "     2\tshort"


# --- write_file ------------------------------------------------------------------------


def test_write_creates_parents_and_reports_bytes(tmp_path: Path, run) -> None:
    result = run("write_file", path="a/b/c.txt", content="héllo\n")
    assert not result.is_error
    assert result.content == "wrote 7 bytes to a/b/c.txt"
    assert (tmp_path / "a/b/c.txt").read_bytes() == "héllo\n".encode()


def test_write_overwrites_and_keeps_content_exact(tmp_path: Path, run) -> None:
    (tmp_path / "f.txt").write_text("old")
    run("write_file", path="f.txt", content="line1\r\nline2")
    assert (tmp_path / "f.txt").read_bytes() == b"line1\r\nline2"


def test_write_onto_a_directory_is_an_error(tmp_path: Path, run) -> None:
    (tmp_path / "d").mkdir()
    assert run("write_file", path="d", content="x").is_error


# --- edit_file -------------------------------------------------------------------------


def test_edit_replaces_a_unique_match(tmp_path: Path, run) -> None:
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    result = run("edit_file", path="m.py", old_string="return 1", new_string="return 2")
    assert not result.is_error and "replaced 1 occurrence" in result.content
    assert (tmp_path / "m.py").read_text() == "def f():\n    return 2\n"


def test_edit_not_found_is_a_readable_error(tmp_path: Path, run) -> None:
    (tmp_path / "m.py").write_text("x = 1\n")
    result = run("edit_file", path="m.py", old_string="x = 2", new_string="x = 3")
    assert result.is_error and "not found" in result.content
    assert (tmp_path / "m.py").read_text() == "x = 1\n"


def test_edit_ambiguous_match_says_how_many(tmp_path: Path, run) -> None:
    (tmp_path / "m.py").write_text("a = 1\nb = 1\nc = 1\n")
    result = run("edit_file", path="m.py", old_string="= 1", new_string="= 2")
    assert result.is_error
    assert "matched 3 times" in result.content and "replace_all" in result.content
    assert (tmp_path / "m.py").read_text() == "a = 1\nb = 1\nc = 1\n"


def test_edit_replace_all(tmp_path: Path, run) -> None:
    (tmp_path / "m.py").write_text("a = 1\nb = 1\nc = 1\n")
    result = run("edit_file", path="m.py", old_string="= 1", new_string="= 2", replace_all=True)
    assert not result.is_error and "replaced 3 occurrences" in result.content
    assert (tmp_path / "m.py").read_text() == "a = 2\nb = 2\nc = 2\n"


def test_edit_keeps_crlf_line_endings(tmp_path: Path, run) -> None:
    (tmp_path / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    result = run("edit_file", path="w.txt", old_string="one\ntwo", new_string="1\n2")
    assert not result.is_error, result.content
    assert (tmp_path / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


def test_edit_missing_file_empty_old_and_no_change_are_errors(tmp_path: Path, run) -> None:
    (tmp_path / "f.txt").write_text("abc")
    assert "write_file" in run("edit_file", path="nope", old_string="a", new_string="b").content
    assert run("edit_file", path="f.txt", old_string="", new_string="b").is_error
    assert run("edit_file", path="f.txt", old_string="a", new_string="a").is_error
    assert (tmp_path / "f.txt").read_text() == "abc"


def test_edit_refuses_non_utf8(tmp_path: Path, run) -> None:
    (tmp_path / "l.txt").write_bytes("café".encode("latin-1"))
    result = run("edit_file", path="l.txt", old_string="caf", new_string="tea")
    assert result.is_error and "UTF-8" in result.content
    assert (tmp_path / "l.txt").read_bytes() == "café".encode("latin-1")
