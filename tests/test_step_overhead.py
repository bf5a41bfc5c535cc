"""Per-step work that does not grow with the conversation (issue 18): incremental pairing
validation, cached tool schemas, counted spills, the scripted provider's anchor + delta."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pseudoclaude_nb.context.estimate import estimate_request
from pseudoclaude_nb.context.spill import Ledger
from pseudoclaude_nb.messages import Message, PairingCheck, ToolCall, ToolResult, validate_request
from pseudoclaude_nb.providers.base import Request
from pseudoclaude_nb.providers.scripted import ScriptedProvider
from pseudoclaude_nb.tools.registry import ToolArgs, clean_schema


def _msg(kind: str, i: int, cid: str) -> Message:
    if kind == "user":
        return Message(role="user", content=f"u{i}")
    if kind == "text":
        return Message(role="assistant", content=f"a{i} 压缩")
    if kind == "calls":
        return Message(
            role="assistant", content="", tool_calls=(ToolCall(id=cid, name="t", arguments={"i": i}),)
        )
    return Message(role="user", tool_result=ToolResult(call_id=cid, content="r" * (i % 7)))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["user", "text", "calls", "result", "check", "replace"]),
            st.sampled_from(["c1", "c2", "c3"]),
        ),
        max_size=40,
    )
)
def test_incremental_pairing_equals_a_full_check(ops):
    check, msgs = PairingCheck(), []
    for i, (kind, cid) in enumerate(ops):
        if kind == "check":
            assert check(list(msgs), strict=False) == validate_request(list(msgs), strict=False)
            got, problems = check(list(msgs), strict=False)
            if problems:
                msgs = got  # the runner replaces the conversation with the repaired one
        elif kind == "replace":
            msgs = msgs[len(msgs) // 2 :]
        else:
            msgs.append(_msg(kind, i, f"{cid}-{i // 4}"))
    assert check(list(msgs), strict=False) == validate_request(list(msgs), strict=False)


def test_incremental_pairing_walks_only_new_messages(monkeypatch):
    import pseudoclaude_nb.messages as messages_mod

    msgs = [_msg("user" if i % 2 == 0 else "text", i, "") for i in range(10_000)]
    check = PairingCheck()
    check(msgs, strict=True)
    walked = []
    real = messages_mod.pairing_problems
    monkeypatch.setattr(messages_mod, "pairing_problems", lambda m: walked.append(len(m)) or real(m))
    msgs = msgs + [Message(role="user", content="next")]
    assert check(msgs, strict=True) == (msgs, [])
    assert walked == [1]


def test_scripted_estimate_is_anchor_plus_delta_and_equals_a_full_estimate():
    provider = ScriptedProvider({"turns": []})
    tools = [{"name": "t", "description": "d", "input_schema": {"type": "object"}}]
    rng = random.Random(3)
    msgs: list[Message] = []
    for step in range(60):
        msgs = msgs + [_msg(rng.choice(["user", "text"]), step, "") for _ in range(rng.randint(1, 3))]
        if step % 17 == 16:
            msgs = [Message(role="user", content="summary")] + msgs[-3:]  # a replace
        request = Request(system="sys", messages=msgs, tools=tools)
        assert provider._input_tokens(request) == estimate_request("sys", msgs, tools)


def test_ledger_counts_spills_without_recounting():
    ledger = Ledger()
    for i in range(100):
        ledger.record(f"c{i}", "spilled" if i % 3 == 0 else "kept")
    ledger.record("c0", "kept")  # frozen once made
    assert ledger.spilled == 34
    ledger.force("c1", "spilled")
    ledger.force("c0", "kept")
    assert ledger.spilled == 34
    ledger._decisions.clear()
    assert ledger.spilled == 34  # a counter, not a recount (the ledger owns its decisions)


def test_tool_schemas_are_built_once_per_model_and_copied():
    from pseudoclaude_nb.tools.registry import Tool, _schema_bytes

    class Args(ToolArgs):
        path: str
        limit: int | None = None

    tool = Tool("t", "d", Args, lambda a: "")
    first = tool.input_schema()
    hits = _schema_bytes.cache_info().hits
    second = tool.input_schema()
    assert first == second == clean_schema(Args.model_json_schema())
    assert _schema_bytes.cache_info().hits == hits + 1
    first["properties"].clear()
    assert tool.input_schema() == second  # each caller's own copy


def test_a_new_scripted_provider_counts_only_what_the_last_run_did_not(monkeypatch):
    """A run makes its own provider: the next run's first request must not walk the whole history."""
    import pseudoclaude_nb.providers.scripted as scripted_mod

    msgs = [_msg("user" if i % 2 == 0 else "text", i, "") for i in range(5_000)]
    first = ScriptedProvider({"turns": []})
    assert first._input_tokens(Request(system="s", messages=msgs)) == estimate_request("s", msgs, [])
    walked = []
    real = scripted_mod.message_bytes
    monkeypatch.setattr(scripted_mod, "message_bytes", lambda m: walked.append(m) or real(m))
    msgs = msgs + [Message(role="user", content="the next run")]
    second = ScriptedProvider({"turns": []})
    assert second._input_tokens(Request(system="s", messages=msgs)) == estimate_request("s", msgs, [])
    assert len(walked) == 1
    # Another conversation (no shared prefix) is counted in full, and correctly.
    other = [Message(role="user", content="elsewhere")] + msgs[1:]
    assert second._input_tokens(Request(system="s", messages=other)) == estimate_request("s", other, [])


def test_a_new_pairing_check_walks_only_what_the_last_run_did_not(monkeypatch):
    import pseudoclaude_nb.messages as messages_mod

    msgs = [_msg("user" if i % 2 == 0 else "text", i, "") for i in range(10_000)]
    PairingCheck()(msgs, strict=True)  # the last run's runner
    walked = []
    real = messages_mod.pairing_problems
    monkeypatch.setattr(messages_mod, "pairing_problems", lambda m: walked.append(len(m)) or real(m))
    msgs = msgs + [Message(role="user", content="next run")]
    assert PairingCheck()(msgs, strict=True) == (msgs, [])  # this run's
    assert walked == [1]
    # A broken conversation that shares nothing with it is still walked, and repaired.
    broken = [Message(role="user", tool_result=ToolResult(call_id="nope", content="r")), *msgs[:3]]
    got, problems = PairingCheck()(broken, strict=False)
    assert problems and got == validate_request(broken, strict=False)[0]
