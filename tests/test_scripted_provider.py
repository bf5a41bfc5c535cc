"""The scripted provider (SPEC §11) and the stream assembler (SPEC §11, §16 "stream cut").

Everything here drives the real ``ScriptedProvider``; the only hand-made streams are lists
of the neutral events fed to ``StreamAssembler`` directly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pseudoclaude_nb.context.estimate import estimate_request
from pseudoclaude_nb.errors import ProviderError, ScriptError, StreamError
from pseudoclaude_nb.messages import Message, ToolCall, ToolResult, Usage
from pseudoclaude_nb.providers import ScriptedProvider, make_provider
from pseudoclaude_nb.providers.base import (
    Request,
    Stop,
    StreamAssembler,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageEvent,
    collect,
)
from tests.scripts import script, turn

SYSTEM = "You are a test."


def _request(*texts: str, purpose: str = "agent") -> Request:
    return Request(system=SYSTEM, messages=[Message(role="user", content=t) for t in texts], purpose=purpose)


def _events(provider: ScriptedProvider, request: Request) -> list:
    return list(provider.stream(request))


# --- loading -------------------------------------------------------------------------------


def test_script_from_dict_plays_its_turns_in_order():
    provider = ScriptedProvider(script(turn("first"), turn("second")))
    assert provider.model == "scripted-test"
    assert provider.context_window == 200_000
    assert collect(provider.stream(_request("a"))).text == "first"
    assert collect(provider.stream(_request("b"))).text == "second"
    assert provider.remaining_turns == 0
    assert [r.messages[0].content for r in provider.requests] == ["a", "b"]


def test_script_from_file(tmp_path: Path):
    path = tmp_path / "s.json"
    data = script(turn("from a file", ("read_file", {"path": "x.txt"}, "c1")), context_window=64_000)
    data["description"] = "extra top-level keys are allowed (comments)"
    path.write_text(json.dumps(data), encoding="utf-8")
    provider = ScriptedProvider(path)
    assert provider.source == str(path)
    assert provider.context_window == 64_000
    response = collect(provider.stream(_request("go")))
    assert response.text == "from a file"
    assert response.tool_calls == [ToolCall(id="c1", name="read_file", arguments={"path": "x.txt"})]


def test_make_provider_scripted_reads_the_script_path_and_overrides_the_model(tmp_path: Path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(script(turn("hi"))), encoding="utf-8")
    provider = make_provider("scripted", script=str(path), model="other-model", context_window=1234)
    assert isinstance(provider, ScriptedProvider)
    assert (provider.model, provider.context_window) == ("other-model", 1234)


def test_missing_script_file_names_the_path(tmp_path: Path):
    path = tmp_path / "nope.json"
    with pytest.raises(ScriptError) as info:
        ScriptedProvider(path)
    assert str(path) in str(info.value)
    assert "does not exist" in str(info.value)


def test_bad_json_names_the_file_and_the_position(tmp_path: Path):
    path = tmp_path / "bad.json"
    path.write_text('{"turns": [\n  {"text": "ok"},\n  {"text": oops}\n]}', encoding="utf-8")
    with pytest.raises(ScriptError) as info:
        ScriptedProvider(path)
    message = str(info.value)
    assert str(path) in message
    assert "not valid JSON" in message
    assert "line 3" in message  # where the problem is


def test_missing_turns_is_named(tmp_path: Path):
    path = tmp_path / "noturns.json"
    path.write_text(json.dumps({"model": "m"}), encoding="utf-8")
    with pytest.raises(ScriptError) as info:
        ScriptedProvider(path)
    message = str(info.value)
    assert str(path) in message
    assert "malformed" in message
    assert "turns" in message
    assert "required" in message.lower()


def test_unknown_key_in_a_turn_is_named_with_its_index(tmp_path: Path):
    path = tmp_path / "typo.json"
    bad = {"turns": [{"text": "fine"}, {"text": "x", "tool_call": [{"name": "bash"}]}]}
    path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(ScriptError) as info:
        ScriptedProvider(path)
    message = str(info.value)
    assert str(path) in message
    assert "turns.1.tool_call" in message  # the second turn, and the offending key


def test_tool_call_without_name_is_named_with_its_location(tmp_path: Path):
    path = tmp_path / "noname.json"
    bad = {"turns": [{"text": "x", "tool_calls": [{"arguments": {"command": "ls"}}]}]}
    path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(ScriptError) as info:
        ScriptedProvider(path)
    message = str(info.value)
    assert str(path) in message
    assert "turns.0.tool_calls.0.name" in message


def test_inline_script_errors_say_it_is_inline():
    with pytest.raises(ScriptError) as info:
        ScriptedProvider({"turns": "not a list"})
    assert "<inline script>" in str(info.value)
    assert "turns" in str(info.value)


def test_script_error_is_a_provider_error():
    # The runner and the magics treat provider failures alike.
    assert issubclass(ScriptError, ProviderError)


# --- running out ----------------------------------------------------------------------------


def test_running_out_names_the_script_the_request_the_count_and_the_fix(tmp_path: Path):
    path = tmp_path / "short.json"
    path.write_text(json.dumps(script(turn("one"), turn("two"))), encoding="utf-8")
    provider = ScriptedProvider(path)
    collect(provider.stream(_request("1")))
    collect(provider.stream(_request("2")))
    with pytest.raises(ScriptError) as info:
        collect(provider.stream(_request("3")))
    message = str(info.value)
    assert str(path) in message
    assert "ran out" in message
    assert "#3" in message  # which request
    assert "has 2" in message  # how many turns the script has
    assert "Add entries to 'turns'" in message  # how to fix
    # Running out never yields a default answer, and does not count as a turn taken.
    assert provider.turns_used == 2


def test_empty_script_runs_out_on_the_first_request():
    provider = ScriptedProvider(script())
    with pytest.raises(ScriptError, match=r"#1 needs turns\[0\], but the script has 0"):
        list(provider.stream(_request("hi")))


def test_summaries_are_consumed_by_complete_with_purpose_summary():
    provider = ScriptedProvider(script(turn("agent turn"), summaries=["S1", "S2"]))
    first = provider.complete(_request("old stuff", purpose="summary"))
    second = provider.complete(_request("more old stuff", purpose="summary"))
    assert (first.text, second.text) == ("S1", "S2")
    assert first.stop_reason == "end_turn"
    assert first.tool_calls == []
    assert first.usage.input_tokens > 0
    # Summaries do not eat agent turns, and agent turns do not eat summaries.
    assert provider.turns_used == 0
    assert collect(provider.stream(_request("go"))).text == "agent turn"
    with pytest.raises(ScriptError) as info:
        provider.complete(_request("again", purpose="summary"))
    message = str(info.value)
    assert "summary #3" in message
    assert "has 2" in message
    assert "'summaries'" in message


def test_summary_can_also_be_streamed():
    provider = ScriptedProvider(script(summaries=["streamed summary text here please"]))
    assert (
        collect(provider.stream(_request("x", purpose="summary"))).text == "streamed summary text here please"
    )
    assert provider.summaries_used == 1


def test_memory_ops_are_consumed_by_complete_with_purpose_memory():
    ops = [
        {
            "op": "create",
            "level": "project",
            "name": "pnpm",
            "description": "d",
            "type": "preference",
            "body": "b",
        }
    ]
    provider = ScriptedProvider(script(memory_ops=[ops, []]))
    assert json.loads(provider.complete(_request("remember", purpose="memory")).text) == ops
    assert json.loads(provider.complete(_request("nothing", purpose="memory")).text) == []
    with pytest.raises(ScriptError) as info:
        provider.complete(_request("more", purpose="memory"))
    message = str(info.value)
    assert "memory update #3" in message
    assert "has 2" in message
    assert "'memory_ops'" in message
    assert provider.summaries_used == 0
    assert provider.turns_used == 0


def test_no_summaries_is_an_error_not_an_empty_summary():
    provider = ScriptedProvider(script())
    with pytest.raises(ScriptError, match="summaries"):
        provider.complete(_request("old", purpose="summary"))


# --- usage ------------------------------------------------------------------------------------


def test_missing_usage_is_estimated_from_the_request():
    provider = ScriptedProvider(script(turn("short answer"), turn("short answer")))
    small = _request("hello")
    big = _request("hello", "a much longer second message " * 20, "and a third")
    usage_small = collect(provider.stream(small)).usage
    usage_big = collect(provider.stream(big)).usage
    # prompt_total: the estimate is split into cache reads and writes as a caching provider reports it
    assert usage_small.prompt_total == estimate_request(small.system, small.messages, small.tools)
    assert usage_big.prompt_total == estimate_request(big.system, big.messages, big.tools)
    assert usage_big.prompt_total > usage_small.prompt_total
    assert usage_small.output_tokens > 0
    assert usage_small.output_tokens == usage_big.output_tokens  # same answer text


def test_estimated_usage_counts_tool_schemas():
    provider = ScriptedProvider(script(turn("x"), turn("x")))
    bare = _request("hello")
    tools = [{"name": "t", "description": "d" * 700, "input_schema": {"type": "object"}}]
    with_tools = Request(system=SYSTEM, messages=bare.messages, tools=tools)
    assert (
        collect(provider.stream(with_tools)).usage.prompt_total
        > collect(provider.stream(bare)).usage.prompt_total
    )


def test_given_usage_is_passed_through():
    given = {"input_tokens": 123, "output_tokens": 7, "cache_read_input_tokens": 1000}
    provider = ScriptedProvider(script({"text": "cached", "usage": given}))
    events = _events(provider, _request("hi " * 500))
    usage_events = [e for e in events if isinstance(e, UsageEvent)]
    assert len(usage_events) == 1
    assert usage_events[0].usage == Usage(input_tokens=123, output_tokens=7, cache_read_input_tokens=1000)
    assert usage_events[0].usage.prompt_total == 1123


# --- call ids -----------------------------------------------------------------------------------


def _no_id_script(turns: int = 1):
    """Tool calls without ids: two in the first turn, one in the second (with ``turns=2``)."""
    both = [
        turn("", ("bash", {"command": "ls"}), ("bash", {"command": "pwd"})),
        turn("", ("bash", {"command": "ls"})),
    ]
    return script(*both[:turns])


def test_missing_call_ids_are_deterministic_for_the_same_request():
    request = _request("list the files")
    ids_a = [c.id for c in collect(ScriptedProvider(_no_id_script()).stream(request)).tool_calls]
    ids_b = [c.id for c in collect(ScriptedProvider(_no_id_script()).stream(request)).tool_calls]
    assert ids_a == ids_b
    assert all(ids_a)
    assert len(set(ids_a)) == 2  # two calls of one turn never share an id


def test_missing_call_ids_differ_across_requests():
    provider = ScriptedProvider(_no_id_script(turns=2))
    first = collect(provider.stream(_request("one"))).tool_calls
    second = collect(provider.stream(_request("one", "two"))).tool_calls
    assert {c.id for c in first}.isdisjoint({c.id for c in second})


def test_missing_call_ids_differ_even_when_the_same_turn_is_replayed_in_another_conversation():
    # Two runs of one script in a session must not reuse call ids (spill files are named
    # by call id): a different conversation means different ids.
    first = collect(ScriptedProvider(_no_id_script()).stream(_request("one"))).tool_calls
    second = collect(ScriptedProvider(_no_id_script()).stream(_request("one"))).tool_calls
    assert [c.id for c in first] != [c.id for c in second]


def test_given_call_ids_are_kept():
    provider = ScriptedProvider(script(turn("", ("bash", {"command": "ls"}, "my_id"))))
    assert [c.id for c in collect(provider.stream(_request("x"))).tool_calls] == ["my_id"]


# --- streaming shape ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "The quick brown fox jumps over the lazy dog, then runs  away (twice spaced) and back again.",
        "line one\nline two has more words in it\n\n  indented line with trailing space ",
        "Unicode — 中文字符 and émojis 🎉 mixed in a sentence that is long enough to chunk",
    ],
)
def test_text_streams_in_several_chunks_that_reassemble_exactly(text: str):
    provider = ScriptedProvider(script(turn(text)))
    events = _events(provider, _request("x"))
    chunks = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(chunks) > 1
    assert "".join(chunks) == text
    assert isinstance(events[-1], Stop)


def test_stop_reason_is_tool_use_with_calls_and_end_turn_without():
    provider = ScriptedProvider(script(turn("calling", ("bash", {"command": "ls"})), turn("done")))
    with_calls = _events(provider, _request("a"))
    without = _events(provider, _request("b"))
    assert with_calls[-1] == Stop("tool_use")
    assert without[-1] == Stop("end_turn")
    assert collect(iter(with_calls)).stop_reason == "tool_use"
    # Tool calls arrive as start, argument JSON, end — after the text.
    kinds = [type(e) for e in with_calls]
    assert kinds.index(ToolCallStart) > max(i for i, k in enumerate(kinds) if k is TextDelta)
    assert kinds[kinds.index(ToolCallStart) : kinds.index(ToolCallStart) + 3] == [
        ToolCallStart,
        ToolCallDelta,
        ToolCallEnd,
    ]


def test_tool_call_arguments_round_trip_through_the_stream():
    arguments = {"path": "a/b.txt", "content": 'x\n"quoted" — ünïcode', "n": [1, 2, {"k": None}]}
    provider = ScriptedProvider(script(turn("", ("write_file", arguments, "w1"))))
    response = collect(provider.stream(_request("x")))
    assert response.tool_calls == [ToolCall(id="w1", name="write_file", arguments=arguments)]
    assert response.text == ""


def test_complete_with_agent_purpose_consumes_a_turn():
    provider = ScriptedProvider(script(turn("via complete")))
    assert provider.complete(_request("x")).text == "via complete"
    assert provider.turns_used == 1


# --- StreamAssembler ----------------------------------------------------------------------------------


def test_assembler_refuses_a_stream_without_stop():
    assembler = StreamAssembler()
    for event in [
        TextDelta("partial "),
        ToolCallStart("c1", "bash"),
        ToolCallDelta("c1", '{"command": "ls"}'),
        ToolCallEnd("c1"),
    ]:
        assembler.feed(event)
    assert assembler.text == "partial "
    with pytest.raises(StreamError, match="without a stop reason"):
        assembler.finish()


def test_assembler_refuses_broken_arguments_json():
    assembler = StreamAssembler()
    for event in [
        ToolCallStart("c1", "bash"),
        ToolCallDelta("c1", '{"command": '),
        ToolCallDelta("c1", '"ls"'),  # the closing brace never came
        ToolCallEnd("c1"),
        Stop("tool_use"),
    ]:
        assembler.feed(event)
    with pytest.raises(StreamError) as info:
        assembler.finish()
    assert "bash" in str(info.value) and "c1" in str(info.value)


def test_assembler_joins_argument_fragments_and_keeps_the_last_usage():
    assembler = StreamAssembler()
    for event in [
        TextDelta("a"),
        TextDelta("b"),
        ToolCallStart("c1", "read_file"),
        ToolCallDelta("c1", '{"pa'),
        ToolCallDelta("c1", 'th": "x"}'),
        ToolCallEnd("c1"),
        ToolCallStart("c2", "list_files"),
        ToolCallEnd("c2"),
        UsageEvent(Usage(input_tokens=1)),
        UsageEvent(Usage(input_tokens=5, output_tokens=2)),
        Stop("tool_use"),
    ]:
        assembler.feed(event)
    response = assembler.finish()
    assert response.text == "ab"
    assert response.tool_calls == [
        ToolCall(id="c1", name="read_file", arguments={"path": "x"}),
        ToolCall(id="c2", name="list_files", arguments={}),
    ]
    assert response.usage == Usage(input_tokens=5, output_tokens=2)
    assert response.stop_reason == "tool_use"


def test_tool_results_in_requests_count_toward_estimated_usage():
    provider = ScriptedProvider(script(turn("x"), turn("x")))
    call = ToolCall(id="c", name="bash", arguments={})
    base = [Message(role="user", content="go"), Message(role="assistant", tool_calls=(call,))]
    short = Request(
        system=SYSTEM,
        messages=base + [Message(role="user", tool_result=ToolResult(call_id="c", content="ok"))],
    )
    long = Request(
        system=SYSTEM,
        messages=base + [Message(role="user", tool_result=ToolResult(call_id="c", content="y" * 7000))],
    )
    difference = (  # the prompt's size: input plus what caching split off (issue 31)
        collect(provider.stream(long)).usage.prompt_total - collect(provider.stream(short)).usage.prompt_total
    )
    assert difference == pytest.approx((7000 - 2) / 3.5, abs=2)


# --- a script left unplayed fails the test (tests/conftest.py) ---------------------------------

TWO_TURNS = {"turns": [{"text": "one"}, {"text": "two"}]}


@pytest.mark.script_may_remain  # `asked` keeps a turn: that is what the check must name
def test_the_check_names_each_script_asked_but_not_played_to_its_end() -> None:
    from tests.conftest import assert_scripts_played

    asked, idle, done = (ScriptedProvider(TWO_TURNS) for _ in range(3))
    asked.complete(_request("hi"))
    for _ in range(2):
        done.complete(_request("hi"))
    assert asked.unplayed() == {"turns": 1} and done.unplayed() == {}
    assert_scripts_played([idle, done])  # never asked (a window probe), or played out: fine
    with pytest.raises(pytest.fail.Exception, match=r"<inline script>: 1 turns left") as failed:
        assert_scripts_played([asked, done])
    assert "script_may_remain" in str(failed.value)


def test_a_test_that_leaves_a_turn_fails_unless_marked(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("from tests.conftest import _scripted_providers, pytest_runtest_call  # noqa: F401")
    pytester.makepyfile(
        f"""
        import pytest
        from pseudoclaude_nb.providers import ScriptedProvider
        from tests.test_scripted_provider import _request

        def test_leaves_a_turn():
            ScriptedProvider({TWO_TURNS!r}).complete(_request("hi"))

        @pytest.mark.script_may_remain
        def test_stops_early_on_purpose():
            ScriptedProvider({TWO_TURNS!r}).complete(_request("hi"))

        def test_plays_it_all():
            provider = ScriptedProvider({TWO_TURNS!r})
            provider.complete(_request("hi"))
            provider.complete(_request("hi"))
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*test_leaves_a_turn*", "*<inline script>: 1 turns left*"])
