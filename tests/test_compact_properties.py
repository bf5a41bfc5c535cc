"""Property tests (SPEC §8, issue 4): over random protocol-valid conversations, the tail
never starts inside a tool exchange, and after any sequence of spills and compactions the
conversation, every request and the log stay pairing-valid and in step.

Conversations mix user texts, assistant texts and assistant messages with 1–3 parallel
tool calls followed by their results (in any order), of random sizes and scripts.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pseudoclaude_nb.context.estimate import message_bytes, tokens_for_bytes
from pseudoclaude_nb.context.host import ContextHost
from pseudoclaude_nb.context.settings import CompactSettings
from pseudoclaude_nb.context.summarize import compacted, drop_oldest_exchange, summary_messages, tail_start
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import Message, ToolCall, ToolResult, Usage, pairing_problems
from pseudoclaude_nb.providers import ScriptedProvider
from pseudoclaude_nb.session import SessionWriter, load_session, new_session_dir
from tests.scripts import script

PREVIEW_START = "[Tool result too large"
TOO_LONG = {"error": "context_too_long"}

CHARS = st.sampled_from(["x", "é", "漢", "🙂", "line\n"])
SIZES = st.integers(min_value=0, max_value=1_500)


def body(char: str, size: int) -> str:
    return char * size


# --- random conversations ---------------------------------------------------------------------


@st.composite
def conversations(draw) -> list[Message]:
    ids = itertools.count()
    msgs = [Message(role="user", content=body(draw(CHARS), draw(SIZES)))]
    for _ in range(draw(st.integers(min_value=0, max_value=20))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "tools"]))
        if kind == "user":
            msgs.append(Message(role="user", content=body(draw(CHARS), draw(SIZES))))
        elif kind == "assistant":
            msgs.append(Message(role="assistant", content=body(draw(CHARS), draw(SIZES))))
        else:
            k = draw(st.integers(min_value=1, max_value=3))
            calls = tuple(
                ToolCall(id=f"call{next(ids)}", name="bash", arguments={"n": draw(SIZES)}) for _ in range(k)
            )
            msgs.append(
                Message(role="assistant", content=body("t", draw(st.integers(0, 50))), tool_calls=calls)
            )
            for j in draw(st.permutations(range(k))):
                content = body(draw(CHARS), draw(SIZES))
                msgs.append(
                    Message(role="user", tool_result=ToolResult(call_id=calls[j].id, content=content))
                )
    # Ids and clocks from the position (not uuid4 and time.time): every example repeats exactly.
    return [m.model_copy(update={"id": f"m{i:031d}", "ts": 1.0 + i}) for i, m in enumerate(msgs)]


def cost(msg: Message) -> int:
    return tokens_for_bytes(message_bytes(msg))


def oracle_start(msgs: list[Message], recent: int) -> int:
    """The spec's rule, written out: newest messages within ``recent`` (at least the last),
    then back to the call if the tail would begin with a tool result."""
    start, used = len(msgs) - 1, cost(msgs[-1])
    while start > 0 and used + cost(msgs[start - 1]) <= recent:
        start -= 1
        used += cost(msgs[start])
    while msgs[start].tool_result is not None:
        start -= 1
    return start


@settings(max_examples=200, deadline=None)
@given(conversations(), st.integers(min_value=0, max_value=3_000))
def test_tail_never_starts_inside_a_tool_exchange(msgs: list[Message], recent: int):
    assert pairing_problems(msgs) == []  # the generator makes valid conversations
    start = tail_start(msgs, recent)
    head, tail = msgs[:start], msgs[start:]
    assert 0 <= start <= len(msgs) - 1  # at least the last message
    assert tail[0].tool_result is None
    assert head + tail == msgs
    assert pairing_problems(head) == []
    assert pairing_problems(tail) == []
    assert start == oracle_start(msgs, recent)


@settings(max_examples=200, deadline=None)
@given(conversations(), st.integers(min_value=0, max_value=3_000))
def test_summary_requests_and_compacted_conversations_are_pairing_valid(msgs: list[Message], recent: int):
    start = tail_start(msgs, recent)
    head, tail = msgs[:start], msgs[start:]
    assert pairing_problems(summary_messages(head)) == []
    assert pairing_problems(compacted("a summary", tail)) == []
    shorter = head
    while shorter:
        dropped = drop_oldest_exchange(shorter)
        assert len(dropped) < len(shorter)
        assert shorter[len(shorter) - len(dropped) :] == dropped  # a suffix: whole exchanges dropped
        if dropped:
            assert dropped[0].role == "user" and dropped[0].tool_result is None
        assert pairing_problems(dropped) == []
        assert pairing_problems(summary_messages(dropped)) == []
        shorter = dropped


# --- random operations on a managed conversation ------------------------------------------------------

SETTINGS = CompactSettings(
    context_window=5_000,  # threshold 4,000 tokens: automatic compaction happens
    spill_bytes=3_000,
    spill_batch_bytes=5_000,
    summary_reserve=500,
    safety_margin=500,
    recent_tokens=150,
)
LOOSE = CompactSettings(**{**SETTINGS.__dict__, "spill_bytes": 8_000})  # a setting changed mid-session
RESULT_SIZES = st.integers(min_value=0, max_value=4_000)
TEXT_SIZES = st.integers(min_value=0, max_value=2_500)

OPERATIONS = st.one_of(
    st.tuples(st.just("user"), CHARS, TEXT_SIZES),
    st.tuples(st.just("assistant"), CHARS, TEXT_SIZES),
    st.tuples(st.just("tools"), st.lists(st.tuples(CHARS, RESULT_SIZES), min_size=1, max_size=3)),
    st.tuples(st.just("tools"), st.lists(st.tuples(CHARS, RESULT_SIZES), min_size=1, max_size=3)),
    st.tuples(
        st.just("batch"), st.lists(st.integers(min_value=1_500, max_value=3_000), min_size=2, max_size=3)
    ),
    st.tuples(st.just("request")),
    st.tuples(st.just("request")),
    st.tuples(st.just("usage"), st.integers(min_value=1, max_value=20_000)),
    st.tuples(st.just("compact")),
    st.tuples(st.just("spill_all")),
    st.tuples(st.just("settings"), st.sampled_from([SETTINGS, LOOSE])),
)
SUMMARY_ITEMS = st.sampled_from(["the summary", "the summary", TOO_LONG, ""])


def is_preview(msg: Message) -> bool:
    return msg.tool_result is not None and msg.tool_result.content.startswith(PREVIEW_START)


def check(conversation: Conversation, context: ContextHost, spill_bytes: int) -> None:
    messages = conversation.messages()
    assert pairing_problems(messages) == []
    assert messages and messages[0].role == "user"
    for msg in messages:
        if msg.tool_result is None:
            continue
        size = len(msg.tool_result.content.encode("utf-8"))
        # Nothing over spill_bytes reaches the conversation except as a preview.
        assert size <= spill_bytes or is_preview(msg)
        if context.shared.ledger.decision(msg.tool_result.call_id) == "spilled":
            assert is_preview(msg)


@pytest.mark.script_may_remain  # generated: the summaries are a supply for any sequence
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(OPERATIONS, min_size=1, max_size=30),
    st.lists(SUMMARY_ITEMS, min_size=1, max_size=6),
)
def test_any_sequence_of_spills_and_compactions_stays_valid(operations: list, pattern: list):
    ids = itertools.count()
    provider = ScriptedProvider(script(summaries=pattern * (120 // len(pattern) + 1)))
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp)
        session = new_session_dir(workspace)
        with SessionWriter(session, fsync=False) as writer:
            conversation = Conversation()
            writer.attach(conversation)
            context = ContextHost(
                conversation, SETTINGS, session_dir=session, workspace=workspace, writer=writer
            )
            context.shared.configure(SETTINGS, system="system", tools=[])
            conversation.add_user("start")
            for i in range(4):  # some history, so that compactions have something to summarize
                conversation.add_assistant_tool_calls("", [ToolCall(id=f"warm{i}", name="bash")])
                conversation.add_tool_result(f"warm{i}", "w" * 1_500)
                conversation.add_assistant("a" * 1_500)
                conversation.add_user("u" * 1_500)
            largest_limit = SETTINGS.spill_bytes
            for op in operations:
                kind = op[0]
                if kind == "user":
                    conversation.add_user(body(op[1], op[2]))
                elif kind == "assistant":
                    conversation.add_assistant(body(op[1], op[2]))
                elif kind == "tools":
                    calls = [ToolCall(id=f"call{next(ids)}", name="bash", arguments={}) for _ in op[1]]
                    conversation.add_assistant_tool_calls("", calls)
                    for call, (char, size) in zip(calls, op[1], strict=True):
                        conversation.add_result(
                            context.spiller.admit(call, ToolResult(call_id=call.id, content=body(char, size)))
                        )
                    context.spiller.after_tools(len(calls))
                elif kind == "batch":  # a tool batch, then the check before the next request
                    calls = [ToolCall(id=f"call{next(ids)}", name="read_file", arguments={}) for _ in op[1]]
                    conversation.add_assistant_tool_calls("", calls)
                    for call, size in zip(calls, op[1], strict=True):
                        conversation.add_result(
                            context.spiller.admit(call, ToolResult(call_id=call.id, content="b" * size))
                        )
                    context.spiller.after_tools(len(calls))
                    context.before_step(provider)
                elif kind == "request":
                    context.before_step(provider)
                elif kind == "usage":
                    context.shared.on_usage(Usage(input_tokens=op[1]), len(conversation))
                elif kind == "compact":
                    context.summarize(provider, trigger="manual")
                elif kind == "settings":
                    context.shared.configure(op[1], system="system", tools=[])
                    largest_limit = max(largest_limit, op[1].spill_bytes)
                else:
                    context.spiller.spill_all()
                check(conversation, context, largest_limit)

            for request in provider.requests:
                assert pairing_problems(request.messages) == []
                assert request.messages[0].role == "user"
            loaded = load_session(session)
            assert not loaded.repaired and not loaded.incomplete
            assert [m.to_dict() for m in loaded.messages] == [m.to_dict() for m in conversation.messages()]
            # The spill files hold what their entries say.
            for entry in loaded.spills:
                assert (session / entry.path).stat().st_size == entry.bytes
