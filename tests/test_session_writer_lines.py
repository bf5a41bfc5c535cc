"""The writer's kept lines (SPEC §6.2, §15): a replace reuses what appends already encoded.

A snapshot entry built from a kept line must be byte for byte what encoding the entry
gives, stay redacted, and follow changes: a message replaced by an edited copy (a spill
preview keeps the message id) is encoded afresh, and a key set in the environment after a
line was kept is redacted from the next replace.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import ToolCall, ToolResult
from pseudoclaude_nb.session import entries, load_session
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir


@pytest.fixture
def session(tmp_path: Path):
    folder = new_session_dir(tmp_path)
    conversation = Conversation()
    with SessionWriter(folder, model="m-1", fsync=False) as writer:
        writer.attach(conversation)
        yield folder, conversation, writer


def _log(folder: Path) -> list[dict]:
    return [orjson.loads(x) for x in (folder / "conversation.jsonl").read_bytes().splitlines()]


def _fill(conversation: Conversation) -> None:
    conversation.add_user('héllo ☕ "quoted" \\ back\nslash')
    call = ToolCall(id="c1", name="bash", arguments={"command": "echo 'x'", "n": [1, 2.5, None]})
    conversation.add_assistant_tool_calls("running", [call])
    conversation.add_tool_result("c1", "out\u2028put\x00 and \t tabs", is_error=True)
    conversation.add_assistant("done")


def test_snapshot_entries_are_exactly_the_encoded_entries(session):
    folder, conversation, _writer = session
    _fill(conversation)
    messages = conversation.messages()
    conversation.replace("edit", messages)
    log = _log(folder)
    marker = next(e for e in log if e["type"] == "replace")
    snapshot = [e for e in log if e["type"] == "message" and e.get("replace_id") == marker["replace_id"]]
    assert len(snapshot) == 4
    for entry, message in zip(snapshot, messages, strict=True):
        expected = entries.message_entry(message, replace_id=marker["replace_id"])
        assert entry == expected
    # Byte for byte too: the line is what orjson gives for that entry.
    raw = (folder / "conversation.jsonl").read_bytes().splitlines()
    first = raw[len(log) - 4]
    assert first + b"\n" == entries.encode(
        entries.message_entry(messages[0], replace_id=marker["replace_id"])
    )
    assert load_session(folder).messages == messages


def test_the_model_stamp_goes_on_the_first_entry_only(session):
    folder, conversation, _writer = session
    conversation.replace("edit", [])
    _fill(conversation)
    conversation.replace("edit", conversation.messages())
    stamped = [e for e in _log(folder) if "model" in e]
    assert len(stamped) == 1 and stamped[0]["model"] == "m-1"


def test_a_copy_with_the_same_id_is_encoded_afresh(session):
    folder, conversation, _writer = session
    _fill(conversation)
    messages = conversation.messages()
    result = messages[2]
    preview = result.model_copy(update={"tool_result": ToolResult(call_id="c1", content="[preview]")})
    conversation.replace("snapshot", [*messages[:2], preview, messages[3]])
    assert load_session(folder).messages[2].tool_result.content == "[preview]"


def test_a_key_set_after_the_append_is_redacted_in_the_next_replace(session, monkeypatch):
    folder, conversation, _writer = session
    key = "sk-test-" + "k" * 40
    conversation.add_user(f"my key is {key} (not set in the environment yet)")
    monkeypatch.setenv("OPENAI_API_KEY", key)
    conversation.replace("edit", conversation.messages())
    data = (folder / "conversation.jsonl").read_bytes()
    last = data.splitlines()[-1]
    assert key.encode() not in last
    assert b"REDACTED" in last


def test_secrets_in_kept_lines_stay_redacted(session):
    folder, conversation, _writer = session
    conversation.add_user("token ghp_" + "a" * 36 + " here")
    conversation.replace("edit", conversation.messages())
    conversation.replace("edit", conversation.messages())
    assert b"ghp_" + b"a" * 36 not in (folder / "conversation.jsonl").read_bytes()
    assert conversation.messages()[0].content.startswith("token ghp_")  # memory keeps the original


# --- a replace encodes nothing it has written ---------------------------------------------------


class _Encodes:
    """Counts the entries the writer encodes (``entries.message_entry`` as the writer calls it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = entries.message_entry

        def counting(*args, **kwargs):
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(entries, "message_entry", counting)


def _snapshot_lines(folder: Path) -> list[bytes]:
    """The last replace's snapshot entries, as raw lines."""
    raw = (folder / "conversation.jsonl").read_bytes().splitlines()
    marker = max(i for i, line in enumerate(raw) if line.startswith(b'{"v":1,"type":"replace"'))
    count = orjson.loads(raw[marker])["count"]
    return raw[marker + 1 : marker + 1 + count]


def test_a_replace_after_appends_encodes_none_of_them(session, monkeypatch):
    folder, conversation, _writer = session
    _fill(conversation)
    messages = conversation.messages()
    encodes = _Encodes(monkeypatch)
    conversation.replace("edit", messages)
    assert encodes.count == 0
    snapshot = _snapshot_lines(folder)
    rid = orjson.loads(snapshot[0])["replace_id"]
    # The first entry this writer wrote with a model carries the stamp (the first append), so
    # none of the snapshot entries does: each is exactly the encoded entry.
    assert [line + b"\n" for line in snapshot] == [
        entries.encode(entries.message_entry(m, replace_id=rid)) for m in messages
    ]


def test_a_second_replace_encodes_only_what_was_appended_since(session, monkeypatch):
    folder, conversation, _writer = session
    _fill(conversation)
    conversation.replace("edit", conversation.messages())
    encodes = _Encodes(monkeypatch)
    conversation.add_assistant("one more")  # appended after the snapshot: kept too
    conversation.replace("compact", conversation.messages()[1:])
    assert encodes.count == 1  # only the append above; the replace encoded nothing
    second = _snapshot_lines(folder)
    rid = orjson.loads(second[0])["replace_id"]
    assert [line + b"\n" for line in second] == [
        entries.encode(entries.message_entry(m, replace_id=rid)) for m in conversation.messages()
    ]
    assert load_session(folder).messages == conversation.messages()
