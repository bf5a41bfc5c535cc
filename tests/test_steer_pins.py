"""Pins (SPEC §19): ``%context pin TEXT | pins | unpin N``, kept verbatim through everything.

A pin is a ``pin`` log entry (an ``unpin`` ends it), outside the conversation: the model
gets the pins as a system section in every request, so Layer 2, a rollover handoff and a
resume keep them; a resume from the last replace reads them from the sidecar, not the log.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from IPython.core.error import UsageError

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.magics import current_agent
from pseudoclaude_nb.session import entries, fast_load, load_session, sidecar
from pseudoclaude_nb.session import loader as loader_module
from pseudoclaude_nb.session.entries import PinEntry, UnpinEntry
from pseudoclaude_nb.session.writer import SessionWriter
from tests.scripts import read_log, script, scripted_agent, turn
from tests.scripts import run_magic as run

SPEC_PIN = "Use pnpm 9, never npm.  Keep `evaluate_budget(state)` pure."


def write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def pin_entries(session_dir: Path) -> list[dict]:
    return [e for e in read_log(session_dir) if e["type"] in ("pin", "unpin")]


def system_of(agent: Agent, index: int = -1) -> str:
    return agent.last_runner.provider.requests[index].system


# --- the magics --------------------------------------------------------------------------------------


def test_pin_pins_unpin_through_the_magics_and_the_request(ip, workspace: Path) -> None:
    path = write(workspace / "s.json", script(turn("one")))
    run(ip, f"agent --provider scripted --script {path} hello")
    agent = current_agent(ip)
    assert run(ip, "context pins") == "no pins\n"

    assert run(ip, "context pin use pnpm, never npm") == "pinned #1: use pnpm, never npm\n"
    assert run(ip, "context pin tests live in tests/") == "pinned #2: tests live in tests/\n"
    listing = run(ip, "context pins")
    assert "2 pins, ~" in listing and "tokens in every request" in listing
    assert "#1  ~" in listing and "use pnpm, never npm" in listing and "#2  ~" in listing

    # Durable at once, in the agreed format.
    pins = pin_entries(agent.session.dir)
    assert [(e["type"], e["text"]) for e in pins] == [
        ("pin", "use pnpm, never npm"),
        ("pin", "tests live in tests/"),
    ]
    assert all(e["v"] == 1 and len(e["id"]) == 32 and isinstance(e["ts"], float) for e in pins)

    # The model gets them as a system section, numbered like the listing.
    run(ip, f"agent --provider scripted --script {path} go on")
    system = system_of(current_agent(ip))
    assert "## Pinned by the user (kept verbatim)" in system
    assert "[1] use pnpm, never npm" in system and "[2] tests live in tests/" in system

    # %context shows them as their own part, with their estimate.
    data = json.loads(run(ip, "context --json"))
    assert data["parts"]["pins"] > 0
    # The listing's "in every request" is what %context counts for the pins (heading included).
    assert f"2 pins, ~{data['parts']['pins']:,} tokens in every request with the section's heading" in run(
        ip, "context pins"
    )
    assert all(s["title"] != "pins" for s in data["system_sections"])
    assert any(line.strip().startswith("pins ") for line in run(ip, "context").splitlines())

    assert run(ip, "context unpin 1") == "unpinned #1: use pnpm, never npm\n"
    unpin = pin_entries(agent.session.dir)[-1]
    assert unpin["type"] == "unpin" and unpin["pin"] == pins[0]["id"] and len(unpin["id"]) == 32
    run(ip, f"agent --provider scripted --script {path} and again")
    system = system_of(current_agent(ip))
    assert "never npm" not in system and "[1] tests live in tests/" in system


def test_bad_unpin_numbers_and_words_are_usage_errors(ip, workspace: Path) -> None:
    with pytest.raises(UsageError, match="no pins to drop"):
        ip.run_line_magic("context", "unpin 1")
    run(ip, "context pin a")
    run(ip, "context pin b")
    for word in ("0", "3", "-1"):
        with pytest.raises(UsageError, match="numbered 1 to 2"):
            ip.run_line_magic("context", f"unpin {word}")
    with pytest.raises(UsageError, match="numbered 1 to 2"):
        ip.run_line_magic("context", "unpin x")
    with pytest.raises(UsageError, match="usage: %context pin TEXT"):
        ip.run_line_magic("context", "pinz")
    with pytest.raises(UsageError, match="nothing to pin"):
        ip.run_line_magic("context", "pin")
    assert "2 pins" in run(ip, "context pins")


def test_a_pin_before_the_first_run_lands_in_the_session_that_run_starts(ip, workspace: Path) -> None:
    out = run(ip, "context pin the deadline is Friday")
    assert out.startswith("pinned #1: the deadline is Friday (held")
    assert "held for the session the next run starts" in run(ip, "context pins")
    path = write(workspace / "s.json", script(turn("ok")))
    run(ip, f"agent --provider scripted --script {path} start")
    agent = current_agent(ip)
    assert "[1] the deadline is Friday" in system_of(agent, 0)
    assert [e["text"] for e in pin_entries(agent.session.dir)] == ["the deadline is Friday"]
    assert load_session(agent.session.dir).pins[0].text == "the deadline is Friday"
    # A new session starts without them; the old one keeps its pin.
    run(ip, "sessions new")
    assert run(ip, "context pins") == "no pins\n"


def test_pin_first_pins_the_first_prompt_as_typed(ip, workspace: Path) -> None:
    with pytest.raises(UsageError, match="no session yet"):
        ip.run_line_magic("context", "pin --first")
    path = write(workspace / "s.json", script(turn("ok")))  # each run plays it from the top
    spec = "Build a CSV loader:  keep  headers,\nskip blank lines."
    current_agent(ip).run(spec, provider="scripted", script=str(path))
    out = run(ip, "context pin --first")
    assert out == "pinned #1: Build a CSV loader: keep headers, skip blank lines.\n"
    agent = current_agent(ip)
    assert agent.pins.texts() == [spec]  # verbatim: spaces and the line break kept
    run(ip, f"agent --provider scripted --script {path} next")
    assert f"[1] {spec}" in system_of(agent)


def test_a_typed_pin_keeps_its_spaces_quotes_and_dashes(ip, workspace: Path) -> None:
    run(ip, "context pin " + SPEC_PIN)
    run(ip, 'context pin say "done" only after   `pytest -q` passes')
    with pytest.raises(UsageError, match="no session yet"):  # the first prompt, not the word
        ip.run_line_magic("context", "pin --first")
    run(ip, "context pin -- --first is a flag")
    assert current_agent(ip).pins.texts() == [
        SPEC_PIN,
        'say "done" only after   `pytest -q` passes',
        "--first is a flag",
    ]
    # "--" ends the options (docs/steering.md): the word itself, not the first prompt.
    assert (
        run(ip, "context pin -- --first")
        == "pinned #4: --first (held: written into the session the next run starts)\n"
    )
    assert current_agent(ip).pins.texts()[-1] == "--first"


def test_pin_message_pins_that_messages_text_numbered_as_context_at(ip, workspace: Path) -> None:
    path = write(workspace / "s.json", script(turn("The budget is 40 requests a day.")))
    with pytest.raises(UsageError, match="no session yet"):
        ip.run_line_magic("context", "pin --message 1")
    run(ip, f"agent --provider scripted --script {path} how much can we spend?")
    at = run(ip, "context --at 1")
    assert "   1  user" in at
    run(ip, "context pin --message 1")
    run(ip, "context pin --message 2")
    assert current_agent(ip).pins.texts() == ["how much can we spend?", "The budget is 40 requests a day."]
    for words, match in (("3", "numbered 1 to 2"), ("x", "one message number"), ("", "one message number")):
        with pytest.raises(UsageError, match=match):
            ip.run_line_magic("context", f"pin --message {words}")
    run(ip, f"agent --provider scripted --script {path} and then?")
    assert "[2] The budget is 40 requests a day." in system_of(current_agent(ip))


def test_printed_pins_have_no_escape_bytes(ip, workspace: Path) -> None:
    hostile = "red \x1b[31mALERT\x1b]0;title\x07 \u202eevil"
    current_agent(ip).pins.add(hostile)
    for line in ("context pins", "context unpin 1"):
        out = run(ip, line)
        assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    out = run(ip, "context pin x\x1b[2Jy")
    assert "\x1b" not in out and "\\x1b" in out


# --- durable and redacted --------------------------------------------------------------------------


def test_a_pin_holding_a_secret_is_redacted_on_disk(workspace: Path, agents) -> None:
    key = "sk-ant-api03-" + "A1b2C3d4E5f6G7h8" * 5
    agent = scripted_agent(workspace, write(workspace / "s.json", script(turn("ok"))).as_posix())
    agents.append(agent)
    agent.run("hi")
    agent.pins.add(f"deploy with {key}")
    raw = (agent.session.dir / "conversation.jsonl").read_text(encoding="utf-8")
    assert key not in raw and "[REDACTED:" in raw
    (pin,) = pin_entries(agent.session.dir)
    assert pin["text"].startswith("deploy with [REDACTED:")


# --- surviving Layer 2, a handoff, a resume --------------------------------------------------------


def test_a_pin_survives_a_layer2_compaction(ip, workspace: Path) -> None:
    answer = turn("answer " + "words " * 300)  # each run plays the script from the top
    path = write(
        workspace / "s.json", script(answer, summaries=["## Confirmed requirements\n- five questions"])
    )
    run(ip, "context pin " + SPEC_PIN)
    for i in range(4):
        run(ip, f"agent --provider scripted --script {path} question {i}")
    ip.run_line_magic("config", "PseudoClaude.recent_tokens = 500")
    assert "compacted: ~" in run(ip, "compact")
    agent = current_agent(ip)
    first = agent.session.conversation.messages()[0]
    assert first.content.startswith("<summary>") and "pnpm" not in first.content
    assert load_session(agent.session.dir).replaces == 1
    run(ip, f"agent --provider scripted --script {path} after the summary")
    assert agent.last_runner.provider.requests[-1].messages[0].content.startswith("<summary>")
    assert "[1] " + SPEC_PIN in system_of(agent)
    assert [p.text for p in load_session(agent.session.dir).pins] == [SPEC_PIN]


def test_a_pin_survives_a_rollover_handoff(workspace: Path, agents) -> None:
    handoff = {
        "confirmed_requirements": [{"text": "remind once", "source": "user"}],
        "agent_inferences": [],
        "unresolved_conflicts": [],
        "unverified_acceptance_criteria": [],
    }
    path = write(
        workspace / "s.json",
        script(
            turn("", ("new_context", {"handoff": handoff, "related_files": []}, "nc")),
            turn("fresh window"),
            context_window=100_000,
        ),
    )
    agent = Agent(
        PseudoClaude(
            workspace=str(workspace),
            provider="scripted",
            script=str(path),
            permission_mode="auto",
            fsync=False,
            strategy="rollover",
        )
    )
    agents.append(agent)
    agent.pins.add(SPEC_PIN)
    summary = agent.run("fix the budget rule")
    assert summary.status == "done", summary.error
    requests = agent.last_runner.provider.requests
    after = requests[-1]
    assert len(after.messages) == 1 and "<handoff>" in after.messages[0].content  # the new window
    assert SPEC_PIN not in after.messages[0].content  # the handoff need not carry it ...
    assert f"[1] {SPEC_PIN}" in after.system  # ... the system section does, verbatim
    assert [e["type"] for e in read_log(agent.session.dir) if e["type"] in ("pin", "replace")] == [
        "pin",
        "replace",
    ]
    assert [p.text for p in load_session(agent.session.dir).pins] == [SPEC_PIN]


def test_pins_and_unpins_survive_a_resume_in_a_new_agent(workspace: Path, agents) -> None:
    path = write(workspace / "s.json", script(turn("ok")))  # each run plays it from the top
    first = scripted_agent(workspace, str(path))
    agents.append(first)
    first.run("hi")
    for text in ("keep", "drop", "also keep"):
        first.pins.add(text)
    first.pins.remove(2)
    sid = first.session.id
    first.close()

    second = scripted_agent(workspace, str(path))
    agents.append(second)
    second.resume(sid)
    assert second.pins.texts() == ["keep", "also keep"]
    second.run("again")
    system = system_of(second)
    assert "[1] keep" in system and "[2] also keep" in system and "drop" not in system


# --- the resume reads the sidecar, not the log before the last replace --------------------------------


def _session_with_pins_before_a_replace(workspace: Path) -> Path:
    """A log: pins, an unpin, many messages, a replace, then one more pin after it."""
    from pseudoclaude_nb.conversation import Conversation
    from pseudoclaude_nb.messages import Message
    from pseudoclaude_nb.workspace import new_session_dir

    folder = new_session_dir(workspace)
    conv = Conversation([])
    with SessionWriter(folder, fsync=False, model="scripted-test") as writer:
        writer.attach(conv)
        writer.record(PinEntry.new(id="a" * 32, ts=1.0, text="first pin"))
        writer.record(PinEntry.new(id="b" * 32, ts=2.0, text="second pin"))
        for i in range(300):
            conv.append(Message(role="user" if i % 2 == 0 else "assistant", content=f"m{i} " + "x" * 200))
        writer.record(UnpinEntry.new("a" * 32))
        for i in range(300):
            conv.append(Message(role="user" if i % 2 == 0 else "assistant", content=f"n{i} " + "y" * 200))
        conv.replace("compact", [Message(role="user", content="<summary>s</summary>")])
        writer.wait_meta()
        writer.record(PinEntry.new(id="c" * 32, ts=3.0, text="after the replace"))
        conv.append(Message(role="assistant", content="ok"))
    return folder


def _fast(folder: Path, monkeypatch: pytest.MonkeyPatch):
    """A fast load whose head and look-back are small, so it skips most of this small log."""
    monkeypatch.setattr(loader_module, "FAST_MIN_SKIP", 0)
    monkeypatch.setattr(fast_load, "LOOKBACK", 4096)
    monkeypatch.setattr(fast_load, "HEAD_LIMIT", 4096)
    return load_session(folder)


def test_the_fast_resume_takes_the_pins_from_the_sidecar(workspace: Path, monkeypatch) -> None:
    folder = _session_with_pins_before_a_replace(workspace)
    full = load_session(folder, full=True)
    assert [p.text for p in full.pins] == ["second pin", "after the replace"]
    meta = sidecar.read_meta(folder)
    assert meta is not None and [p[2] for p in meta["replay"]["pins"]] == ["second pin", "after the replace"]

    # The pin entries before the replace are in the part a fast load skips ...
    reads = _reads_for_pins(monkeypatch)
    fast = _fast(folder, monkeypatch)
    assert fast.skipped is not None and fast.skipped[0] < fast.skipped[1]
    assert [(p.id, p.text, p.ts) for p in fast.pins] == [(p.id, p.text, p.ts) for p in full.pins]
    # ... and the sidecar gives them: finding them read only the sidecar's checks of the log
    # (its first bytes, and the line end at its offset), not the 200 KB before the replace.
    assert reads and sum(size for _, size in reads) <= sidecar.HEAD_BYTES + 1


def _reads_for_pins(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The (offset, size) of every read of the log made while the fast load looks for pins."""
    reads: list[tuple[int, int]] = []
    looking = [False]
    real_pread, real_pins_before = fast_load.os.pread, fast_load._pins_before

    def pread(fd: int, size: int, at: int) -> bytes:
        if looking[0]:
            reads.append((at, size))
        return real_pread(fd, size, at)

    def pins_before(*args):
        looking[0] = True
        try:
            return real_pins_before(*args)
        finally:
            looking[0] = False

    monkeypatch.setattr(fast_load.os, "pread", pread)
    monkeypatch.setattr(fast_load, "_pins_before", pins_before)
    return reads


def test_the_fast_resume_without_a_sidecar_scans_for_pins(workspace: Path, monkeypatch) -> None:
    folder = _session_with_pins_before_a_replace(workspace)
    (folder / "meta.json").unlink()
    reads = _reads_for_pins(monkeypatch)
    fast = _fast(folder, monkeypatch)
    assert fast.skipped is not None
    assert [p.text for p in fast.pins] == ["second pin", "after the replace"]
    assert sum(size for _, size in reads) >= fast.skipped[1]  # the prefix was scanned instead
    # A sidecar of another log (its head differs) counts as none.
    other = _session_with_pins_before_a_replace(workspace)
    (folder / "meta.json").write_bytes((other / "meta.json").read_bytes())
    assert [p.text for p in _fast(folder, monkeypatch).pins] == ["second pin", "after the replace"]


def test_a_sidecar_with_nonsense_pins_is_not_believed(workspace: Path, monkeypatch) -> None:
    folder = _session_with_pins_before_a_replace(workspace)
    meta = sidecar.read_meta(folder)
    assert meta is not None
    meta["replay"]["pins"] = [["z" * 32, 1.0, {"not": "text"}]]
    (folder / "meta.json").write_text(json.dumps(meta))
    assert [p.text for p in _fast(folder, monkeypatch).pins] == ["second pin", "after the replace"]


def test_unknown_and_damaged_pin_entries_are_ignored() -> None:
    ops = [
        entries.PinEntry.new("ok", id="1" * 32).raw,
        {"v": 1, "type": "pin", "id": "2" * 32, "ts": 1.0, "text": ["not", "text"]},
        {"v": 1, "type": "unpin", "id": "3" * 32, "ts": 1.0, "pin": ["unhashable"]},
        entries.PinEntry.new("ok", id="1" * 32).raw,  # the same entry twice: still one pin
        entries.PinEntry.new("a forged second text", id="1" * 32).raw,  # the first entry of an id counts
    ]
    assert [p.text for p in entries.effective_pins(ops)] == ["ok"]
    assert isinstance(entries.parse_entry(ops[0]), entries.OtherEntry)  # readers that do not know pins


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("message"), st.integers(1, 3)),
        st.tuples(st.just("pin"), st.integers(0, 99)),
        st.tuples(st.just("unpin"), st.integers(0, 5)),
        st.tuples(st.just("replace"), st.integers(0, 2)),
        st.tuples(st.just("sidecar"), st.just(0)),
    ),
    min_size=4,
    max_size=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_a_fast_load_gives_the_pins_a_full_replay_gives(workspace: Path, ops: list) -> None:
    """Pins, unpins and replaces in any order, with the sidecar as it was at any point (before
    or after the last replace) or missing: the fast load's pins are the full replay's."""
    from pseudoclaude_nb.conversation import Conversation
    from pseudoclaude_nb.messages import Message, new_id
    from pseudoclaude_nb.workspace import new_session_dir

    folder = new_session_dir(workspace)
    conv = Conversation([])
    pinned: list[str] = []
    kept: bytes | None = None  # meta.json as the last "sidecar" op left it
    with SessionWriter(folder, fsync=False, model="m", meta_bytes=0) as writer:
        writer.attach(conv)
        conv.append(Message(role="user", content="start " + "x" * 3000))
        for kind, n in ops:
            if kind == "message":
                for _ in range(n):
                    conv.append(Message(role="assistant", content="y" * 3000))
            elif kind == "pin":
                pid = new_id()
                writer.record(PinEntry.new(id=pid, ts=1.0, text=f"pin {n}"))
                pinned.append(pid)
            elif kind == "unpin" and pinned:
                writer.record(UnpinEntry.new(pinned[n % len(pinned)]))  # sometimes one already unpinned
            elif kind == "replace":
                conv.replace("compact", [Message(role="user", content="<summary>s</summary>")] * min(n, 1))
                writer.wait_meta()
            elif kind == "sidecar":
                writer.sync_meta()
                kept = (folder / "meta.json").read_bytes()
        writer.wait_meta()
    # The writer brought it up to date after each replace and on close: put back an older one.
    if kept is None:
        (folder / "meta.json").unlink()
    else:
        (folder / "meta.json").write_bytes(kept)
    full = load_session(folder, full=True)
    with pytest.MonkeyPatch.context() as m:
        fast = _fast(folder, m)
    assert [(p.id, p.text) for p in fast.pins] == [(p.id, p.text) for p in full.pins]
    (folder / "meta.json").unlink(missing_ok=True)
    with pytest.MonkeyPatch.context() as m:
        fast = _fast(folder, m)
    assert [(p.id, p.text) for p in fast.pins] == [(p.id, p.text) for p in full.pins]
