"""Layer 2, the pure parts (SPEC §8.2): threshold, recent tail, dropping whole exchanges,
the summary request and the compacted conversation."""

from __future__ import annotations

import pytest

from pseudoclaude_nb.context.settings import CompactSettings
from pseudoclaude_nb.context.summarize import (
    ACKNOWLEDGEMENT,
    BOUNDARY_REMINDER,
    SUMMARY_INSTRUCTION,
    compacted,
    drop_oldest_exchange,
    freed_fraction,
    layer2_threshold,
    summary_messages,
    tail_start,
)
from pseudoclaude_nb.messages import Message, ToolCall, ToolResult, pairing_problems

SECTIONS = [
    "Confirmed requirements",
    "Agent inferences (unverified)",
    "Unresolved problems",
    "Files and changes",
    "Next steps",
]


# --- messages of known cost -----------------------------------------------------------------


def user(text: str) -> Message:
    return Message(role="user", content=text)


def assistant(text: str) -> Message:
    return Message(role="assistant", content=text)


def ten_tokens_user(i: int) -> Message:
    return user(f"u{i:02d}".ljust(31, "."))  # 4 + 31 = 35 bytes = exactly 10 tokens


def ten_tokens_assistant(i: int) -> Message:
    return assistant(f"a{i:02d}".ljust(26, "."))  # 9 + 26 = 35 bytes = exactly 10 tokens


def calls(*ids: str, text: str = "") -> Message:
    return Message(role="assistant", content=text, tool_calls=tuple(ToolCall(id=i, name="bash") for i in ids))


def result(call_id: str, size: int = 10) -> Message:
    return Message(role="user", tool_result=ToolResult(call_id=call_id, content="r" * size))


def alternating(n: int) -> list[Message]:
    return [ten_tokens_user(i) if i % 2 == 0 else ten_tokens_assistant(i) for i in range(n)]


# --- threshold and settings ---------------------------------------------------------------


def test_layer2_threshold_numbers_of_the_spec():
    assert layer2_threshold(200_000, 20_000, 13_000) == 167_000
    assert layer2_threshold(128_000, 20_000, 13_000) == 95_000
    assert CompactSettings().threshold == 167_000
    assert CompactSettings(context_window=128_000).threshold == 95_000
    assert (
        CompactSettings(context_window=50_000, summary_reserve=1_000, safety_margin=1_000).threshold == 48_000
    )


def test_default_settings_are_the_spec_numbers():
    s = CompactSettings()
    assert (s.context_window, s.spill_bytes, s.spill_batch_bytes) == (200_000, 50_000, 200_000)
    assert (s.summary_reserve, s.safety_margin, s.recent_tokens, s.breaker_limit) == (
        20_000,
        13_000,
        20_000,
        3,
    )


@pytest.mark.parametrize(
    ("settings", "tail"),
    [
        (CompactSettings(), 20_000),  # threshold 167,000: recent_tokens applies
        (CompactSettings(context_window=128_000), 20_000),
        (CompactSettings(context_window=60_000), 13_500),  # threshold 27,000: half of it
        (CompactSettings(context_window=60_000, recent_tokens=500), 500),
        (CompactSettings(context_window=33_001), 1),  # threshold 1
        (CompactSettings(context_window=20_000), 1),  # threshold below zero: still ≥ 1
    ],
)
def test_tail_tokens_is_capped_by_half_the_threshold(settings: CompactSettings, tail: int):
    assert settings.tail_tokens == tail


# --- tail_start ----------------------------------------------------------------------------------


def test_tail_of_nothing_and_of_one_message():
    assert tail_start([], 100) == 0
    assert tail_start([user("hi")], 100) == 0


def test_tail_takes_the_newest_messages_up_to_recent_tokens():
    msgs = alternating(10)  # 10 tokens each
    assert tail_start(msgs, 35) == 7
    assert tail_start(msgs, 30) == 7
    assert tail_start(msgs, 29) == 8
    assert tail_start(msgs, 1_000) == 0


def test_tail_keeps_at_least_the_last_message():
    msgs = [*alternating(4), user("x" * 10_000)]
    assert tail_start(msgs, 5) == 4
    assert tail_start(msgs, 0) == 4


def test_tail_never_starts_on_a_tool_result():
    msgs = [
        ten_tokens_user(0),
        calls("a", "b", text="looking"),
        result("a", 3_000),
        result("b", 30),  # ≈ 10 tokens
        ten_tokens_assistant(4),
    ]
    # The budget covers the second result and the answer; the tail extends back to the call.
    start = tail_start(msgs, 25)
    assert start == 1
    assert msgs[start].tool_calls
    tail = msgs[start:]
    assert pairing_problems(tail) == []
    assert pairing_problems(msgs[:start]) == []


def test_tail_ending_in_results_extends_to_their_call():
    msgs = [
        ten_tokens_user(0),
        ten_tokens_assistant(1),
        ten_tokens_user(2),
        calls("a", "b", "c"),
        result("a"),
        result("b"),
        result("c"),
    ]
    start = tail_start(msgs, 1)
    assert start == 3


# --- drop_oldest_exchange ---------------------------------------------------------------------------


def test_drop_oldest_exchange_keeps_calls_with_results():
    head = [
        user("first"),
        calls("a", "b"),
        result("a"),
        result("b"),
        assistant("found it"),
        user("second"),
        calls("c"),
        result("c"),
        assistant("done"),
        user("third"),
    ]
    once = drop_oldest_exchange(head)
    assert once == head[5:]
    twice = drop_oldest_exchange(once)
    assert twice == head[9:]
    assert drop_oldest_exchange(twice) == []
    assert drop_oldest_exchange([]) == []
    for part in (once, twice):
        assert part[0].role == "user" and part[0].tool_result is None
        assert pairing_problems(part) == []


def test_drop_oldest_exchange_skips_results_that_look_like_user_turns():
    # Tool results are user-role messages; the next exchange begins only at a user *text*.
    head = [user("first"), calls("a"), result("a"), calls("b"), result("b"), user("next"), assistant("ok")]
    assert drop_oldest_exchange(head) == head[5:]


# --- the summary request and the new conversation ---------------------------------------------------


def test_summary_instruction_has_the_five_evidence_tiers_in_order():
    positions = [SUMMARY_INSTRUCTION.index(f"## {name}") for name in SECTIONS]
    assert positions == sorted(positions)
    assert "source" in SUMMARY_INSTRUCTION  # confirmed requirements carry their source


def test_summary_messages_are_the_head_then_the_instruction():
    head = [user("do X"), calls("a"), result("a"), assistant("did X")]
    msgs = summary_messages(head)
    assert msgs[:-1] == head
    assert msgs[-1].role == "user" and msgs[-1].content == SUMMARY_INSTRUCTION
    assert pairing_problems(msgs) == []
    assert len(head) == 4  # the head itself is not changed


def test_compacted_conversation_shape():
    tail = [calls("a", text="checking"), result("a"), assistant("all good")]
    new = compacted("  The summary.\n\n", tail)
    assert [m.role for m in new[:3]] == ["user", "assistant", "user"]
    first = new[0].content
    assert first.startswith("<summary>\nThe summary.\n</summary>")
    assert "continues" in first
    assert new[1].content == ACKNOWLEDGEMENT
    assert new[2].content == BOUNDARY_REMINDER
    reminder = new[2].content.lower()
    assert "not the full text of files, errors or tool output" in reminder
    assert "re-read" in reminder
    assert new[3:] == tail  # the same messages, ids included
    assert all(m.tool_result is None and not m.tool_calls for m in new[:3])
    assert pairing_problems(new) == []


def test_freed_fraction():
    assert freed_fraction(1_000, 900) == pytest.approx(0.1)
    assert freed_fraction(1_000, 1_000) == 0.0
    assert freed_fraction(1_000, 1_100) < 0
    assert freed_fraction(0, 0) == 0.0
