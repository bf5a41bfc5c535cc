"""Log entries as values (issue 45, item 4): one frozen type per kind, written through one
``record(entry)`` and read back by the one parser into the same type, with the same fields.

The bytes on disk are those of SPEC §6.1: the keys in the order the writer always wrote them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import orjson
import pytest

from pseudoclaude_nb.messages import Usage
from pseudoclaude_nb.session import entries
from pseudoclaude_nb.session.entries import (
    CompactEntry,
    NoteEntry,
    PinEntry,
    RolloverEntry,
    SpendEntry,
    SpillEntry,
    UnpinEntry,
    UsageEntry,
    parse_line,
)
from pseudoclaude_nb.session.record import NO_RECORD
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir

USAGE = Usage(input_tokens=5, output_tokens=2, cache_read_input_tokens=9)
VALUES = [
    NoteEntry.new("hello", "warning"),
    UsageEntry.new(USAGE, messages=3, model="model-a"),
    SpendEntry.new(USAGE, purpose="summary", model="model-b"),
    SpillEntry.new(call_id="c1", tool="bash", path="tool-results/c1.txt", bytes=70_000, sha256="0" * 64),
    CompactEntry.new(trigger="auto", before_tokens=900, after_tokens=300, ok=True, error=None),
    RolloverEntry.new(
        phase="commit",
        reason="model",
        handoff={"agent_inferences": ["x"]},
        related_files=[{"path": "a.py", "role": "spec", "note": "", "exists": True}],
        call_id="c2",
        message_uuid="m1",
        before_tokens=100,
        after_tokens=10,
    ),
]
# The key order of each kind's line, as SPEC §6.1 and every earlier version wrote it.
KEYS = {
    "note": ["v", "type", "id", "ts", "text", "level"],
    "usage": [
        "v",
        "type",
        "id",
        "ts",
        "input_tokens",
        "output_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "messages",
        "model",
    ],
    "spill": ["v", "type", "id", "ts", "call_id", "tool", "path", "bytes", "sha256"],
    "compact": ["v", "type", "id", "ts", "trigger", "before_tokens", "after_tokens", "ok", "error"],
    "rollover": [
        "v",
        "type",
        "id",
        "ts",
        "phase",
        "reason",
        "handoff",
        "related_files",
        "call_id",
        "message_uuid",
        "before_tokens",
        "after_tokens",
    ],
}


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_each_kind_is_written_by_record_and_read_back_as_the_same_value(workspace: Path, value):
    folder = new_session_dir(workspace)
    with SessionWriter(folder, fsync=False) as writer:
        writer.record(value)
    line = (folder / "conversation.jsonl").read_bytes().splitlines()[-1]
    read = parse_line(line)
    assert type(read) is type(value)
    # Every field but the line itself reads back as written.
    for f in dataclasses.fields(value):
        if f.name != "raw":
            assert getattr(read, f.name) == getattr(value, f.name), f.name
    kind = orjson.loads(line)["type"]
    if kind in KEYS:
        assert list(orjson.loads(line)) == KEYS[kind]
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.raw = {}  # type: ignore[misc]


def test_pins_are_written_as_values_and_read_by_apply_pin(workspace: Path):
    folder = new_session_dir(workspace)
    with SessionWriter(folder, fsync=False) as writer:
        writer.record(PinEntry.new("keep tests green", id="a" * 32, ts=1.0))
        writer.record(PinEntry.new("second", id="b" * 32, ts=2.0))
        writer.record(UnpinEntry.new("a" * 32))
    ops = [orjson.loads(line) for line in (folder / "conversation.jsonl").read_bytes().splitlines()]
    assert [p.text for p in entries.effective_pins(ops)] == ["second"]


def test_the_torn_line_note_keeps_its_kind_right_after_its_type():
    line = entries.encode(NoteEntry.torn().raw)
    assert line.startswith(b'{"v":1,"type":"note","kind":"torn-line",')
    read = parse_line(line)
    assert isinstance(read, NoteEntry) and read.kind == entries.TORN_NOTE and read.level == "warning"


def test_a_context_without_a_session_drops_what_it_records():
    NO_RECORD.record(NoteEntry.new("nowhere"))  # nothing to write to: no error
