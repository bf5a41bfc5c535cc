"""Crash at any byte (SPEC §6.3, §16): every prefix of a real log loads as a valid state.

A real session is written through the product (Agent + scripted provider + real tools +
SessionWriter): parallel tool calls, a bash call, an ``edit`` replace, and a second run with
another model. Then, for every truncation offset k, ``data[:k]`` must load as exactly the
state of the last entry group whose JSON bytes lie within ``data[:k]`` (a replace group is
the marker plus all its snapshot entries), after the SPEC's trim of a trailing assistant
message whose calls are not all answered. The expected states are computed here by an
independent replay, not by the loader.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.messages import Message, pairing_problems
from pseudoclaude_nb.session import load_session
from tests.scripts import script, turn


def _write_script(path: Path, data: dict[str, Any]) -> str:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return str(path)


def write_real_session(workspace: Path, scripts_dir: Path) -> tuple[Path, list[Message]]:
    (workspace / "notes.txt").write_text("remember the milk ☕\n", encoding="utf-8")
    first = script(
        turn(
            "Writing and reading at once — café ☕",
            ("write_file", {"path": "a.txt", "content": "héllo wörld\n"}),
            ("read_file", {"path": "notes.txt"}),
        ),
        turn("", ("bash", {"command": "echo hi"})),
        turn("Done: wrote a.txt ✓"),
    )
    settings = PseudoClaude(
        workspace=str(workspace),
        permission_mode="auto",
        provider="scripted",
        script=_write_script(scripts_dir / "first.json", first),
    )
    agent = Agent(settings)
    try:
        r1 = agent.run("Please write a.txt and read notes.txt")
        assert r1.status == "done", r1.error
        session = agent.session
        assert session is not None

        # An edit through the product: a new opening user message plus the last complete
        # exchange (bash call, its result, the final text), protocol-valid.
        msgs = session.conversation.messages()
        assert [bool(m.tool_calls) for m in msgs[-3:]] == [True, False, False]
        edited = [Message(role="user", content="(edited) earlier we wrote a.txt — ✓")] + msgs[-3:]
        assert pairing_problems(edited) == []
        session.conversation.replace("edit", edited)

        second = script(
            turn("Checking ☕.", ("read_file", {"path": "a.txt"})),
            turn("All good."),
            model="scripted-test-2",
        )
        r2 = agent.run("Check a.txt", script=_write_script(scripts_dir / "second.json", second))
        assert r2.status == "done", r2.error
        assert agent.session is session  # runs continue the session
        final = session.conversation.messages()
        return session.dir / "conversation.jsonl", final
    finally:
        agent.close()


# --- the independent replay --------------------------------------------------------------------


@dataclass
class Group:
    """One entry, or a replace marker with all its snapshot entries."""

    kind: str
    end: int  # offset just past the group's last JSON byte (its newline not needed)
    marker_end: int | None = None  # for a replace: offset past the marker line
    messages: list[Message] = field(default_factory=list)
    usage: tuple[int, int] | None = None
    model: str | None = None


def _message(entry: dict[str, Any]) -> Message:
    return Message.from_dict(
        {k: entry[k] for k in ("id", "role", "content", "tool_calls", "tool_result", "ts")}
    )


def parse_groups(data: bytes) -> list[Group]:
    assert data.endswith(b"\n")
    lines: list[tuple[int, dict[str, Any]]] = []
    pos = 0
    for raw in data.split(b"\n")[:-1]:
        end = pos + len(raw)
        lines.append((end, json.loads(raw)))
        pos = end + 1
    groups: list[Group] = []
    i = 0
    while i < len(lines):
        end, entry = lines[i]
        kind = entry["type"]
        if kind == "replace":
            n = entry["count"]
            snap = lines[i + 1 : i + 1 + n]
            assert len(snap) == n and all(e.get("replace_id") == entry["replace_id"] for _, e in snap)
            groups.append(
                Group(
                    "replace",
                    end=snap[-1][0] if snap else end,
                    marker_end=end,
                    messages=[_message(e) for _, e in snap],
                    model=next((e["model"] for _, e in snap if e.get("model")), None),
                )
            )
            i += 1 + n
            continue
        if kind == "message":
            assert "replace_id" not in entry
            groups.append(Group("message", end=end, messages=[_message(entry)], model=entry.get("model")))
        elif kind == "usage":
            tokens = (
                entry["input_tokens"]
                + entry["cache_creation_input_tokens"]
                + entry["cache_read_input_tokens"]
                + entry["output_tokens"]
            )
            groups.append(
                Group("usage", end=end, usage=(tokens, entry["messages"]), model=entry.get("model"))
            )
        else:
            groups.append(Group(kind, end=end))
        i += 1
    return groups


@dataclass
class Expected:
    messages: list[Message]
    truncated_tool_calls: bool
    torn_replace: bool
    torn_tail: bool
    usage_anchor: tuple[int, int] | None
    last_model: str | None


def trim_dangling(messages: list[Message]) -> tuple[list[Message], bool]:
    """SPEC §6.3: a trailing assistant message whose calls lack results goes, with what follows."""
    i = len(messages)
    while i > 0 and messages[i - 1].tool_result is not None:
        i -= 1
    if i == 0 or not messages[i - 1].tool_calls:
        return messages, False
    answered = {m.tool_result.call_id for m in messages[i:]}
    if {c.id for c in messages[i - 1].tool_calls} <= answered:
        return messages, False
    return messages[: i - 1], True


def expected_at(data: bytes, groups: list[Group], k: int) -> Expected:
    state: list[Message] = []
    anchor: tuple[int, int] | None = None
    model: str | None = None
    torn_replace = False
    for g in groups:
        if g.end <= k:
            if g.kind == "message":
                state = state + g.messages
            elif g.kind == "replace":
                state, anchor = list(g.messages), None
            elif g.kind == "usage":
                anchor = g.usage
            model = g.model or model
        else:
            torn_replace = g.kind == "replace" and g.marker_end is not None and g.marker_end <= k
            break
    state, trimmed = trim_dangling(state)
    if anchor is not None and anchor[1] > len(state):
        anchor = None
    prefix = data[:k]
    tail = prefix[prefix.rfind(b"\n") + 1 :]
    # A last line that is a complete entry without its newline is read, not torn.
    complete_last = data[k : k + 1] == b"\n"
    return Expected(
        messages=state,
        truncated_tool_calls=trimmed,
        torn_replace=torn_replace,
        torn_tail=bool(tail.strip()) and not complete_last,
        usage_anchor=anchor,
        last_model=model,
    )


def test_every_truncation_of_a_real_log_loads_a_valid_state(workspace, tmp_path):
    scripts_dir = tmp_path / "scripts"
    scripts_dir.mkdir()
    log, final = write_real_session(workspace, scripts_dir)
    data = log.read_bytes()

    # The log has the shapes this test is about.
    entries = [json.loads(x) for x in data.splitlines()]
    kinds = [e["type"] for e in entries]
    assert kinds.count("replace") == 1 and kinds.count("usage") >= 4
    assert any(len(e.get("tool_calls") or []) == 2 for e in entries)  # parallel calls
    assert any(c["name"] == "bash" for e in entries for c in e.get("tool_calls") or [])
    assert [e["model"] for e in entries if e["type"] == "message" and "model" in e] == [
        "scripted-test",
        "scripted-test-2",
    ]
    assert "☕".encode() in data  # multi-byte characters: cuts land inside them too
    assert 1_000 < len(data) < 20_000, len(data)

    groups = parse_groups(data)
    # The whole log is the product's in-memory conversation.
    full = load_session(log)
    assert full.messages == final
    assert expected_at(data, groups, len(data)).messages == final
    assert not full.problems()

    probe = tmp_path / "probe" / "conversation.jsonl"
    probe.parent.mkdir()
    started = time.perf_counter()
    distinct_states = set()
    seen_flags: set[str] = set()
    for k in range(len(data) + 1):
        probe.write_bytes(data[:k])
        got = load_session(probe.parent)
        want = expected_at(data, groups, k)
        where = f"truncated at byte {k} of {len(data)}"
        assert [m.id for m in got.messages] == [m.id for m in want.messages], where
        assert got.messages == want.messages, where
        assert pairing_problems(got.messages) == [], where
        assert got.bad_lines == [], where
        assert got.incomplete is False, where
        assert got.torn_tail is want.torn_tail, where
        assert got.torn_replace is want.torn_replace, where
        assert got.truncated_tool_calls is want.truncated_tool_calls, where
        assert got.orphan_results == 0, where
        assert got.usage_anchor == want.usage_anchor, where
        assert got.last_model == want.last_model, where
        distinct_states.add(tuple(m.id for m in got.messages))
        seen_flags.update(f for f in ("torn_tail", "torn_replace", "truncated_tool_calls") if getattr(got, f))
    elapsed = time.perf_counter() - started

    # Sanity: the loop met every kind of state. Run 1: (), prompt, + parallel calls and
    # results, + bash call and result, + final text; the edit; run 2: prompt, + call and
    # result, + final text (a call alone is trimmed away, so it adds no state).
    assert len(distinct_states) == 9
    assert seen_flags == {"torn_tail", "torn_replace", "truncated_tool_calls"}
    print(f"\ntruncation: log {len(data)} bytes, {len(data) + 1} prefixes, {elapsed:.2f} s")
