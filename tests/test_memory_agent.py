"""Memory through ``Agent`` runs (SPEC §10, §13, §17): the index in the system prompt,
``read_memory`` with its budgets, the update after a run that ended normally, and memory
off — provably absent from what the provider received.

The model is the real scripted provider (its ``memory_ops`` answer the update request);
the last test does the same against the Anthropic fake server with the real SDK.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.events import MemoryUpdated, Notice
from pseudoclaude_nb.memory import MemoryManager
from pseudoclaude_nb.memory.index import NOTE
from pseudoclaude_nb.tools.memory import WITHHELD, MemoryReader
from tests.fakes import FakeServer
from tests.fakes import anthropic_server as anthropic_wire
from tests.scripts import run_magic, turn, write_script

BODY = "BODY-MARKER: run `pnpm install`; npm writes the wrong lock file."
DESCRIPTION = "DESC-MARKER this project uses pnpm"
PNPM = {
    "op": "create",
    "level": "project",
    "name": "package manager",
    "description": DESCRIPTION,
    "type": "preference",
    "body": BODY,
}
READ = ("read_memory", {"name": "package manager", "level": "project"})


@pytest.fixture
def agents():
    made: list[Agent] = []
    yield made
    for agent in made:
        agent.memory.wait(30)
        agent.close()


def make_agent(workspace: Path, agents: list[Agent], script_path: str = "", **settings) -> Agent:
    config = dict(
        workspace=str(workspace), provider="scripted", script=script_path, permission_mode="auto", fsync=False
    )
    config.update(settings)
    agent = Agent(PseudoClaude(**config))
    agents.append(agent)
    return agent


def log_entries(agent: Agent, kind: str) -> list[dict]:
    path = agent.session.dir / "conversation.jsonl"
    entries = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [e for e in entries if e["type"] == kind]


def sent_text(requests) -> str:
    """Everything the provider was sent in ``requests``, as one string."""
    return "\n".join(
        r.system + json.dumps([m.to_dict() for m in r.messages], ensure_ascii=False) + json.dumps(r.tools)
        for r in requests
    )


def remembered(workspace: Path, agents: list[Agent]) -> Agent:
    """An agent whose first run asked to remember, with the update applied."""
    path = write_script(workspace, "remember", turn("Noted: pnpm."), memory_ops=[[PNPM]])
    agent = make_agent(workspace, agents, path)
    assert agent.run("Remember that this project uses pnpm.").status == "done"
    assert agent.memory.wait(30)
    return agent


def test_a_run_that_asks_to_remember_saves_the_scripted_operations(workspace: Path, agents) -> None:
    agent = remembered(workspace, agents)
    conversation = [m.content for m in agent.session.conversation.messages()]
    assert conversation == ["Remember that this project uses pnpm.", "Noted: pnpm."]  # untouched
    (memory_request,) = [r for r in agent.last_provider.requests if r.purpose == "memory"]
    assert "Remember that this project uses pnpm." in memory_request.messages[0].content

    (topic,) = agent.memory.find("package manager", "project")
    first_user = agent.session.conversation.messages()[0]
    assert topic.source == f"{agent.session.id}/{first_user.id}"
    assert topic.body == BODY and topic.created_at == topic.updated_at
    folder = workspace / ".pseudoclaude" / "memory"
    assert sorted(p.name for p in folder.iterdir()) == ["MEMORY.md", "package-manager.md"]
    assert DESCRIPTION in (folder / "MEMORY.md").read_text(encoding="utf-8")
    notes = [e["text"] for e in log_entries(agent, "note")]
    assert notes == ["memory updated: created project/package manager"]
    # the update request is paid too: in the session's cost (issue 31), never an anchor
    (spent,) = log_entries(agent, "spend")
    assert spent["purpose"] == "memory" and spent["model"] == agent.last_provider.model
    assert spent["input_tokens"] > 0


def test_the_next_run_gets_the_index_and_can_read_a_body(workspace: Path, agents) -> None:
    agent = remembered(workspace, agents)
    ask = write_script(workspace, "ask", turn("Checking memory.", READ), turn("pnpm it is."))
    events: list = []
    summary = agent.run("Which package manager?", script=ask, listeners=[events.append])
    assert summary.status == "done" and summary.final_text == "pnpm it is."

    first, second = agent.last_provider.requests
    assert first.system.endswith(agent.memory.prompt_index() or "?")
    assert NOTE in first.system and "## Project Memory" in first.system and DESCRIPTION in first.system
    assert BODY not in first.system  # the index only
    assert "read_memory" in [t["name"] for t in first.tools]
    result = second.messages[-1].tool_result
    assert result is not None and BODY in result.content and not result.is_error
    # What the last update did is said at the start of the next run.
    updated = [e for e in events if isinstance(e, MemoryUpdated)]
    assert [u.changes for u in updated] == [("created project/package manager",)]
    assert any(isinstance(e, Notice) and "memory updated" in e.text for e in events)


def test_context_manifest_reports_the_index_as_its_own_part(workspace: Path, agents) -> None:
    agent = remembered(workspace, agents)
    data = agent.context_manifest()
    assert data["memory_included"] is True and data["memory_index"] == agent.memory.prompt_index()
    assert data["parts"]["memory"] > 0 and "read_memory" in data["tools"]
    assert data["memory_policy"] == "explicit"
    assert "memory index" not in [s["title"] for s in data["system_sections"]]

    agent.run("hello", script=write_script(workspace, "hello", turn("hi")))
    last = agent.last_manifest()
    assert (
        last is not None and last["memory_included"] is True and last["memory_index"] == data["memory_index"]
    )
    assert DESCRIPTION not in json.dumps(last["system_sections"])


@pytest.mark.parametrize("how", ["policy off", "--no-memory"])
@pytest.mark.script_may_remain  # the memory op is bait: the test shows no update asks for it
def test_memory_off_sends_neither_the_index_nor_any_body(workspace: Path, agents, how: str) -> None:
    agent = remembered(workspace, agents)
    # A body read in an earlier run is in the conversation …
    agent.run(
        "What do we use?", script=write_script(workspace, "read", turn("Reading.", READ), turn("pnpm."))
    )
    assert BODY in sent_text(agent.last_provider.requests[1:])

    # … and is withheld, with the index and the tool, once memory is off.
    later = write_script(
        workspace, "later", turn("Remember: blue.", ("list_files", {})), turn("Done."), memory_ops=[[PNPM]]
    )
    options = {}
    if how == "policy off":
        agent.settings.memory_policy = "off"
        data = agent.context_manifest()
        assert data["memory_included"] is False and data["memory_index"] is None
        assert "read_memory" not in data["tools"] and data["parts"]["memory"] == 0
    else:
        options["memory"] = False
    events: list = []
    summary = agent.run(
        "Remember that the sky is blue, then list the files.",
        script=later,
        listeners=[events.append],
        **options,
    )
    assert summary.status == "done"
    requests = agent.last_provider.requests
    assert len(requests) == 2  # the two agent steps; no memory update with memory off
    sent = sent_text(requests)
    for marker in (BODY, DESCRIPTION, "BODY-MARKER", NOTE, "## Project Memory"):
        assert marker not in sent, marker
    assert WITHHELD in sent  # the earlier call stays (the protocol needs it), its result is withheld
    assert all("read_memory" not in [t["name"] for t in r.tools] for r in requests)
    assert any(isinstance(e, Notice) and "withheld" in e.text for e in events)
    last = agent.last_manifest()
    assert last is not None and last["memory_included"] is False and last["memory_index"] is None
    agent.memory.wait(30)
    assert [t.name for t in agent.memory.topics()["project"]] == ["package manager"]


@pytest.mark.script_may_remain  # the memory op is bait: the test shows no update asks for it
def test_runs_that_do_not_end_normally_save_nothing(workspace: Path, agents) -> None:
    looping = write_script(workspace, "loop", turn("again", ("list_files", {})), memory_ops=[[PNPM]])
    agent = make_agent(workspace, agents, looping)
    summary = agent.run("Remember pnpm and keep listing", max_steps=1)
    assert summary.status == "max-steps"
    assert agent.memory.wait(30) and agent.last_provider.memory_ops_used == 0
    assert agent.memory.prompt_index() is None


def test_runs_without_a_request_to_remember_make_no_update_request(workspace: Path, agents) -> None:
    path = write_script(workspace, "plain", turn("Fixed."), memory_ops=[[PNPM]])
    agent = make_agent(workspace, agents, path)
    agent.run("fix the failing test")
    assert agent.memory.wait(30) and agent.last_provider.memory_ops_used == 0
    agent.settings.memory_policy = "auto"
    agent.run("fix the next one")
    assert agent.memory.wait(30) and agent.last_provider.memory_ops_used == 1
    assert agent.memory.find("package manager")


def test_invalid_operations_are_a_warning_note_and_valid_ones_apply(workspace: Path, agents) -> None:
    bad = {"op": "create", "level": "team", "name": "x", "description": "d", "type": "fact", "body": "b"}
    path = write_script(workspace, "mixed", turn("Noted."), memory_ops=[[bad, PNPM]])
    agent = make_agent(workspace, agents, path)
    agent.run("Remember pnpm.")
    assert agent.memory.wait(30)
    assert agent.memory.find("package manager")
    (note,) = log_entries(agent, "note")
    assert (
        note["level"] == "warning"
        and "created project/package manager" in note["text"]
        and "team" in note["text"]
    )
    assert [m.content for m in agent.session.conversation.messages()] == ["Remember pnpm.", "Noted."]


def test_two_quick_runs_lose_no_update(workspace: Path, agents, monkeypatch) -> None:
    first = write_script(workspace, "first", turn("Noted."), memory_ops=[[PNPM]])
    ruff = {**PNPM, "name": "linter", "description": "ruff, not flake8", "body": "ruff check ."}
    second = write_script(workspace, "second", turn("Noted too."), memory_ops=[[ruff]])
    agent = make_agent(workspace, agents, first)
    agent.memory_wait = 0  # the second run does not wait for the first update
    manager = agent.memory
    release, started = threading.Event(), threading.Event()
    real_update = manager._update

    def slow_first(job):
        if not started.is_set():
            started.set()
            assert release.wait(30)
        return real_update(job)

    monkeypatch.setattr(manager, "_update", slow_first)
    agent.run("Remember: pnpm.")
    assert started.wait(30)
    events: list = []
    agent.run("Remember: ruff.", script=second, listeners=[events.append])
    assert any(isinstance(e, Notice) and "still running" in e.text for e in events)
    assert manager.pending == 2
    release.set()
    assert manager.wait(30)
    assert agent.memory is manager
    assert sorted(t.name for t in manager.topics()["project"]) == ["linter", "package manager"]
    index = (workspace / ".pseudoclaude" / "memory" / "MEMORY.md").read_text(encoding="utf-8")
    assert "[linter]" in index and "[package manager]" in index


# --- read_memory's budgets ----------------------------------------------------------------------------


def test_read_memory_shows_4_kb_per_body_and_20_kb_per_run(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path)
    folder = tmp_path / ".pseudoclaude" / "memory"
    for i in range(6):
        manager.add("project", f"n{i}", f"note {i}", "fact", "x")
        path = folder / f"n{i}.md"
        text = path.read_text(encoding="utf-8").replace(
            "\nx\n", "\n" + "汉" * 3000 + "\n"
        )  # 9,000 bytes, by hand
        path.write_text(text, encoding="utf-8")
    reader = MemoryReader(manager)
    shown = [reader.read(f"n{i}") for i in range(5)]
    for text in shown[:4]:
        body = text.split("\n\n", 1)[1].split("\n[…")[0]
        assert len(body.encode("utf-8")) <= 4096 and body == "汉" * len(body)  # whole characters only
        assert "more bytes not shown: notes show at most 4,096 bytes" in text
    assert "budget for memory notes is used up" in shown[4]
    assert reader.used <= 20_000
    with pytest.raises(Exception, match="has read its 20,000 bytes"):
        reader.read("n5")
    with pytest.raises(Exception, match="no note named 'ghost'"):
        MemoryReader(manager).read("ghost")


# --- the same against a real wire: Anthropic's SDK and the fake server ------------------------------------


def test_memory_off_on_the_wire_with_the_anthropic_fake_server(ip, workspace: Path, monkeypatch) -> None:
    from pseudoclaude_nb.magics import current_agent

    with FakeServer("anthropic") as fake:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-memory-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.url)
        fake.play(anthropic_wire.answer("Noted."), anthropic_wire.message(json.dumps([PNPM])))
        run_magic(ip, 'agent --provider anthropic --mode auto "Remember that this project uses pnpm."')
        agent = current_agent(ip)
        assert agent.memory.wait(30)
        remember, update = fake.requests
        assert "Policy: explicit" in json.dumps(update.body["system"]) and "stream" not in update.body
        assert "## Project Memory" not in json.dumps(remember.body)  # nothing was remembered yet

        fake.play(anthropic_wire.answer("pnpm."))
        run_magic(ip, 'agent --provider anthropic --mode auto "Which package manager?"')
        with_memory = fake.requests[2].body
        assert DESCRIPTION in json.dumps(with_memory["system"]) and "read_memory" in json.dumps(
            with_memory["tools"]
        )

        run_magic(ip, "memory off")
        fake.play(anthropic_wire.answer("No memory here."))
        out = run_magic(ip, 'agent --provider anthropic --mode auto "Anything to note?"')
        assert "No memory here." in out
        without = json.dumps(fake.requests[3].body, ensure_ascii=False)
        for marker in (DESCRIPTION, "BODY-MARKER", "## Project Memory", "read_memory", "Memory: short notes"):
            assert marker not in without, marker
        assert len(fake.requests) == 4 and fake.unplayed == 0
