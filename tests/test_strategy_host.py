"""The host that applies a strategy's actions (issue 45), and loading a strategy.

Real parts throughout: a ``Conversation`` with its ``SessionWriter``, the ``ContextHost``, the
scripted provider, and ``Agent.run`` / the magics where a person would be. A strategy here is
a small ``Strategy`` subclass, as a reader of docs/strategies.md would write one.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from traitlets import TraitError

from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.context.host import ContextHost
from pseudoclaude_nb.context.registry import load_strategy
from pseudoclaude_nb.context.settings import CompactSettings
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.errors import ConfigError
from pseudoclaude_nb.events import Dropped, Notice
from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.messages import Message, ToolCall, ToolResult, pairing_problems
from pseudoclaude_nb.providers import ScriptedProvider
from pseudoclaude_nb.session import SessionWriter, load_session, new_session_dir
from pseudoclaude_nb.strategies import (
    Drop,
    Keep,
    Note,
    Restrict,
    Spill,
    Strategy,
    Summarize,
    View,
)
from tests.scripts import read_log, script, scripted_agent, turn, write_script
from tests.scripts import run_magic as run


class Scripted(Strategy):
    """Answers ``before`` with whatever the test set, once; records every view it was shown."""

    name = "scripted-policy"

    def __init__(self, answer: object = None) -> None:
        self.answer = answer if answer is not None else Keep()
        self.seen: list[View] = []

    def decide(self, view: View):
        self.seen.append(view)
        if view.trigger == "before":
            answer, self.answer = self.answer, Keep()
            return answer
        return Keep()


@pytest.fixture
def session(workspace: Path) -> Iterator[tuple[Conversation, SessionWriter, Path]]:
    path = new_session_dir(workspace)
    with SessionWriter(path, fsync=False) as writer:
        conversation = Conversation()
        writer.attach(conversation)
        yield conversation, writer, path


def host(session, strategy: Strategy, workspace: Path) -> ContextHost:
    conversation, writer, path = session
    context = ContextHost(
        conversation,
        CompactSettings(),
        strategy=strategy,
        session_dir=path,
        workspace=workspace,
        writer=writer,
    )
    context.configure(CompactSettings(), system="system", tools=[])
    return context


def exchange(conversation: Conversation, calls: int, size: int = 200) -> Message:
    """An answer with ``calls`` tool calls and their results; the answer."""
    made = [ToolCall(id=f"c{len(conversation)}-{k}", name="bash", arguments={}) for k in range(calls)]
    answer = conversation.add_assistant_tool_calls("", made)
    for call in made:
        conversation.add_result(ToolResult(call_id=call.id, content="r" * size))
    return answer


# --- what a strategy sees ---------------------------------------------------------------------------


def test_the_view_shows_each_message_with_its_kind_step_and_tokens(session, workspace: Path) -> None:
    conversation = session[0]
    conversation.add_user("first")
    exchange(conversation, 2)
    conversation.add_assistant("done")
    policy = Scripted()
    context = host(session, policy, workspace)
    context.before_step(ScriptedProvider(script()))
    view = policy.seen[-1]
    assert view.trigger == "before" and view.window == 200_000 and view.threshold == 167_000
    assert view.estimate > 0 and view.limits.base == 167_000 and view.limits.hard == 180_000
    assert [(m.role, m.kind, m.step) for m in view.messages] == [
        ("user", "text", 1),
        ("assistant", "tool_call", 1),
        ("user", "tool_result", 2),
        ("user", "tool_result", 2),
        ("assistant", "text", 2),
    ]
    assert view.step == 3 and all(m.tokens > 0 for m in view.messages)
    assert view.messages[1].call_ids == view.messages[2].call_ids + view.messages[3].call_ids
    assert view.messages[2].tools == ("bash",) and not view.messages[2].spilled
    with pytest.raises(AttributeError):
        view.estimate = 0  # type: ignore[misc]  # read-only


# --- pairs kept whole, unknown ids refused ------------------------------------------------------------


def test_a_drop_naming_one_result_takes_its_call_and_the_other_results_and_says_so(
    session, workspace: Path
) -> None:
    conversation, _, path = session
    conversation.add_user("go")
    answer = exchange(conversation, 2)
    conversation.add_assistant("after")
    first_result = conversation.messages()[2]
    events: list = []
    context = host(session, Scripted(Drop([first_result.id])), workspace)
    context.before_step(ScriptedProvider(script()), events.append)
    left = conversation.messages()
    assert [m.content for m in left] == ["go", "after"] and answer.id not in {m.id for m in left}
    assert pairing_problems(left) == []
    said = [e.text for e in events if isinstance(e, Notice)]
    assert any("2 messages more go with it" in text for text in said)
    [dropped] = [e for e in events if isinstance(e, Dropped)]
    assert dropped.messages == 3 and dropped.widened == 2 and dropped.strategy == "scripted-policy"
    # One replace in the log, naming the strategy; the loader yields what the conversation holds.
    markers = [e for e in read_log(path) if e["type"] == "replace"]
    assert [(m["reason"], m["strategy"], m["count"]) for m in markers] == [("drop", "scripted-policy", 2)]
    assert load_session(path).messages == left


def test_an_unknown_id_refuses_the_whole_action_and_says_so(session, workspace: Path) -> None:
    conversation, _, path = session
    conversation.add_user("go")
    exchange(conversation, 1)
    before = conversation.messages()
    events: list = []
    real = before[0].id
    context = host(session, Scripted(Drop([real, "no-such-id"])), workspace)
    context.before_step(ScriptedProvider(script()), events.append)
    assert conversation.messages() == before  # nothing half applied
    assert any(
        "'no-such-id'" in e.text and "nothing was dropped" in e.text for e in events if isinstance(e, Notice)
    )
    assert not [e for e in read_log(path) if e["type"] == "replace"]


def test_a_spill_naming_a_call_spills_its_results(session, workspace: Path) -> None:
    conversation, _, path = session
    conversation.add_user("go")
    answer = exchange(conversation, 2, size=3_000)
    context = host(session, Scripted(Spill(answer.id)), workspace)
    context.before_step(ScriptedProvider(script()))
    results = [m for m in conversation.messages() if m.tool_result is not None]
    assert len(results) == 2 and all(m.is_spill_preview for m in results)
    assert all((path / m.tool_result.spilled).exists() for m in results)  # type: ignore[union-attr,operator]
    [marker] = [e for e in read_log(path) if e["type"] == "replace"]
    assert marker["reason"] == "snapshot" and marker["strategy"] == "scripted-policy"


def test_a_summary_up_to_a_message_keeps_the_pair_it_starts_in_and_sends_the_instructions(
    session, workspace: Path
) -> None:
    conversation, _, path = session
    conversation.add_user("old question " + "words " * 300)
    conversation.add_assistant("old answer " + "words " * 300)
    conversation.add_user("newer")
    exchange(conversation, 1)
    result = conversation.messages()[-1]
    provider = ScriptedProvider(script(summaries=["short summary"]))
    policy = Scripted(Summarize(upto=result.id, instructions="Keep every file name."))
    context = host(session, policy, workspace)
    context.before_step(provider)
    [request] = [r for r in provider.requests if r.purpose == "summary"]
    assert request.system.endswith("Keep every file name.")
    left = conversation.messages()
    # Summary, acknowledgement, reminder, then the call and its result: the cut moved back to the call.
    assert "short summary" in left[0].content and left[-2].tool_calls and left[-1].tool_result is not None
    marker = [e for e in read_log(path) if e["type"] == "replace"][-1]
    assert marker["reason"] == "compact" and marker["strategy"] == "scripted-policy"
    assert context._view("status", 0).messages[0].kind == "summary"


def test_a_native_summary_without_the_providers_own_compaction_is_ours(session, workspace: Path) -> None:
    conversation, _, path = session
    for i in range(4):
        conversation.add_user(f"q{i} " + "w " * 400)
        conversation.add_assistant(f"a{i} " + "w " * 400)
    provider = ScriptedProvider(script(summaries=["our summary"]))  # no on-demand compaction
    policy = Scripted(Summarize(native=True))
    context = host(session, policy, workspace)
    context.configure(CompactSettings(recent_tokens=500), system="system", tools=[])
    context.before_step(provider)
    assert [r.purpose for r in provider.requests] == ["summary"]
    assert "our summary" in conversation.messages()[0].content
    marker = [e for e in read_log(path) if e["type"] == "replace"][-1]
    assert marker["reason"] == "compact" and marker["strategy"] == "scripted-policy"
    # The provider compacts nothing on its own for a strategy that does not ask it to.
    assert policy.seen[0].server_compacts is False and policy.seen[0].server_compaction is None


def test_a_note_and_a_restriction_reach_the_model_and_the_next_request(session, workspace: Path) -> None:
    conversation = session[0]
    conversation.add_user("go")
    context = host(session, Scripted(Note("[host note] wrap up soon", kind="wrap-up")), workspace)
    context.before_step(ScriptedProvider(script()))
    assert conversation.last().host == "wrap-up" and "wrap-up" in context.shared.notes  # type: ignore[union-attr]
    context.strategy = Scripted(Restrict(("read_file",), "[host note] only read now"))
    context.before_step(ScriptedProvider(script()))
    from pseudoclaude_nb.tools import build_tools

    surface = context.surface(build_tools(workspace))
    assert surface.names() == ["read_file"]
    refused = surface.run(ToolCall(id="x", name="bash", arguments={"command": "ls"}), None)  # type: ignore[arg-type]
    assert refused.is_error and "refused" in refused.content
    context.before_step(ScriptedProvider(script()))  # a restriction holds for one step
    assert "bash" in context.surface(build_tools(workspace)).names()


def test_the_built_in_replaces_name_their_strategy_in_the_log(session, workspace: Path) -> None:
    conversation, _, path = session
    for i in range(6):
        conversation.add_user(f"q{i} " + "w " * 400)
        conversation.add_assistant(f"a{i} " + "w " * 400)
    context = host(session, load_strategy("compact"), workspace)
    context.configure(CompactSettings(recent_tokens=500), system="system", tools=[])
    assert context.summarize(ScriptedProvider(script(summaries=["s"]))).ok
    [marker] = [e for e in read_log(path) if e["type"] == "replace"]
    assert marker["reason"] == "compact" and marker["strategy"] == "compact"


# --- a dry plan is pure --------------------------------------------------------------------------------


def test_context_reads_the_session_without_setting_anything(ip, workspace: Path) -> None:
    path = write_script(workspace, "s", turn("hi"))
    run(ip, f"agent --provider scripted --script {path} --strategy rollover hello")
    agent = current_agent(ip)
    shared = agent.session.context.shared
    shared.forget_anchor()  # the dry estimate would set one on the state it read
    ip.run_line_magic("config", "PseudoClaude.context_window = 50000")  # a plan unlike the session's
    before = (shared.anchor, shared.observed, shared.system, shared.tools, shared.settings, set(shared.notes))
    data = json.loads(run(ip, "context --json"))
    assert data["context_window"] == 50_000 and data["strategy"] == "rollover"
    assert data["rollover_limits"]["hard"] == 30_000  # the plan's window, not the session's
    after = (shared.anchor, shared.observed, shared.system, shared.tools, shared.settings, set(shared.notes))
    assert after == before


# --- loading: one clear line before any request -----------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("def broken(:\n", "does not import: SyntaxError"),
        (
            "from pseudoclaude_nb.strategies import Strategy\nclass Mine(Strategy):\n    pass\n",
            "lacks decide",
        ),
        ("class Mine:\n    def decide(self, view):\n        return None\n", "is not a strategy"),
        (
            "from pseudoclaude_nb.strategies import Keep, Strategy\n"
            "class Mine(Strategy):\n    tools = ('rm_rf',)\n    def decide(self, view):\n        return Keep()\n",
            "tools may name only new_context, search_history",
        ),
        ("x = 1\n", "module mine has no Mine"),
    ],
)
def test_a_strategy_that_cannot_be_used_is_one_line_before_any_request(
    ip, workspace: Path, source: str, said: str
) -> None:
    (workspace / "mine.py").write_text(source)
    path = write_script(workspace, "s", turn("never asked"))
    with pytest.raises(UsageError, match=said) as caught:
        ip.run_line_magic("agent", f"--provider scripted --script {path} --strategy mine:Mine go")
    assert "\n" not in str(caught.value)
    assert not (workspace / ".pseudoclaude" / "sessions").exists() or not any(
        (workspace / ".pseudoclaude" / "sessions").iterdir()
    )  # no session was started


def test_a_bad_strategy_name_is_refused_by_the_setting_and_the_option(ip, workspace: Path) -> None:
    with pytest.raises(TraitError, match="is not a strategy"):
        PseudoClaude(strategy="not a name!")
    assert PseudoClaude(strategy="Rollover").strategy == "rollover"  # built-ins stay case-insensitive
    assert PseudoClaude(strategy="pkg.mod:Cls").strategy == "pkg.mod:Cls"
    with pytest.raises(UsageError, match="--strategy 'a!b' is not a strategy"):
        ip.run_line_magic("agent", "--strategy a!b go")


@pytest.mark.script_may_remain  # the run stops at the strategy's error, on purpose
def test_a_strategy_that_raises_mid_run_stops_it_cleanly_and_names_the_error(workspace: Path, agents) -> None:
    (workspace / "fragile.py").write_text(
        "from pseudoclaude_nb.strategies import Keep, Strategy\n"
        "class Fragile(Strategy):\n"
        "    def decide(self, view):\n"
        "        if view.trigger == 'before' and view.step > 1:\n"
        "            raise ValueError('no plan for step two')\n"
        "        return Keep()\n"
    )
    (workspace / "a.txt").write_text("hello\n")
    path = write_script(workspace, "s", turn("", ("read_file", {"path": "a.txt"})), turn("never"))
    agent = scripted_agent(workspace, path, strategy="fragile:Fragile")
    agents.append(agent)
    summary = agent.run("go")
    assert summary.status == "error"
    text = str(summary.error)
    assert "strategy Fragile raised ValueError in decide: no plan for step two" in text
    assert "before anything of it was applied" in text
    messages = agent.session.conversation.messages()
    assert pairing_problems(messages) == [] and load_session(agent.session.dir).messages == messages


def test_a_workspace_module_is_loaded_by_its_path_and_nothing_else_of_the_workspace(
    ip, workspace: Path
) -> None:
    """Naming ``mine:Mine`` loads ``mine.py`` and only it: the workspace is not put on sys.path,
    so a module it imports is not taken from the workspace (where a cloned repository could
    plant one)."""
    (workspace / "planted_pc_helper.py").write_text(
        "from pathlib import Path\nPath('planted-ran').write_text('yes')\n"
    )
    (workspace / "mine.py").write_text(
        "import planted_pc_helper\n"
        "from pseudoclaude_nb.strategies import Keep, Strategy\n"
        "class Mine(Strategy):\n    def decide(self, view):\n        return Keep()\n"
    )
    path_before = list(sys.path)
    with pytest.raises(ConfigError, match="does not import: ModuleNotFoundError"):
        load_strategy("mine:Mine", workspace)
    assert not (workspace / "planted-ran").exists() and sys.path == path_before
    assert "planted_pc_helper" not in sys.modules


def test_an_installed_strategy_loads_by_its_entry_point_name(
    ip, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    (site / "pc_strategy_pkg").mkdir(parents=True)
    (site / "pc_strategy_pkg" / "__init__.py").write_text(
        "from pseudoclaude_nb.strategies import Keep, Strategy\n"
        "class Patient(Strategy):\n    name = 'patient'\n    def decide(self, view):\n        return Keep()\n"
    )
    info = site / "pc_strategy_pkg-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pc-strategy-pkg\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[pseudoclaude_nb.strategies]\npatient = pc_strategy_pkg:Patient\n"
    )
    monkeypatch.syspath_prepend(str(site))
    assert load_strategy("patient").name == "patient"
    path = write_script(workspace, "s", turn("hi"))
    run(ip, f"agent --provider scripted --script {path} --strategy patient hello")
    assert json.loads(run(ip, "context --json"))["strategy"] == "patient"
    with pytest.raises(ConfigError, match="installed: patient"):
        load_strategy("impatient")


def test_an_action_applied_by_hand_gets_the_same_rules(session, workspace: Path) -> None:
    """``ContextHost.apply``: an action tried from a notebook (or the lab) is applied as a
    strategy's would be: pairs whole, one replace naming the current strategy."""
    conversation, _, path = session
    conversation.add_user("go")
    answer = exchange(conversation, 1)
    context = host(session, load_strategy("compact"), workspace)
    dropped = context.apply(Drop([answer.id]))
    assert isinstance(dropped, Dropped) and dropped.messages == 2
    assert [m.content for m in conversation.messages()] == ["go"]
    [marker] = [e for e in read_log(path) if e["type"] == "replace"]
    assert (marker["reason"], marker["strategy"]) == ("drop", "compact")
    assert context.undo().reason == "drop"  # and it is undone like any drop
    assert len(conversation) == 3


def test_a_fork_takes_your_strategy_and_refuses_one_that_does_not_load(ip, workspace: Path) -> None:
    (workspace / "mine.py").write_text(
        "from pseudoclaude_nb.strategies import Keep, Strategy\n"
        "class Mine(Strategy):\n    name = 'mine'\n    def decide(self, view):\n        return Keep()\n"
    )
    path = write_script(workspace, "s", turn("hi"))
    run(ip, f"agent --provider scripted --script {path} hello")
    sessions = workspace / ".pseudoclaude" / "sessions"
    before = sorted(p.name for p in sessions.iterdir())
    with pytest.raises(UsageError, match="module nothere does not import"):
        ip.run_line_magic("sessions", "fork --strategy nothere:Mine")
    assert sorted(p.name for p in sessions.iterdir()) == before  # nothing was forked
    out = run(ip, "sessions fork --strategy mine:Mine")
    assert "(strategy mine:Mine)" in out
    agent = current_agent(ip)
    assert agent.session.context.strategy.name == "mine" and agent.session.id not in before
