"""``--strategy api`` offline: the scripted and demo providers emulate the server's compaction.

The emulation (``ScriptedProvider``, issue 31) does what the Anthropic documentation says the
``compact_20260112`` edit does: from the trigger on, the answer begins with a ``compaction``
block summarizing what came before, and later requests are read from that block on. The
strategy around it is the same code as against the real API: a ``compact`` replace (trigger
``server``), resume, undo.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.messages import Message, ToolCall
from pseudoclaude_nb.providers import ScriptedProvider
from pseudoclaude_nb.providers.base import Request, ServerContext, collect
from tests.demo_support import run_demo
from tests.scripts import scripted_agent, turn, write_script

WINDOW = 50_000  # the Layer 2 line, and so the trigger, at 17,000 (as in the demo)
LONG_BRIEF = "The constraint that matters: keep every number in metres. " * 1500  # ~23,000 tokens
SUMMARY = "The person set one constraint: every number in metres."


def entries(agent: Agent) -> list[dict]:
    path = agent.session.dir / "conversation.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def compaction_of(m: Message) -> dict | None:
    return next((json.loads(r.data or "") for r in m.reasoning if r.kind == "compaction"), None)


def test_over_the_trigger_the_answer_begins_with_a_compaction_block_and_the_log_gets_a_replace(
    workspace: Path,
) -> None:
    path = write_script(workspace, "api", turn("Understood: metres."), summaries=[SUMMARY])
    second = write_script(workspace, "api2", turn("Still metres."))
    agent = scripted_agent(workspace, path, strategy="api", context_window=WINDOW)
    assert agent.run(LONG_BRIEF).status == "done"
    messages = agent.session.conversation.messages()
    # The provider read past 17,000 tokens, compacted, and the brief is gone from the context.
    assert [m.content for m in messages] == ["Understood: metres."]
    assert compaction_of(messages[0]) == {"type": "compaction", "content": SUMMARY}
    log = entries(agent)
    assert [e["reason"] for e in log if e["type"] == "replace"] == ["compact"]
    assert [(e["trigger"], e["ok"]) for e in log if e["type"] == "compact"] == [("server", True)]
    usage = [e for e in log if e["type"] == "usage"][0]
    assert usage["compaction_input_tokens"] >= 17_000 > usage["input_tokens"]

    # The next request is read from the block on: below the trigger, no second compaction.
    assert agent.run("and the units?", script=second).status == "done"
    sent = agent.last_provider.requests[-1]
    assert compaction_of(sent.messages[0]) == {"type": "compaction", "content": SUMMARY}
    assert agent.session.context.shared.compactions == 1

    # Resume: the same effective context, the block included, from the log alone.
    session_id = agent.session.id
    effective = [(m.id, m.reasoning) for m in agent.session.conversation.messages()]
    agent.close()
    other = scripted_agent(workspace, path, strategy="api", context_window=WINDOW)
    other.resume(session_id)
    assert [(m.id, m.reasoning) for m in other.session.conversation.messages()] == effective

    # Undo puts the brief back, and the answer no longer carries the undone block.
    done = other.session.context.undo()
    assert done.reason == "compact"
    restored = other.session.conversation.messages()
    assert [m.content for m in restored] == [LONG_BRIEF, "Understood: metres."]
    assert compaction_of(restored[1]) is None
    other.close()


def test_without_a_scripted_summary_the_emulation_digests_what_it_replaces() -> None:
    provider = ScriptedProvider({"turns": [{"text": "next"}]})
    provider.server_context = ServerContext(trigger=10)
    history = [
        Message(role="user", content="Write report.py; never touch data/raw."),
        Message(
            role="assistant",
            content="Writing it.",
            tool_calls=(
                ToolCall(id="c1", name="write_file", arguments={"path": "report.py", "content": "x"}),
            ),
        ),
        Message(role="user", tool_result={"call_id": "c1", "content": "wrote report.py"}),  # type: ignore[arg-type]
    ]
    response = collect(provider.stream(Request(system="", messages=history)))
    block = json.loads(response.reasoning[0].data or "")
    assert block["type"] == "compaction"
    assert "never touch data/raw" in block["content"] and "report.py" in block["content"]
    assert response.usage.compaction_input_tokens >= 10 and response.usage.compaction_output_tokens > 0


def test_below_the_trigger_or_without_server_context_nothing_is_compacted() -> None:
    provider = ScriptedProvider({"turns": [{"text": "a"}, {"text": "b"}]})
    ask = Request(system="", messages=[Message(role="user", content="hello")])
    assert collect(provider.stream(ask)).reasoning == []
    provider.server_context = ServerContext(trigger=100_000)
    response = collect(provider.stream(ask))
    assert response.reasoning == [] and response.usage.compaction_input_tokens == 0


def test_the_demo_under_api_compacts_once_on_the_server_and_says_so(tmp_path: Path) -> None:
    env = dict(os.environ, IPYTHONDIR=str(tmp_path / "ipython"))
    proc = run_demo(tmp_path, "--workspace", "ws", "--strategy", "api", env=env)
    out = proc.stdout
    assert out.count("⟳ compacted (server)") == 1 and "✓ done · 11 steps" in out
    assert "server compaction at 17,000" in out  # %context after the run
    log_line = next(line for line in out.splitlines() if line.startswith("session log: "))
    log = [json.loads(line) for line in Path(log_line.removeprefix("session log: ")).read_text().splitlines()]
    assert [e["trigger"] for e in log if e["type"] == "compact"] == ["server"]
    final = [e for e in log if e["type"] == "message" and e["role"] == "assistant"][-1]["content"]
    assert "compaction block" in final and "new_context" not in final
    assert "2997 ok rows, 3 warning rows skipped" in json.dumps(log)


def test_the_setting_and_the_option_both_select_it(workspace: Path) -> None:
    agent = Agent(PseudoClaude(workspace=str(workspace), strategy="api"))
    assert agent.config().strategy == "api"
    assert agent.config(strategy="rollover").strategy == "rollover"


def test_a_log_that_ended_before_the_replace_catches_up_before_the_next_request() -> None:
    """A crash between the answer that carried the block and its replace: the next request
    (here, the first under api of this strategy object) replaces from the block on first."""
    from pseudoclaude_nb.context.host import ContextHost
    from pseudoclaude_nb.conversation import Conversation
    from pseudoclaude_nb.messages import Reasoning

    block = Reasoning(kind="compaction", data=json.dumps({"type": "compaction", "content": SUMMARY}))
    answer = Message(role="assistant", content="Understood.", reasoning=(block,))
    conversation = Conversation([Message(role="user", content=LONG_BRIEF), answer])
    context = ContextHost(conversation, strategy="api")
    provider = ScriptedProvider({"turns": []})
    events: list = []
    context.before_step(provider, events.append)
    assert conversation.messages() == [answer]
    assert (
        provider.server_context is not None
        and provider.server_context.trigger == context.shared.settings.threshold
    )
    assert [e.trigger for e in events if type(e).__name__ == "Compacted"] == ["server"]
    context.before_step(provider, events.append)  # caught up: nothing more
    assert context.shared.compactions == 1
