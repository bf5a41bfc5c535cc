"""The request at a step, read from the nearest replace before it (issue 47).

A log written line by line as the writer writes it — answers and their usage entries,
compactions, Layer 1 snapshots, rollovers that keep the first prompt, replaces cut by a
crash, unreadable lines, pins and unpins — and every step's request checked against the
reading it must equal: the replay core over the whole log cut at that step, the pins
applied in order, and each message's origin found by a forward pass (the first replace
whose snapshot held it, unless it was appended plainly before). The log is read through
its timeline index (kept when the log was written, then more lines appended after it), and
a late step's request never reads the log from its start.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from pseudoclaude_nb.messages import Message, ToolCall, Usage, new_id
from pseudoclaude_nb.session import entries, steps
from pseudoclaude_nb.session.entries import (
    CompactEntry,
    ReplaceEntry,
    UsageEntry,
    apply_pin,
    encode,
    message_entry,
)
from pseudoclaude_nb.session.replay import LoadResult, replay, settle
from pseudoclaude_nb.session.steps import request_at, scan
from pseudoclaude_nb.session.timeline import build_timeline
from pseudoclaude_nb.session.timeline import index as timeline_index
from pseudoclaude_nb.workspace import TIMELINE_INDEX


class Log:
    """A session's lines as the writer writes them, and the state they leave."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.lines: list[bytes] = []
        self.state: list[Message] = []
        self.pins = 0

    def append(self, m: Message) -> None:
        self.state.append(m)
        self.lines.append(encode(message_entry(m, model="m")))

    def usage(self) -> None:
        usage = Usage(input_tokens=100 + len(self.lines), output_tokens=5)
        self.lines.append(encode(UsageEntry.new(usage, messages=len(self.state), model="m").raw))

    def replace(self, reason: str, new: list[Message], *, torn: bool = False) -> None:
        rid = new_id()
        self.lines.append(encode(ReplaceEntry.new(reason, rid, len(new)).raw))
        kept = self.rng.randrange(len(new)) if torn else len(new)  # a crash cut the snapshot
        self.lines.extend(encode(message_entry(m, replace_id=rid)) for m in new[:kept])
        if torn:
            self.lines.append(b'{"v":1,"type":"note","text":"resumed after a crash","level":"info"}\n')
        else:
            self.state = list(new)

    def step(self, n: int) -> None:
        self.append(Message(role="user", content=f"question {n}"))
        call = ToolCall(id=f"call_{n}", name="bash", arguments={"command": f"echo {n}"})
        self.append(Message(role="assistant", content="", tool_calls=(call,)))
        self.usage()
        self.append(Message(role="user", tool_result={"call_id": call.id, "content": f"out {n}"}))  # type: ignore[arg-type]
        self.append(Message(role="assistant", content=f"answer {n}"))
        self.usage()
        r = self.rng.random()
        if r < 0.08:
            summary = [
                Message(role="user", content=f"summary at {n}"),
                Message(role="assistant", content="ok"),
            ]
            self.replace("compact", summary + self.state[-2:])
            self.lines.append(
                encode(
                    CompactEntry.new(trigger="auto", before_tokens=9, after_tokens=4, ok=True, error=None).raw
                )
            )
        elif r < 0.14:
            self.replace("snapshot", list(self.state), torn=self.rng.random() < 0.3)
        elif r < 0.17:
            self.lines.append(b'{"v":1,"type":"message", cut\n')
        elif r < 0.21:
            self.pins += 1
            self.lines.append(
                encode({"v": 1, "type": "pin", "id": f"p{self.pins}", "ts": 1.0, "text": f"pin {self.pins}"})
            )
        elif r < 0.23 and self.pins:
            pin = f"p{self.rng.randrange(1, self.pins + 1)}"
            self.lines.append(encode({"v": 1, "type": "unpin", "id": new_id(), "ts": 2.0, "pin": pin}))
        elif r < 0.27:
            self.replace("rollover", [self.state[0], Message(role="user", content=f"handoff at {n}")])
            self.lines.append(
                encode({"v": 1, "type": "rollover", "phase": "commit", "reason": "model", "ts": 1.0})
            )
        elif r < 0.30:  # an interrupted run: a call answered by nothing (settle cuts it)
            dangling = ToolCall(id=f"dangling_{n}", name="bash", arguments={})
            self.append(Message(role="assistant", content="", tool_calls=(dangling,)))
            self.usage()
        elif r < 0.33:  # a preview from before the durable marks (settle marks it)
            call = ToolCall(id=f"old_{n}", name="bash", arguments={})
            self.append(Message(role="assistant", content="", tool_calls=(call,)))
            text = f"[Tool result too large for the context: 9,999 bytes, saved in full to /t/tool-results/{n}.txt]\nhead"
            self.append(Message(role="user", tool_result={"call_id": call.id, "content": text}))  # type: ignore[arg-type]
            self.append(Message(role="assistant", content="seen"))
            self.usage()


def written(workspace: Path, seed: int, steps_: int, *, indexed: bool, monkeypatch) -> Path:
    log = Log(seed)
    for n in range(steps_):
        log.step(n)
    folder = workspace / ".pseudoclaude" / "sessions" / f"20260101-000000-{seed:04d}"
    folder.mkdir(parents=True)
    path = folder / "conversation.jsonl"
    cut = len(log.lines) * 3 // 4
    path.write_bytes(b"".join(log.lines[:cut]))
    if indexed:  # the index a build leaves behind, then lines written after it
        monkeypatch.setattr(timeline_index, "MIN_BYTES", 1_000)
        build_timeline(path)
        assert (folder / TIMELINE_INDEX).exists()
    with path.open("ab") as f:
        f.write(b"".join(log.lines[cut:]))
    return path


def oracle(path: Path, step: steps.Step) -> tuple[list[dict], list[str], list[dict], dict[str, str]]:
    """What the request at ``step`` must be: the log cut there, replayed from its start; the pins
    applied in order; each message's origin from a forward pass."""
    data = path.read_bytes()[: step.end]
    r = LoadResult(path=path)
    replay(data, r)
    if r.messages and r.messages[-1].role == "assistant":
        r.messages = r.messages[:-1]
    settle(r)
    pins: dict[str, Any] = {}
    logged: dict[str, dict] = {}
    reasons: dict[str, str] = {}
    plain: set[str] = set()
    origins: dict[str, str] = {}
    for raw in data.split(b"\n"):
        e = entries.decode(raw)
        if e is None:
            continue
        if e.get("type") in ("pin", "unpin") and isinstance(e.get("id"), str):
            apply_pin(pins, e)
            if e["type"] == "pin":
                logged.setdefault(e["id"], e)
        elif e.get("type") == "replace":
            reasons[e["replace_id"]] = e["reason"]
        elif e.get("type") == "message":
            mid, rid = e.get("id"), e.get("replace_id")
            if rid is None:
                plain.add(mid)
            elif mid not in plain and mid not in origins and rid in reasons:
                origins[mid] = reasons[rid]
    return [m.to_dict() for m in r.messages], r.problems(), [logged[p] for p in pins], origins


@pytest.mark.parametrize("figures", [False, True], ids=["replayed", "from-step-figures"])
@pytest.mark.parametrize("indexed", [False, True], ids=["scanned", "from-timeline-index"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_steps_request_is_the_log_cut_there(
    workspace: Path, seed: int, indexed: bool, figures: bool, monkeypatch
) -> None:
    path = written(workspace, seed, 90, indexed=indexed, monkeypatch=monkeypatch)
    if figures:  # every request the figures can tell is told from them (issue 47)
        monkeypatch.setattr(steps, "FIGURES_FROM", 0)
    index = scan(path)
    assert len(index.steps) >= 180
    last_pins = None
    for n in range(1, len(index.steps) + 1):
        req = request_at(path, n, index=index)
        messages, problems, pins, origins = oracle(path, req.step)
        assert [m.to_dict() for m in req.messages] == messages, f"step {n}"
        assert req.problems == problems, f"step {n}"
        assert [row.origin for row in req.rows] == [origins.get(m["id"]) for m in messages], f"step {n}"
        if n < len(index.steps):
            assert req.pins == pins, f"step {n}"
        last_pins = req.pins
    # The last step's pins are those in force now (set after it too).
    _, _, now, _ = oracle(path, steps.Step(0, 0, path.stat().st_size, 0))
    assert last_pins == now


def test_a_late_step_is_read_from_its_nearest_replace_not_the_log(workspace: Path, monkeypatch) -> None:
    path = written(workspace, 4, 200, indexed=True, monkeypatch=monkeypatch)
    lines = path.read_bytes().count(b"\n")
    index = scan(path)
    n = len(index.steps) - 1
    replayed: list[tuple[int, int]] = []
    real_range = steps._replay_range

    def recording(file, start, end, r):
        replayed.append((start, end))
        return real_range(file, start, end, r)

    parsed = [0]
    real_parse = entries.parse_entry

    def counting(e):
        parsed[0] += 1
        return real_parse(e)

    monkeypatch.setattr(steps, "_replay_range", recording)
    monkeypatch.setattr(entries, "parse_entry", counting)
    monkeypatch.setattr("pseudoclaude_nb.session.replay.parse_entry", counting)
    monkeypatch.setattr("pseudoclaude_nb.session.step_index.parse_entry", counting)
    req = request_at(path, n, index=index)
    assert parsed[0] < lines / 10  # the log's entries are not parsed one by one (the old scan did)
    nearest = [m for m in index.markers(index.entry(n)) if m.committed][-1]
    assert replayed == [(nearest.offset, req.step.end)] and req.replayed_from == nearest.offset
    assert req.step.end - nearest.offset < path.stat().st_size / 10


def test_the_index_of_an_unchanged_log_is_kept_and_a_grown_one_read_again(
    workspace: Path, monkeypatch
) -> None:
    path = written(workspace, 5, 30, indexed=False, monkeypatch=monkeypatch)
    first = scan(path)
    request_at(path, len(first.steps), index=first)  # reads the markers before the last step
    assert scan(path) is first  # the same log: the same index, its markers read once
    with path.open("ab") as f:
        f.write(encode(UsageEntry.new(Usage(input_tokens=9, output_tokens=1), messages=1, model="m").raw))
    grown = scan(path)
    assert grown is not first and len(grown.steps) == len(first.steps) + 1
