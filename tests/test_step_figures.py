"""A long step's request told from the step figures (``steps.idx``) equals its replay (issue 47).

Sessions written by the product's writer (``bench.logs.build_session``: a long run's spills,
usage entries and, with a window, compactions), one that compacted and one that never did.
Every step's request is asked twice — told from the figures (``steps.FIGURES_FROM`` 0) and
replayed as before — and the two must be the same in everything a reader sees: the
messages, the estimate, the problems, the rows and their origins, the history, the pins, a
fork's log. Then the log is what the figures must not be trusted for: appended to after
they were kept, its last step cut by a crash, a line unreadable, a line rewritten in place,
and figures that are damaged, of another log or of an older layout.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench.logs import build_session
from pseudoclaude_nb.session import entries, step_fast, step_figures, steps
from pseudoclaude_nb.session import step_figures_file as figures_file
from pseudoclaude_nb.session.fork import fork_session
from pseudoclaude_nb.session.loader import load_session
from pseudoclaude_nb.session.steps import request_at, scan
from pseudoclaude_nb.widgets.step_view import render_request, request_html
from pseudoclaude_nb.workspace import LOG_NAME, STEP_FIGURES
from tests.scripts import run_magic as run

STEPS = 120


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, Path]:
    """The two sessions' directories (each copied before a test changes it)."""
    out = {}
    for name, extra in (("never", {}), ("compacted", {"window_tokens": 6_000, "tail": 6})):
        ws = tmp_path_factory.mktemp(name)
        out[name] = build_session(ws, steps=STEPS, **extra).path.parent
    return out


def copied(source: Path, tmp_path: Path, name: str = "20260101-000000-abcd") -> Path:
    folder = tmp_path / ".pseudoclaude" / "sessions" / name
    folder.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("writer.lock"))
    return folder


def seen(req: steps.StepRequest) -> dict[str, Any]:
    """Everything of a request a reader is shown or given."""
    return {
        "messages": [m.to_dict() for m in req.messages],
        "count": len(req.messages),
        "tokens": req.tokens,
        "problems": req.problems,
        "rows": [(r.index, r.part, r.origin, r.tokens) for r in req.rows],
        "replaces": [m.offset for m in req.replaces],
        "spills": req.spills,
        "compactions": [c.raw for c in req.compactions],
        "rollovers": req.rollovers,
        "pins": req.pins,
        "replayed_from": req.replayed_from,
        "text": render_request(req, None),
        "html": request_html(req, None),
    }


def both(path: Path, n: int, monkeypatch) -> tuple[steps.StepRequest, steps.StepRequest]:
    """Step ``n``'s request told from the figures, and replayed."""
    monkeypatch.setattr(steps, "FIGURES_FROM", 0)
    told = request_at(path, n)
    monkeypatch.setattr(steps, "FIGURES_FROM", 10**9)
    replayed = request_at(path, n)
    monkeypatch.setattr(steps, "FIGURES_FROM", 0)
    assert not isinstance(replayed.messages, step_fast.LogMessages)
    return told, replayed


def told_steps(path: Path, monkeypatch, numbers: list[int]) -> int:
    """Check each step's two readings equal; how many were told from the figures."""
    fast = 0
    for n in numbers:
        told, replayed = both(path, n, monkeypatch)
        assert seen(told) == seen(replayed), f"step {n}"
        fast += isinstance(told.messages, step_fast.LogMessages)
    return fast


@pytest.mark.parametrize("name", ["never", "compacted"])
def test_every_step_told_from_the_figures_is_its_replay(written, name, tmp_path, monkeypatch) -> None:
    folder = copied(written[name], tmp_path)
    count = len(scan(folder).steps)
    assert count == STEPS
    fast = told_steps(folder, monkeypatch, list(range(1, count + 1)))
    assert fast >= count * 0.9  # the plain case is the common one: the figures were used
    req = request_at(folder, count)
    if name == "compacted":
        assert req.replaces and req.compactions
    else:
        assert req.spills and any(m.is_spill_preview for m in req.messages)  # spills are in these logs


@pytest.mark.parametrize("name", ["never", "compacted"])
def test_a_fork_copies_the_lines_the_writer_would_write(written, name, tmp_path, monkeypatch) -> None:
    folder = copied(written[name], tmp_path / "src")
    count = len(scan(folder).steps)
    for n in (1, count // 2, count):
        logs = []
        for figures in (0, 10**9):
            monkeypatch.setattr(steps, "FIGURES_FROM", figures)
            ws = tmp_path / f"fork-{n}-{figures}"
            report = fork_session(ws, folder, n)
            raw = (report.path / LOG_NAME).read_bytes()
            marker = entries.decode(raw.split(b"\n", 1)[0])
            assert marker is not None
            # The fork's own ids and time differ from one fork to the next: the rest is equal.
            for key in (marker["replace_id"], marker["id"]):
                raw = raw.replace(key.encode(), b"ID")
            raw = raw.replace(repr(marker["ts"]).encode(), b"TS")
            files = sorted(p.relative_to(report.path) for p in report.path.rglob("*") if p.is_file())
            logs.append((raw, report.messages, report.pins, report.missing, files))
            assert [m.to_dict() for m in load_session(report.path).messages] == [
                m.to_dict() for m in request_at(folder, n).messages
            ]
        assert logs[0] == logs[1], f"step {n}"


def test_the_figures_kept_then_the_log_appended_to(written, tmp_path, monkeypatch) -> None:
    source = written["never"] / LOG_NAME
    data = source.read_bytes()
    folder = copied(written["never"], tmp_path)
    (folder / STEP_FIGURES).unlink(missing_ok=True)
    cut = data.index(b'"type":"usage"', len(data) // 2)
    cut = data.index(b"\n", cut) + 1
    (folder / LOG_NAME).write_bytes(data[:cut])
    for derived in ("meta.json", "timeline.idx"):
        (folder / derived).unlink(missing_ok=True)
    monkeypatch.setattr(step_figures, "SAVE_BYTES", 1)
    monkeypatch.setattr(steps, "FIGURES_FROM", 0)
    first = len(scan(folder).steps)
    request_at(folder, first)
    kept = figures_file.covered(folder)
    assert kept == cut  # kept to the end of the log as it was
    with (folder / LOG_NAME).open("ab") as f:
        f.write(data[cut:])
    index = scan(folder)
    assert len(index.steps) == STEPS
    monkeypatch.setattr(step_figures, "SAVE_BYTES", 1 << 40)
    fig = step_figures.figures_for(index)
    assert fig is not None and fig.saved == kept and fig.covered == len(data)  # loaded, then extended
    assert told_steps(folder, monkeypatch, [1, first, first + 1, STEPS]) == 4


def test_an_incomplete_last_step_and_an_unreadable_line(written, tmp_path, monkeypatch) -> None:
    data = (written["never"] / LOG_NAME).read_bytes()
    lines = data.split(b"\n")
    middle = next(i for i in range(len(lines) // 2, len(lines)) if b'"type":"message"' in lines[i])
    lines[middle] = b'{"v":1,"type":"message", cut'  # unreadable
    torn = b"\n".join(lines) + b'{"v":1,"type":"message","id":"x","ts":1.0,"role":"assi'  # a crash mid-line
    folder = tmp_path / ".pseudoclaude" / "sessions" / "20260101-000000-abcd"
    folder.mkdir(parents=True)
    (folder / LOG_NAME).write_bytes(torn)
    if (written["never"] / "tool-results").exists():
        shutil.copytree(written["never"] / "tool-results", folder / "tool-results")
    index = scan(folder)
    before = index.timeline.step_of(middle)  # the steps before the unreadable line
    fast = told_steps(folder, monkeypatch, [1, before - 1, before, before + 1, len(index.steps)])
    assert fast == 2  # those before it; after it the replay decides (and says which line)
    assert any("unreadable" in p for p in request_at(folder, len(index.steps)).problems)
    fig = step_figures.figures_for(scan(folder))
    assert fig is not None and fig.covered < len(torn)  # the torn line is in no figure


def test_figures_that_are_not_this_logs_are_not_used(written, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(step_figures, "SAVE_BYTES", 1)
    monkeypatch.setattr(steps, "FIGURES_FROM", 0)
    folder = copied(written["never"], tmp_path)
    other = copied(written["compacted"], tmp_path, "20260101-000000-beef")
    for f in (folder, other):
        (f / STEP_FIGURES).unlink(missing_ok=True)
        request_at(f, None)
        assert (f / STEP_FIGURES).exists()
    good = (folder / STEP_FIGURES).read_bytes()

    def kept_used() -> bool:
        fig = step_figures.figures_for(scan(folder), save=False)
        return fig is not None and fig.saved > 0

    steps._KEPT.clear()
    assert kept_used()
    # Figures beside a copy of their log (a backup restored, a repository cloned) are not believed.
    shutil.copy(folder / LOG_NAME, tmp_path / "log")
    (tmp_path / "log").replace(folder / LOG_NAME)  # the same bytes, another file
    steps._KEPT.clear()
    assert not kept_used()
    steps._KEPT.clear()
    fig = step_figures.figures_for(scan(folder))  # built again for this file, and kept
    assert fig is not None and fig.saved
    steps._KEPT.clear()
    assert kept_used()
    good = (folder / STEP_FIGURES).read_bytes()
    damaged = bytearray(good)
    damaged[len(damaged) // 2] ^= 0xFF
    older = b"PCSTFIG0" + good[8:]
    for wrong in (bytes(damaged), older, (other / STEP_FIGURES).read_bytes(), good[:-9]):
        (folder / STEP_FIGURES).write_bytes(wrong)
        steps._KEPT.clear()
        assert not kept_used()
        assert told_steps(folder, monkeypatch, [STEPS // 2, STEPS]) == 2  # built again, right


def test_a_line_rewritten_in_place_is_caught(written, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(step_figures, "SAVE_BYTES", 1)
    monkeypatch.setattr(steps, "FIGURES_FROM", 0)
    folder = copied(written["never"], tmp_path)
    (folder / STEP_FIGURES).unlink(missing_ok=True)
    shown = request_at(folder, None).messages
    assert isinstance(shown, step_fast.LogMessages)
    fig = step_figures.figures_for(scan(folder))
    assert fig is not None
    data = bytearray((folder / LOG_NAME).read_bytes())
    line = fig.offsets[shown.end - 1]  # the last row's line: a letter of its text changed
    text = data.index(b'"content":"', line) + len(b'"content":"')
    found = re.compile(rb"(?<!\\)[a-z]").search(data, text, data.index(b"\n", line))
    assert found is not None
    at = found.start()
    data[at] = ord(chr(data[at]).upper())  # same length, same offsets, still valid: its CRC tells
    (folder / LOG_NAME).write_bytes(bytes(data))
    steps._KEPT.clear()
    req = request_at(folder, None)
    with pytest.raises(step_fast.FiguresMismatch, match="ask again"):
        render_request(req, None)
    assert not (folder / STEP_FIGURES).exists()
    steps._KEPT.clear()
    assert told_steps(folder, monkeypatch, [STEPS]) == 1


def test_the_writer_keeps_the_figures(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(step_figures, "SAVE_BYTES", 50_000)
    monkeypatch.setattr(step_figures, "KEEP_FROM_START", 1 << 40)
    folder = build_session(tmp_path, steps=STEPS).path.parent
    assert figures_file.covered(folder) == (folder / LOG_NAME).stat().st_size
    parsed = [0]
    real = entries.parse_entry

    def counting(e):
        parsed[0] += 1
        return real(e)

    monkeypatch.setattr(entries, "parse_entry", counting)
    monkeypatch.setattr(steps, "FIGURES_FROM", 0)
    steps._KEPT.clear()
    req = request_at(folder, None)
    render_request(req, None)
    assert isinstance(req.messages, step_fast.LogMessages) and len(req.messages) > 250
    assert parsed[0] <= 200 + 10  # from the kept figures: no line parsed but the 200 rows shown


def test_context_at_and_fork_at_from_a_notebook(written, ip, workspace, monkeypatch) -> None:
    folder = copied(written["never"], workspace)
    sid = folder.name
    monkeypatch.setattr(steps, "FIGURES_FROM", 10**9)
    run(ip, f"sessions resume {sid}")
    replayed = run(ip, f"context --at {STEPS}")
    monkeypatch.setattr(steps, "FIGURES_FROM", 0)
    steps._KEPT.clear()
    assert run(ip, f"context --at {STEPS}") == replayed
    out = run(ip, f"sessions fork {sid} --at {STEPS}")
    assert f"forked session {sid} at step {STEPS} of {STEPS}" in out


def test_what_settle_would_change_is_replayed(workspace, monkeypatch) -> None:
    """A call answered by nothing (settle cuts it) and a preview from before the durable marks
    (settle marks it): the steps whose request holds one are replayed, the others told."""
    from pseudoclaude_nb.messages import Message, ToolCall
    from tests.test_steps_nearest_replace import Log

    log = Log(0)
    for n in range(12):
        log.append(Message(role="user", content=f"question {n}"))
        call = ToolCall(id=f"call_{n}", name="bash", arguments={"n": n})
        log.append(Message(role="assistant", content="", tool_calls=(call,)))
        log.usage()
        if n == 9:
            continue  # interrupted: no result, the next question follows
        text = f"out {n}"
        if n == 3:
            text = f"[Tool result too large for the context: 9,999 bytes, saved in full to /t/tool-results/{n}.txt]\nhead"
        log.append(Message(role="user", tool_result={"call_id": call.id, "content": text}))  # type: ignore[arg-type]
        log.append(Message(role="assistant", content=f"answer {n}"))
        log.usage()
    folder = workspace / ".pseudoclaude" / "sessions" / "20260101-000000-abcd"
    folder.mkdir(parents=True)
    (folder / LOG_NAME).write_bytes(b"".join(log.lines))
    count = len(scan(folder).steps)
    fast = told_steps(folder, monkeypatch, list(range(1, count + 1)))
    assert 0 < fast < count
    last = request_at(folder, None)
    assert not isinstance(last.messages, step_fast.LogMessages)
    assert any(row.part == "spill preview" for row in last.rows)
    assert any("cut" in p for p in last.problems)
