"""Messages (SPEC §4): round trips, usage totals, and the one request validator."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from pseudoclaude_nb.errors import ProtocolError
from pseudoclaude_nb.messages import (
    Message,
    ToolCall,
    ToolResult,
    Usage,
    pairing_problems,
    repair_pairing,
    validate_request,
)


def user(text: str, id: str | None = None) -> Message:
    return Message(role="user", content=text, **({"id": id} if id else {}))


def asst(text: str = "", *call_ids: str, id: str | None = None) -> Message:
    calls = tuple(ToolCall(id=c, name="read_file", arguments={"path": f"{c}.txt"}) for c in call_ids)
    return Message(role="assistant", content=text, tool_calls=calls, **({"id": id} if id else {}))


def result(call_id: str, content: str = "ok", id: str | None = None) -> Message:
    return Message(
        role="user", tool_result=ToolResult(call_id=call_id, content=content), **({"id": id} if id else {})
    )


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


# --- round trips ---------------------------------------------------------------------------


def test_message_round_trip_with_tool_calls_and_unicode():
    msg = Message(
        role="assistant",
        content='café ☕ \n"quoted"',
        tool_calls=(
            ToolCall(
                id="c1",
                name="write_file",
                arguments={"path": "a.txt", "content": "x\ny", "n": [1, {"k": None}]},
            ),
            ToolCall(id="c2", name="bash", arguments={}),
        ),
        ts=1234.5,
    )
    data = msg.to_dict()
    assert data["tool_calls"][0] == {
        "id": "c1",
        "name": "write_file",
        "arguments": {"path": "a.txt", "content": "x\ny", "n": [1, {"k": None}]},
    }
    assert data["tool_result"] is None
    # Through JSON too: the dict must be plain data.
    again = Message.from_dict(json.loads(json.dumps(data)))
    assert again == msg
    assert again.tool_calls[1].arguments == {}


def test_message_round_trip_with_tool_result():
    msg = Message(role="user", tool_result=ToolResult(call_id="c9", content="boom", is_error=True))
    data = msg.to_dict()
    assert data["tool_result"] == {"call_id": "c9", "content": "boom", "is_error": True}
    assert data["content"] == ""
    back = Message.from_dict(data)
    assert back == msg
    assert back.is_tool_result and back.tool_result.is_error


def test_toolcall_toolresult_usage_round_trips():
    call = ToolCall(id="x", name="grep", arguments={"pattern": "a|b"})
    assert ToolCall.from_dict(call.to_dict()) == call
    res = ToolResult(call_id="x", content="1 match")
    assert ToolResult.from_dict(res.to_dict()) == res
    assert res.to_dict()["is_error"] is False
    usage = Usage(input_tokens=10, output_tokens=3, cache_creation_input_tokens=5, cache_read_input_tokens=7)
    assert usage.to_dict() == {
        "input_tokens": 10,
        "output_tokens": 3,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 7,
    }
    assert Usage.from_dict(usage.to_dict()) == usage


def test_message_ids_are_unique_uuid_hex():
    a, b = user("a"), user("a")
    assert a.id != b.id
    assert len(a.id) == 32 and int(a.id, 16) >= 0


def test_message_is_frozen():
    msg = user("hello")
    with pytest.raises(ValidationError):
        msg.content = "changed"  # type: ignore[misc]


def test_role_is_restricted():
    with pytest.raises(ValidationError):
        Message.from_dict({"role": "system", "content": "x"})


# --- usage -----------------------------------------------------------------------------------


def test_prompt_total_includes_cache_fields_but_not_output():
    usage = Usage(
        input_tokens=100, output_tokens=50, cache_creation_input_tokens=20, cache_read_input_tokens=3000
    )
    assert usage.prompt_total == 3120


def test_prompt_total_defaults():
    assert Usage(input_tokens=7, output_tokens=1).prompt_total == 7
    assert Usage().prompt_total == 0


def test_usage_addition_sums_every_field():
    a = Usage(input_tokens=1, output_tokens=2, cache_creation_input_tokens=3, cache_read_input_tokens=4)
    b = Usage(input_tokens=10, output_tokens=20, cache_creation_input_tokens=30, cache_read_input_tokens=40)
    total = a + b
    assert total == Usage(
        input_tokens=11, output_tokens=22, cache_creation_input_tokens=33, cache_read_input_tokens=44
    )
    assert total.prompt_total == a.prompt_total + b.prompt_total


# --- the validator ------------------------------------------------------------------------


def test_valid_parallel_calls_pass_untouched():
    msgs = [user("go"), asst("two at once", "a", "b"), result("b"), result("a"), asst("done")]
    assert pairing_problems(msgs) == []
    assert repair_pairing(msgs) == msgs
    out, problems = validate_request(msgs, strict=True)
    assert out is msgs or out == msgs
    assert problems == []


def test_empty_and_plain_conversations_are_valid():
    assert pairing_problems([]) == []
    assert pairing_problems([user("a"), asst("b"), user("c")]) == []


def test_call_without_result():
    msgs = [user("go"), asst("", "a"), user("next")]
    problems = pairing_problems(msgs)
    assert len(problems) == 1 and "'a'" in problems[0] and "no result" in problems[0]
    repaired = repair_pairing(msgs)
    # The call-only assistant message has nothing left: it is dropped, not given a result.
    assert ids(repaired) == [msgs[0].id, msgs[2].id]
    assert pairing_problems(repaired) == []


def test_call_without_result_at_the_end():
    msgs = [user("go"), asst("let me look", "a")]
    problems = pairing_problems(msgs)
    assert problems and problems[-1].startswith("end:") and "a" in problems[-1]
    repaired = repair_pairing(msgs)
    # Text is kept, the call is dropped; no result is invented.
    assert len(repaired) == 2
    assert repaired[1].id == msgs[1].id
    assert repaired[1].content == "let me look"
    assert repaired[1].tool_calls == ()
    assert not any(m.tool_result for m in repaired)
    assert pairing_problems(repaired) == []


def test_result_without_call():
    msgs = [user("go"), result("ghost"), asst("hm")]
    problems = pairing_problems(msgs)
    assert len(problems) == 1 and "ghost" in problems[0]
    repaired = repair_pairing(msgs)
    assert ids(repaired) == [msgs[0].id, msgs[2].id]
    assert pairing_problems(repaired) == []


def test_duplicate_result():
    msgs = [user("go"), asst("", "a"), result("a", "first"), result("a", "second"), asst("done")]
    problems = pairing_problems(msgs)
    assert len(problems) == 1 and "already answered" in problems[0]
    repaired = repair_pairing(msgs)
    assert ids(repaired) == [msgs[0].id, msgs[1].id, msgs[2].id, msgs[4].id]
    assert repaired[2].tool_result.content == "first"
    assert pairing_problems(repaired) == []


def test_results_interleaved_by_another_message():
    msgs = [user("go"), asst("both", "a", "b"), result("a"), user("interjection"), result("b"), asst("done")]
    problems = pairing_problems(msgs)
    assert len(problems) == 2
    assert "no result" in problems[0] and "'b'" in problems[0]
    assert "b" in problems[1] and "unknown" in problems[1]
    repaired = repair_pairing(msgs)
    assert pairing_problems(repaired) == []
    # Call a keeps its result; call b (answered too late) and its result are dropped.
    assert ids(repaired) == [msgs[0].id, msgs[1].id, msgs[2].id, msgs[3].id, msgs[5].id]
    assert [c.id for c in repaired[1].tool_calls] == ["a"]


def test_partial_parallel_results_keep_answered_calls_only():
    msgs = [user("go"), asst("", "a", "b", "c"), result("c"), result("a"), asst("ok")]
    assert pairing_problems(msgs)
    repaired = repair_pairing(msgs)
    assert [c.id for c in repaired[1].tool_calls] == ["a", "c"]
    assert pairing_problems(repaired) == []


def test_validate_request_strict_raises_protocol_error():
    msgs = [user("go"), asst("", "a")]
    with pytest.raises(ProtocolError, match="tool pairing") as info:
        validate_request(msgs, strict=True)
    assert "a" in str(info.value)


@pytest.mark.parametrize(
    "msgs",
    [
        pytest.param([user("go"), asst("", "a"), user("next")], id="call-without-result"),
        pytest.param([user("go"), result("ghost")], id="result-without-call"),
        pytest.param([user("go"), asst("", "a"), result("a"), result("a")], id="duplicate-result"),
        pytest.param([user("go"), asst("", "a", "b"), result("a"), user("x"), result("b")], id="interleaved"),
    ],
)
def test_validate_request_lenient_repairs_and_reports(msgs):
    with pytest.raises(ProtocolError):
        validate_request(msgs, strict=True)
    out, problems = validate_request(msgs, strict=False)
    assert problems == pairing_problems(msgs) and problems
    assert pairing_problems(out) == []
    assert out == repair_pairing(msgs)
    # The input list itself is not modified.
    assert pairing_problems(msgs) == problems


def test_repair_never_invents_results():
    msgs = [user("go"), asst("", "a", "b"), result("a"), user("x"), asst("", "c")]
    out = repair_pairing(msgs)
    before = {m.tool_result.call_id for m in msgs if m.tool_result}
    after = {m.tool_result.call_id for m in out if m.tool_result}
    assert after <= before


def test_repair_output_is_valid_with_duplicate_call_ids():
    dup = Message(
        role="assistant",
        tool_calls=(ToolCall(id="a", name="x"), ToolCall(id="a", name="x")),
    )
    msgs = [user("go"), dup, result("a")]
    out, problems = validate_request(msgs, strict=False)
    assert problems
    assert pairing_problems(out) == []


def test_repair_output_is_valid_with_user_tool_calls():
    bad = Message(role="user", content="hi", tool_calls=(ToolCall(id="a", name="x"),))
    out, problems = validate_request([bad], strict=False)
    assert problems
    assert pairing_problems(out) == []
