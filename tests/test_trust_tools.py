"""Workspace trust, tool by tool: the registry's boundary, the bounded repr, escaping at depth."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pseudoclaude_nb.messages import ToolCall
from pseudoclaude_nb.session.encode import encode_entry, escape_value
from pseudoclaude_nb.tools import Permissions
from pseudoclaude_nb.tools.registry import TEXT_ESCAPE_NOTE, Tool, ToolArgs, ToolRegistry
from pseudoclaude_nb.tools.search import GrepArgs, ListFilesArgs, grep, list_files
from pseudoclaude_nb.tools.user import bounded_repr


def _run(handler) -> tuple[str, bool]:
    registry = ToolRegistry([Tool(name="t", description="", args=ToolArgs, handler=handler)])
    result = registry.run(ToolCall(id="c", name="t"), Permissions("auto"))
    return result.content, result.is_error


def test_any_tool_calling_sys_exit_gets_an_error_result():
    def leave(_):
        sys.exit(2)

    text, is_error = _run(leave)
    assert is_error and text.startswith("SystemExit: 2") and "the run goes on" in text


def test_keyboard_interrupt_still_propagates_from_the_registry():
    def stop(_):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(stop)


def test_every_result_is_escaped_errors_included():
    assert _run(lambda _: "ok \udce9") == ("ok \\xe9\n" + TEXT_ESCAPE_NOTE, False)
    assert _run(lambda _: "clean é") == ("clean é", False)

    def fails(_):
        raise ValueError("missing " + os.fsdecode(b"x\xff"))

    text, is_error = _run(fails)
    assert is_error and "x\\xff" in text and text.endswith(TEXT_ESCAPE_NOTE)


def test_names_are_counted_once_and_only_when_shown(workspace: Path):
    fd = os.open(os.fsencode(workspace) + b"/a\xe9.txt", os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"match\nmatch\n")
    os.close(fd)
    (workspace / "plain.txt").write_text("nothing\n", encoding="utf-8")
    assert list_files(workspace, ListFilesArgs(pattern="plain*")) == "plain.txt"
    assert grep(workspace, GrepArgs(pattern="nothing")) == "plain.txt:1:nothing"  # a\xe9.txt not shown
    out = grep(workspace, GrepArgs(pattern="match")).splitlines()
    assert out == [
        "a\\xe9.txt:1:match",
        "a\\xe9.txt:2:match",
        "(note: 1 name was not valid UTF-8; shown with \\xNN escapes)",
    ]


def test_escape_value_goes_deep_without_recursion_and_keeps_clean_values():
    clean = {"a": [1, {"b": "é"}]}
    assert escape_value(clean) == (clean, 0) and escape_value(clean)[0] is clean
    deep: object = "\udce9"
    for _ in range(5_000):
        deep = [deep]
    out, count = escape_value({"k\ud800": deep})
    assert count == 2
    assert list(out) == ["k\\ud800"]
    inner = out["k\\ud800"]
    for _ in range(5_000):
        inner = inner[0]
    assert inner == "\\xe9"


def test_encode_entry_escapes_at_any_depth_it_can_encode():
    deep: object = "\udce9"
    for _ in range(300):  # past orjson's limit
        deep = [deep]
    line = encode_entry({"v": 1, "a": deep, "b": "\ud800"})
    assert line.endswith(b"\n") and b"\\\\xe9" in line and b"\\\\ud800" in line


@pytest.mark.parametrize(
    "value",
    [
        [],
        (),
        set(),
        frozenset(),
        {},
        (1,),
        ((1,),),
        [1, [2, (3,)], {"a": {1, 2}}],
        {"x": b"\x00\xff", "y": bytearray(b"ab")},
        frozenset({1}),
        "a'b\"",
        [1.5, None, True, 2j],
        {(1, 2): [3]},
        list(range(2_000)),
        {i: str(i) for i in range(1_500)},
        [[i] if i % 700 == 0 else i for i in range(3_000)],
        [(i, "x" * 300) for i in range(600)],
        [Path("p")],
    ],
)
def test_bounded_repr_is_repr_within_the_limit(value):
    assert bounded_repr(value, 10**7) == repr(value)


def test_bounded_repr_of_self_containing_values():
    items: list = [1]
    items.append(items)
    table: dict = {}
    table["me"] = table
    assert bounded_repr(items, 100) == repr(items) and bounded_repr(table, 100) == repr(table)


def test_bounded_repr_stops_at_the_limit():
    text = bounded_repr(bytes(500 << 20), 1_000)
    assert text.startswith("b'\\x00") and text.endswith("[repr of a bytes cut at 1,000 characters]")
    assert len(text) < 1_100
    assert bounded_repr([0] * (50 << 20), 100).endswith("[repr of a list cut at 100 characters]")


def test_a_pattern_copied_from_a_listing_finds_the_name_again(workspace: Path):
    os.mkdir(os.fsencode(workspace) + b"/d\xff")
    for name in (b"caf\xe9.txt", b"d\xff/x.txt", b"other.txt"):
        os.close(os.open(os.fsencode(workspace) + b"/" + name, os.O_WRONLY | os.O_CREAT, 0o644))
    note = "(note: 1 name was not valid UTF-8; shown with \\xNN escapes)"
    assert list_files(workspace, ListFilesArgs(pattern="caf\\xe9*")) == "caf\\xe9.txt\n" + note
    assert list_files(workspace, ListFilesArgs(pattern="d\\xff/*")) == "d\\xff/x.txt\n" + note
    assert list_files(workspace, ListFilesArgs(pattern="o*")) == "other.txt"
