"""The turn loop (SPEC §5, §12, §16): loop shape, events, usage entries, tool failures,
interrupts, cut streams, hook failures and the request validator.

Runs use the real ``ScriptedProvider``, the real tools of ``build_tools`` (or a registry
with a purpose-made ``Tool`` where a handler must misbehave), a real ``Conversation`` and a
real ``SessionWriter``. ``FaultyProvider`` is the one wrapper: it delegates to a
``ScriptedProvider`` and cuts or interrupts one of its streams, which a script cannot express.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import Field

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.errors import HookError, ProtocolError, ScriptError, SessionWriteError, StreamError
from pseudoclaude_nb.events import ToolFinished, ToolStarted
from pseudoclaude_nb.messages import Message, ToolCall, ToolResult, pairing_problems
from pseudoclaude_nb.providers import ScriptedProvider
from pseudoclaude_nb.providers.base import Request, Response, Stop, StreamEvent
from pseudoclaude_nb.runner import (
    INTERRUPTED,
    AssistantDelta,
    Notice,
    RunFinished,
    Runner,
    StepFinished,
    StepStarted,
)
from pseudoclaude_nb.session import SessionWriter, load_session, new_session_dir
from pseudoclaude_nb.tools import Permissions, Tool, ToolArgs, ToolRegistry, build_tools
from tests.scripts import script, turn

SYSTEM = "system prompt for runner tests"
LONG_TEXT = " ".join(f"word{i}" for i in range(24))  # streams as 6 TextDelta chunks


# --- the one wrapper provider -------------------------------------------------------------------


class FaultyProvider:
    """A ``ScriptedProvider`` whose ``on_request``-th stream misbehaves.

    That stream yields the first ``keep`` events of the real one (all of them when ``None``),
    never its ``Stop``, and then raises ``fault`` — or just ends, like a cut connection,
    when ``fault`` is ``None``. Every other request is passed through unchanged.
    """

    def __init__(
        self,
        inner: ScriptedProvider,
        *,
        keep: int | None = None,
        fault: BaseException | None = None,
        on_request: int = 1,
    ) -> None:
        self.inner = inner
        self.name, self.model, self.context_window = inner.name, inner.model, inner.context_window
        self.keep, self.fault, self.on_request = keep, fault, on_request
        self.streams = 0

    def stream(self, request: Request) -> Iterator[StreamEvent]:
        self.streams += 1
        events = self.inner.stream(request)
        if self.streams != self.on_request:
            yield from events
            return
        real = [e for e in events if not isinstance(e, Stop)]
        yield from real if self.keep is None else real[: self.keep]
        if self.fault is not None:
            raise self.fault

    def complete(self, request: Request) -> Response:
        return self.inner.complete(request)


# --- helpers -----------------------------------------------------------------------------------


class EchoArgs(ToolArgs):
    text: str = Field(description="text")


def custom_registry(**handlers) -> ToolRegistry:
    """A registry of one-argument tools named after ``handlers`` (name -> fn(text) -> str)."""
    return ToolRegistry(
        Tool(name=name, description=f"{name} tool", args=EchoArgs, handler=lambda a, fn=fn: fn(a.text))
        for name, fn in handlers.items()
    )


@pytest.fixture
def session(workspace: Path):
    """A real session writer in the workspace, attached to a fresh conversation."""
    writer = SessionWriter(new_session_dir(workspace), fsync=False)
    conversation = Conversation()
    writer.attach(conversation)
    yield conversation, writer
    writer.close()


def make_runner(conversation, writer, provider, tools, *, events=None, **kwargs) -> Runner:
    return Runner(
        conversation=conversation,
        provider=provider,
        tools=tools,
        permissions=Permissions("auto"),
        system_prompt=SYSTEM,
        writer=writer,
        strict=kwargs.pop("strict", True),
        listeners=[events.append] if events is not None else [],
        **kwargs,
    )


def log_entries(writer: SessionWriter) -> list[dict]:
    return [json.loads(line) for line in writer.path.read_text(encoding="utf-8").splitlines() if line.strip()]


def results(conversation: Conversation) -> dict[str, ToolResult]:
    return {m.tool_result.call_id: m.tool_result for m in conversation.messages() if m.tool_result}


def assert_log_matches(conversation: Conversation, writer: SessionWriter) -> None:
    loaded = load_session(writer.dir)
    assert loaded.bad_lines == []
    assert not loaded.truncated_tool_calls
    assert loaded.orphan_results == 0
    assert pairing_problems(loaded.messages) == []
    assert [m.id for m in loaded.messages] == [m.id for m in conversation.messages()]
    assert loaded.messages == conversation.messages()


# --- the loop ----------------------------------------------------------------------------------


@pytest.mark.script_may_remain  # "never reached" is the point: the loop ends at a turn without calls
def test_user_message_then_loop_until_a_turn_without_tool_calls(session, workspace: Path):
    conversation, writer = session
    (workspace / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    provider = ScriptedProvider(
        script(
            turn("Reading.", ("read_file", {"path": "notes.txt"}, "r1")),
            turn("Listing.", ("list_files", {"pattern": "*.txt"}, "l1")),
            turn("All done."),
            turn("never reached"),
        )
    )
    summary = make_runner(conversation, writer, provider, build_tools(workspace)).run("look at notes")
    assert summary.status == "done"
    assert summary.steps == 3
    assert summary.final_text == "All done."
    assert summary.error is None
    assert summary.session_id == writer.id
    assert provider.turns_used == 3

    msgs = conversation.messages()
    assert [
        (m.role, m.content, [c.id for c in m.tool_calls], m.tool_result and m.tool_result.call_id)
        for m in msgs
    ] == [
        ("user", "look at notes", [], None),
        ("assistant", "Reading.", ["r1"], None),
        ("user", "", [], "r1"),
        ("assistant", "Listing.", ["l1"], None),
        ("user", "", [], "l1"),
        ("assistant", "All done.", [], None),
    ]
    assert "alpha" in msgs[2].tool_result.content and not msgs[2].tool_result.is_error
    assert "notes.txt" in msgs[4].tool_result.content
    # Each request carried the whole conversation so far, the system prompt and the tools.
    assert [len(r.messages) for r in provider.requests] == [1, 3, 5]
    assert all(r.system == SYSTEM for r in provider.requests)
    assert {t["name"] for t in provider.requests[0].tools} >= {"read_file", "write_file", "bash"}
    assert_log_matches(conversation, writer)


def test_usage_is_summed_over_steps(session, workspace: Path):
    conversation, writer = session
    provider = ScriptedProvider(
        script(
            {
                "text": "",
                "tool_calls": [{"name": "list_files", "arguments": {}}],
                "usage": {"input_tokens": 100, "output_tokens": 10},
            },
            {"text": "ok", "usage": {"input_tokens": 150, "output_tokens": 5, "cache_read_input_tokens": 40}},
        )
    )
    summary = make_runner(conversation, writer, provider, build_tools(workspace)).run("go")
    assert summary.status == "done"
    assert (
        summary.usage.input_tokens,
        summary.usage.output_tokens,
        summary.usage.cache_read_input_tokens,
    ) == (250, 15, 40)


def test_a_usage_entry_per_step_with_conversation_length_and_model(session, workspace: Path):
    conversation, writer = session
    provider = ScriptedProvider(
        script(
            turn("", ("list_files", {}, "a"), ("list_files", {"pattern": "*.py"}, "b")),
            {"text": "given", "usage": {"input_tokens": 321, "output_tokens": 9}},
        ),
        model="model-under-test",
    )
    events: list = []
    make_runner(conversation, writer, provider, build_tools(workspace), events=events).run("go")
    usage = [e for e in log_entries(writer) if e["type"] == "usage"]
    # Step 1: [user, assistant] -> 2; two results -> 4; step 2's assistant -> 5.
    assert [u["messages"] for u in usage] == [2, 5]
    assert {u["model"] for u in usage} == {"model-under-test"}
    reported = [e.usage for e in events if isinstance(e, StepFinished)]
    assert [u["input_tokens"] for u in usage] == [r.input_tokens for r in reported]
    # estimated by the scripted provider (split into cache reads and writes, issue 31)
    assert (
        usage[0]["input_tokens"]
        + usage[0]["cache_creation_input_tokens"]
        + usage[0]["cache_read_input_tokens"]
        > 0
    )
    assert (usage[1]["input_tokens"], usage[1]["output_tokens"]) == (321, 9)
    # The usage entry follows its assistant message in the log.
    kinds = [(e["type"], e.get("role")) for e in log_entries(writer)]
    assert kinds.index(("usage", None)) == kinds.index(("message", "assistant")) + 1
    loaded = load_session(writer.dir)
    assert loaded.usage_anchor == (321 + 9, 5)


@pytest.mark.script_may_remain  # max_steps stops the run with turns left
def test_max_steps_stops_with_a_notice(session, workspace: Path):
    conversation, writer = session
    provider = ScriptedProvider(script(*[turn(f"step {i}", ("list_files", {})) for i in range(5)]))
    events: list = []
    summary = make_runner(
        conversation, writer, provider, build_tools(workspace), events=events, max_steps=2
    ).run("loop")
    assert summary.status == "max-steps"
    assert summary.steps == 2
    assert summary.error is None
    assert provider.turns_used == 2
    notices = [e for e in events if isinstance(e, Notice)]
    assert len(notices) == 1
    assert "max-steps 2" in notices[0].text
    assert notices[0].level == "warning"
    assert isinstance(events[-1], RunFinished) and events[-1].summary is summary
    assert events.index(notices[0]) == len(events) - 2
    # It stops after the tools of the last step: the conversation is protocol-valid.
    assert conversation.messages()[-1].tool_result is not None
    assert pairing_problems(conversation.messages()) == []
    assert_log_matches(conversation, writer)


def test_a_turn_without_tool_calls_ends_even_at_the_step_limit(session, workspace: Path):
    conversation, writer = session
    provider = ScriptedProvider(script(turn("", ("list_files", {})), turn("finished")))
    summary = make_runner(conversation, writer, provider, build_tools(workspace), max_steps=2).run("go")
    assert (summary.status, summary.steps, summary.final_text) == ("done", 2, "finished")


# --- tool failures become results ------------------------------------------------------------------


def test_tool_failures_become_error_results_and_the_run_continues(session):
    conversation, writer = session

    def explode(text: str) -> str:
        raise RuntimeError(f"disk on fire: {text}")

    tools = custom_registry(echo=lambda t: f"echo {t}", explode=explode)
    provider = ScriptedProvider(
        script(
            turn(
                "trying things",
                ("explode", {"text": "now"}, "c_raise"),
                ("no_such_tool", {"text": "x"}, "c_unknown"),
                ("echo", {"txt": "typo"}, "c_badargs"),
                ("echo", {"text": "fine"}, "c_ok"),
            ),
            turn("I saw the errors and stop here."),
        )
    )
    summary = make_runner(conversation, writer, provider, tools).run("go")
    assert summary.status == "done"
    assert summary.steps == 2
    res = results(conversation)
    assert list(res) == ["c_raise", "c_unknown", "c_badargs", "c_ok"]
    assert res["c_raise"].is_error and "RuntimeError: disk on fire: now" in res["c_raise"].content
    assert res["c_unknown"].is_error and "unknown tool 'no_such_tool'" in res["c_unknown"].content
    assert "echo" in res["c_unknown"].content  # it lists the tools that exist
    assert res["c_badargs"].is_error and "invalid arguments for echo" in res["c_badargs"].content
    assert "text" in res["c_badargs"].content and "txt" in res["c_badargs"].content
    assert not res["c_ok"].is_error and res["c_ok"].content == "echo fine"
    # The model saw every result in its next request.
    second = provider.requests[1].messages
    assert [m.tool_result.call_id for m in second if m.tool_result] == list(res)
    assert_log_matches(conversation, writer)


def test_a_refused_tool_is_an_error_result_not_a_crash(session, workspace: Path):
    conversation, writer = session
    provider = ScriptedProvider(
        script(turn("", ("write_file", {"path": "x.txt", "content": "x"}, "w")), turn("ok"))
    )
    runner = make_runner(conversation, writer, provider, build_tools(workspace))
    runner.permissions = Permissions("read-only")
    summary = runner.run("write it")
    assert summary.status == "done"
    assert results(conversation)["w"].is_error
    assert "read-only" in results(conversation)["w"].content
    assert not (workspace / "x.txt").exists()


# --- events ------------------------------------------------------------------------------------------


def test_events_are_emitted_in_order(session, workspace: Path):
    conversation, writer = session
    (workspace / "a.txt").write_text("A\n", encoding="utf-8")
    provider = ScriptedProvider(
        script(
            turn(LONG_TEXT, ("read_file", {"path": "a.txt"}, "r1"), ("list_files", {}, "l1")),
            turn("short end"),
        )
    )
    events: list = []
    summary = make_runner(conversation, writer, provider, build_tools(workspace), events=events).run("go")
    assert summary.status == "done"

    def label(e) -> str:
        if isinstance(e, (StepStarted, StepFinished)):
            return f"{type(e).__name__}({e.step})"
        if isinstance(e, (ToolStarted, ToolFinished)):
            return f"{type(e).__name__}({e.call.id})"
        return type(e).__name__

    labels = [label(e) for e in events]
    deltas_1 = labels.index("StepFinished(1)") - labels.index("StepStarted(1)") - 1
    deltas_2 = labels.index("StepFinished(2)") - labels.index("StepStarted(2)") - 1
    assert deltas_1 > 1  # the long text streamed in several chunks
    assert labels == (
        ["StepStarted(1)"]
        + ["AssistantDelta"] * deltas_1
        + ["StepFinished(1)", "ToolStarted(r1)", "ToolFinished(r1)", "ToolStarted(l1)", "ToolFinished(l1)"]
        + ["StepStarted(2)"]
        + ["AssistantDelta"] * deltas_2
        + ["StepFinished(2)", "RunFinished"]
    )
    step1_text = "".join(e.text for e in events[1 : 1 + deltas_1])
    assert step1_text == LONG_TEXT
    finished = [e for e in events if isinstance(e, StepFinished)]
    assert finished[0].message.tool_calls and finished[0].message == conversation.messages()[1]
    assert finished[1].message.content == "short end"
    tool_done = [e for e in events if isinstance(e, ToolFinished)]
    assert [e.result.call_id for e in tool_done] == ["r1", "l1"]
    assert all(e.seconds >= 0 for e in tool_done)
    assert events[-1].summary is summary


# --- cut streams -------------------------------------------------------------------------------------


def test_a_cut_stream_keeps_no_partial_tool_call(session, workspace: Path):
    conversation, writer = session
    inner = ScriptedProvider(
        script(turn("Let me write it.", ("write_file", {"path": "w.txt", "content": "x"}, "w1")))
    )
    provider = FaultyProvider(inner)  # every event but the Stop, then the stream just ends
    events: list = []
    summary = make_runner(conversation, writer, provider, build_tools(workspace), events=events).run("write")
    assert summary.status == "error"
    assert isinstance(summary.error, StreamError)
    assert "stop reason" in str(summary.error)
    assert not (workspace / "w.txt").exists()
    msgs = conversation.messages()
    assert [(m.role, m.content) for m in msgs] == [("user", "write")]
    assert not any(m.tool_calls for m in msgs)
    assert not [e for e in events if isinstance(e, (ToolStarted, StepFinished))]
    assert isinstance(events[-1], RunFinished)
    loaded = load_session(writer.dir)
    assert [m.content for m in loaded.messages] == ["write"]
    assert not any(e["type"] == "message" and e["tool_calls"] for e in log_entries(writer))
    assert not any(e["type"] == "usage" for e in log_entries(writer))


def test_a_stream_cut_inside_the_arguments_keeps_no_partial_tool_call(session, workspace: Path):
    conversation, writer = session
    inner = ScriptedProvider(script(turn("", ("bash", {"command": "touch cut.txt"}, "b1"))))
    # ToolCallStart and ToolCallDelta arrive, then the connection drops.
    provider = FaultyProvider(inner, keep=2)
    summary = make_runner(conversation, writer, provider, build_tools(workspace)).run("touch")
    assert summary.status == "error"
    assert isinstance(summary.error, StreamError)
    assert not (workspace / "cut.txt").exists()
    assert not any(m.role == "assistant" for m in conversation.messages())
    assert_log_matches(conversation, writer)


def test_a_provider_error_mid_run_stops_with_status_error(session, workspace: Path):
    conversation, writer = session
    provider = ScriptedProvider(script(turn("", ("list_files", {}, "l1"))))  # runs out on step 2
    summary = make_runner(conversation, writer, provider, build_tools(workspace)).run("go")
    assert summary.status == "error"
    assert isinstance(summary.error, ScriptError)
    assert "ran out" in str(summary.error)
    assert summary.steps == 2
    assert pairing_problems(conversation.messages()) == []
    assert_log_matches(conversation, writer)


# --- interrupts ---------------------------------------------------------------------------------------


def test_keyboard_interrupt_mid_stream_keeps_the_partial_text(session, workspace: Path):
    conversation, writer = session
    inner = ScriptedProvider(script(turn(LONG_TEXT, ("write_file", {"path": "i.txt", "content": "x"}, "w1"))))
    provider = FaultyProvider(inner, keep=3, fault=KeyboardInterrupt())
    events: list = []
    summary = make_runner(conversation, writer, provider, build_tools(workspace), events=events).run("go")
    assert summary.status == "interrupted"
    assert summary.error is None
    deltas = [e.text for e in events if isinstance(e, AssistantDelta)]
    assert len(deltas) == 3
    partial = "".join(deltas)
    assert LONG_TEXT.startswith(partial) and partial != LONG_TEXT

    msgs = conversation.messages()
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[1].content == partial + "\n\n[interrupted by user]"
    assert msgs[1].tool_calls == ()
    assert not (workspace / "i.txt").exists()
    assert not [e for e in events if isinstance(e, ToolStarted)]
    assert isinstance(events[-1], RunFinished) and events[-1].summary.status == "interrupted"

    loaded = load_session(writer.dir)
    assert pairing_problems(loaded.messages) == []
    assert loaded.messages == msgs


def test_keyboard_interrupt_before_any_text_adds_no_assistant_message(session, workspace: Path):
    conversation, writer = session
    inner = ScriptedProvider(script(turn("", ("list_files", {}, "l1"))))
    provider = FaultyProvider(inner, keep=1, fault=KeyboardInterrupt())  # after ToolCallStart
    summary = make_runner(conversation, writer, provider, build_tools(workspace)).run("go")
    assert summary.status == "interrupted"
    assert [m.role for m in conversation.messages()] == ["user"]
    assert_log_matches(conversation, writer)


def test_the_run_after_an_interrupted_stream_continues_cleanly(session, workspace: Path):
    conversation, writer = session
    inner = ScriptedProvider(script(turn(LONG_TEXT), turn("second answer")))
    provider = FaultyProvider(inner, keep=2, fault=KeyboardInterrupt())
    runner = make_runner(conversation, writer, provider, build_tools(workspace))
    assert runner.run("first").status == "interrupted"
    summary = runner.run("again")  # strict mode: the request must be protocol-valid
    assert summary.status == "done"
    assert summary.final_text == "second answer"
    assert [m.role for m in conversation.messages()] == ["user", "assistant", "user", "assistant"]
    assert_log_matches(conversation, writer)


@pytest.mark.script_may_remain  # interrupted: the run never asks for the rest
def test_keyboard_interrupt_mid_tool_gives_every_call_a_result(session):
    conversation, writer = session
    ran: list[str] = []

    def record(text: str) -> str:
        ran.append(text)
        return f"did {text}"

    def interrupted(text: str) -> str:
        ran.append(text)
        raise KeyboardInterrupt

    tools = custom_registry(work=record, slow=interrupted)
    provider = ScriptedProvider(
        script(
            turn(
                "three in parallel",
                ("work", {"text": "first"}, "c1"),
                ("slow", {"text": "second"}, "c2"),
                ("work", {"text": "third"}, "c3"),
            ),
            turn("never requested"),
        )
    )
    events: list = []
    summary = make_runner(conversation, writer, provider, tools, events=events).run("go")
    assert summary.status == "interrupted"
    assert ran == ["first", "second"]  # the third never started
    assert provider.turns_used == 1  # no request after the interrupt
    res = results(conversation)
    assert list(res) == ["c1", "c2", "c3"]
    assert res["c1"] == ToolResult(call_id="c1", content="did first")
    for cid in ("c2", "c3"):
        assert res[cid].is_error
        assert "interrupted by user" in res[cid].content
        assert res[cid].content == INTERRUPTED
    assert [e.call.id for e in events if isinstance(e, ToolFinished)] == ["c1"]
    assert pairing_problems(conversation.messages()) == []

    loaded = load_session(writer.dir)
    assert loaded.truncated_tool_calls is False
    assert loaded.orphan_results == 0
    assert pairing_problems(loaded.messages) == []
    assert loaded.messages == conversation.messages()


def _interrupt_on(kind: type, *, step: int | None = None):
    """A listener that raises KeyboardInterrupt the first time it sees ``kind``: a Ctrl-C
    landing while the notebook renders that event (display updates take real time)."""
    fired = []

    def listener(event) -> None:
        if isinstance(event, kind) and not fired and (step is None or getattr(event, "step", None) == step):
            fired.append(event)
            raise KeyboardInterrupt

    return listener, fired


@pytest.mark.parametrize("kind", [StepFinished, ToolStarted, ToolFinished])
@pytest.mark.script_may_remain  # interrupted: the run never asks for the rest
def test_an_interrupt_between_tool_call_and_results_keeps_the_conversation_valid(
    session, workspace: Path, kind
):
    # SPEC §12: on Ctrl-C "unfinished tool calls get an 'interrupted by user' error result, so
    # the conversation and the log stay protocol-valid" — wherever the interrupt lands.
    conversation, writer = session
    provider = ScriptedProvider(
        script(
            turn("two calls", ("list_files", {}, "a"), ("list_files", {"pattern": "*.md"}, "b")), turn("end")
        )
    )
    listener, fired = _interrupt_on(kind)
    runner = make_runner(conversation, writer, provider, build_tools(workspace))
    runner.hooks.listeners.append(listener)
    summary = runner.run("go")
    assert fired
    assert summary.status == "interrupted"
    assert pairing_problems(conversation.messages()) == []
    assert set(results(conversation)) == {"a", "b"}
    assert_log_matches(conversation, writer)


# --- hooks -----------------------------------------------------------------------------------------


def _break_writer(writer: SessionWriter) -> None:
    """Make the writer's next write fail like a real I/O error (EBADF on a read-only fd)."""
    bad = os.open(writer.path, os.O_RDONLY)
    os.close(writer._fd)
    writer._fd = bad


def _mend_writer(writer: SessionWriter) -> None:
    good = os.open(writer.path, os.O_RDWR | os.O_APPEND)  # the writer reads its own tail too
    os.close(writer._fd)
    writer._fd = good


@pytest.mark.script_may_remain  # the failing writer stops the run before "unreachable"
def test_a_failing_writer_stops_the_run_with_a_hook_error(session, workspace: Path):
    conversation, writer = session
    provider = ScriptedProvider(script(turn("", ("list_files", {}, "l1")), turn("unreachable")))
    events: list = []

    def sabotage(event) -> None:
        if isinstance(event, StepFinished):
            _break_writer(writer)  # the tool result's append is the next write

    runner = make_runner(conversation, writer, provider, build_tools(workspace), events=events)
    runner.hooks.listeners.append(sabotage)
    summary = runner.run("go")
    assert summary.status == "error"
    assert isinstance(summary.error, HookError)
    assert isinstance(summary.error.__cause__, SessionWriteError)
    assert str(writer.path) in str(summary.error)
    assert provider.turns_used == 1  # the run stopped; no further request
    assert isinstance(events[-1], RunFinished) and events[-1].summary.error is summary.error
    # The in-memory conversation is kept (the result is there), the log lacks the result...
    assert conversation.messages()[-1].tool_result is not None
    assert writer.failed is not None
    # ...and once writing works again, the next write resyncs the log to the conversation.
    _mend_writer(writer)
    provider2 = ScriptedProvider(script(turn("after the failure")))
    summary2 = make_runner(conversation, writer, provider2, build_tools(workspace)).run("continue")
    assert summary2.status == "done"
    assert writer.failed is None
    assert any(e["type"] == "replace" and e["reason"] == "resync" for e in log_entries(writer))
    assert_log_matches(conversation, writer)


def test_a_raising_hook_on_the_user_message_stops_the_run_before_any_request(workspace: Path):
    from pseudoclaude_nb.conversation import Hooks

    def fail(message: Message) -> None:
        raise OSError("no space left on device")

    conversation = Conversation(hooks=Hooks(on_append=fail))
    provider = ScriptedProvider(script(turn("x")))
    summary = make_runner(conversation, None, provider, build_tools(workspace)).run("hello")
    assert summary.status == "error"
    assert isinstance(summary.error, HookError)
    assert "no space left on device" in str(summary.error)
    assert provider.requests == []


def test_after_a_hook_error_among_parallel_calls_the_next_run_is_valid(session, workspace: Path):
    conversation, writer = session
    provider = ScriptedProvider(script(turn("", ("list_files", {}, "a"), ("list_files", {}, "b"))))

    def sabotage(event) -> None:
        if isinstance(event, StepFinished):
            _break_writer(writer)

    runner = make_runner(conversation, writer, provider, build_tools(workspace))
    runner.hooks.listeners.append(sabotage)
    assert runner.run("go").status == "error"
    _mend_writer(writer)
    # The conversation that is kept must still be one the next request can send.
    assert pairing_problems(conversation.messages()) == []
    summary = make_runner(
        conversation, writer, ScriptedProvider(script(turn("ok"))), build_tools(workspace)
    ).run("again")
    assert summary.status == "done"


# --- the request validator -----------------------------------------------------------------------


def _broken_conversation(writer: SessionWriter | None) -> Conversation:
    """A conversation broken by hand: an assistant tool call that never got its result."""
    conversation = Conversation(
        [
            Message(role="user", content="earlier"),
            Message(
                role="assistant",
                content="",
                tool_calls=(ToolCall(id="dangling", name="bash", arguments={"command": "ls"}),),
            ),
        ]
    )
    if writer is not None:
        writer.attach(conversation)
    return conversation


def test_strict_mode_raises_protocol_error_before_any_request(workspace: Path):
    writer = SessionWriter(new_session_dir(workspace), fsync=False)
    try:
        conversation = _broken_conversation(writer)
        provider = ScriptedProvider(script(turn("x")))
        summary = make_runner(conversation, writer, provider, build_tools(workspace), strict=True).run("now")
        assert summary.status == "error"
        assert isinstance(summary.error, ProtocolError)
        assert "dangling" in str(summary.error)
        assert provider.requests == []  # never sent: a violation is not a provider 400
    finally:
        writer.close()


def test_non_strict_mode_repairs_the_request_with_a_notice_and_a_note(workspace: Path):
    writer = SessionWriter(new_session_dir(workspace), fsync=False)
    try:
        conversation = _broken_conversation(writer)
        provider = ScriptedProvider(script(turn("answered")))
        events: list = []
        summary = make_runner(
            conversation, writer, provider, build_tools(workspace), events=events, strict=False
        ).run("now")
        assert summary.status == "done"
        assert summary.final_text == "answered"
        sent = provider.requests[0].messages
        assert pairing_problems(sent) == []
        assert not any(c.id == "dangling" for m in sent for c in m.tool_calls)
        assert [m.content for m in sent if m.role == "user"] == ["earlier", "now"]
        notices = [e for e in events if isinstance(e, Notice)]
        assert len(notices) == 1 and "repaired" in notices[0].text and "dangling" in notices[0].text
        assert notices[0].level == "warning"
        assert events.index(notices[0]) < next(
            i for i, e in enumerate(events) if isinstance(e, AssistantDelta)
        )
        notes = [e for e in log_entries(writer) if e["type"] == "note"]
        assert len(notes) == 1
        assert notes[0]["text"] == notices[0].text
        assert notes[0]["level"] == "warning"
    finally:
        writer.close()


def test_runner_without_a_writer_works(workspace: Path):
    conversation = Conversation()
    provider = ScriptedProvider(script(turn("", ("list_files", {}, "l")), turn("bye")))
    summary = make_runner(conversation, None, provider, build_tools(workspace)).run("hi")
    assert summary.status == "done"
    assert summary.session_id is None
    assert len(conversation) == 4
