"""Issue 34: ``%sessions`` read paths in a fresh kernel do not build the agent's world.

In a fresh process, as a user's kernel: ``%load_ext``, then one ``%sessions`` action. The
listing, ``resume --last``, ``show`` and ``search`` read sidecars, logs and the history
index; they must not import the agent, the providers, the widgets (in a terminal) or —
for the listing and resume — pydantic's message models. What they print must be what the
same action prints once the agent exists (the path every other test takes), and a resume
made before the agent exists must be the conversation the next ``%agent`` continues.
The speed itself is in ``bench/magic_paths.py`` (no timed assertion here).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pseudoclaude_nb
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir

ROOT = Path(pseudoclaude_nb.__file__).resolve().parents[1]

# What no read path of %sessions may import (the agent's world), and what the listing and
# resume must not import either (pydantic's models: ~0.1 s of a fresh kernel's first listing).
NEVER = ("pseudoclaude_nb.agent", "pseudoclaude_nb.providers", "pseudoclaude_nb.context", "ipywidgets")
NOT_LISTING = (*NEVER, "pydantic", "pseudoclaude_nb.messages", "pseudoclaude_nb.conversation")

SCRIPT = r"""
import io, json, sys
from contextlib import redirect_stdout
from IPython.core.interactiveshell import InteractiveShell
from pseudoclaude_nb.magics import current_agent

shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "pseudoclaude_nb")
if sys.argv[2] == "agent-first":
    current_agent(shell)  # the agent built before, as after a %agent: every answer is its own
out = {"steps": []}
for line in json.loads(sys.argv[3]):
    if line == "@agent":  # what the next %agent finds: the agent, built now
        agent = current_agent(shell)
        session = agent.session
        out["steps"].append({
            "line": line,
            "session": session.id if session else None,
            "messages": [m.content for m in session.conversation.messages()] if session else None,
        })
        continue
    if line == "@locked":
        from pseudoclaude_nb.session.locks import is_locked
        from pseudoclaude_nb.workspace import sessions_dir
        from pathlib import Path
        root = sessions_dir(Path.cwd())
        out["steps"].append({"line": line, "locked": sorted(d.name for d in root.iterdir() if is_locked(d))})
        continue
    before = set(sys.modules)
    buf = io.StringIO()
    error = None
    with redirect_stdout(buf):
        try:
            shell.run_line_magic("sessions", line)
        except Exception as exc:  # a UsageError, as the shell would show it
            error = f"{type(exc).__name__}: {exc}"
    out["steps"].append({
        "line": line, "printed": buf.getvalue(), "error": error, "imported": sorted(set(sys.modules) - before)
    })
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump(out, f)
"""


def _write(ws: Path, when: int, texts: list[str]) -> str:
    folder = new_session_dir(ws, now=when)
    with SessionWriter(folder, fsync=False) as writer:
        conversation = Conversation()
        writer.attach(conversation)
        for i, text in enumerate(texts):
            conversation.append(Message(role="user" if i % 2 == 0 else "assistant", content=text))
    return folder.name


@pytest.fixture
def three_sessions(workspace: Path) -> tuple[Path, list[str]]:
    ids = [
        _write(workspace, 1_790_000_000, ["first question about PLUM-42", "an answer"]),
        _write(workspace, 1_790_000_600, ["second question", "another answer", "a follow-up"]),
        _write(workspace, 1_790_001_200, ["the latest question about PLUM-42", "the latest answer"]),
    ]
    return workspace, ids


def _run(ws: Path, lines: list[str], *, agent_first: bool = False) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(
        PYTHONPATH=str(ROOT), PSEUDOCLAUDE_HOME=str(ws.parent / "home"), IPYTHONDIR=str(ws.parent / "ipy")
    )
    env.pop("JPY_SESSION_NAME", None)
    result = ws.parent / "steps.json"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            SCRIPT,
            str(result),
            "agent-first" if agent_first else "fresh",
            json.dumps(lines),
        ],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(result.read_text(encoding="utf-8"))["steps"]


def _heavy(step: dict, names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in step["imported"] if any(m == n or m.startswith(n + ".") for n in names))


def _same_text(printed: str) -> str:
    """The printed text without what differs between two runs a moment apart."""
    return re.sub(r"last active [0-9.]+ h ago", "last active N h ago", printed)


def test_list_and_resume_last_import_neither_the_agent_nor_pydantic(three_sessions) -> None:
    ws, ids = three_sessions
    listed, resumed, again = _run(ws, ["list", "resume --last", "list"])
    assert _heavy(listed, NOT_LISTING) == []
    assert _heavy(resumed, NOT_LISTING) == []
    assert _heavy(again, NOT_LISTING) == []
    assert ids[2] in resumed["printed"]


def test_show_and_search_in_a_terminal_import_no_agent_and_no_widgets(three_sessions) -> None:
    ws, ids = three_sessions
    shown, found = _run(ws, [f"show {ids[1]}", "search --all PLUM-42"])
    assert _heavy(shown, NEVER) == []
    assert _heavy(found, NEVER) == []
    assert "2 matches" in found["printed"]


def test_each_read_path_prints_what_it_prints_once_the_agent_exists(three_sessions) -> None:
    """The same actions in two fresh kernels, one with its agent built first (as every other
    test of the magics runs them): the same text, line for line."""
    ws, ids = three_sessions
    lines = [
        "list",
        f"show {ids[0]}",
        f"timeline {ids[0]}",
        "search --all PLUM-42",
        "resume --last",
        "list",
        "show",
        "search PLUM-42",
    ]
    fresh = _run(ws, lines)
    built = _run(ws, lines, agent_first=True)
    for a, b in zip(fresh, built, strict=True):
        assert _same_text(a["printed"]) == _same_text(b["printed"]), a["line"]
    assert "* " + ids[2] in fresh[5]["printed"] and "current" in fresh[5]["printed"]


def test_a_resume_before_the_agent_is_the_session_the_next_agent_continues(three_sessions) -> None:
    ws, ids = three_sessions
    steps = _run(ws, [f"resume {ids[1]}", "@locked", "@agent", "@locked"])
    resumed, locked_before, agent, locked_after = steps
    assert f"resumed session {ids[1]}: 3 messages" in resumed["printed"]
    assert locked_before["locked"] == [ids[1]]  # held from the resume on: no other kernel takes it
    assert agent["session"] == ids[1]
    assert agent["messages"] == ["second question", "another answer", "a follow-up"]
    assert locked_after["locked"] == [ids[1]]  # now by the agent's writer


def test_new_after_a_pending_resume_lets_the_session_go(three_sessions) -> None:
    ws, ids = three_sessions
    steps = _run(ws, ["resume --last", "new", "@locked", "@agent"])
    assert steps[2]["locked"] == []
    assert steps[3]["session"] is None  # the next %agent starts a new session


def test_a_refused_resume_keeps_the_pending_one_and_says_what_the_agent_says(three_sessions) -> None:
    """Another kernel has session 0 open: the refusal reads as it does with the agent built,
    and the session resumed before stays the one the next %agent continues."""
    ws, ids = three_sessions
    from pseudoclaude_nb.workspace import session_dir

    with SessionWriter(session_dir(ws, ids[0]), fsync=False):  # "another kernel"
        fresh = _run(ws, [f"resume {ids[1]}", f"resume {ids[0]}", "@locked", "@agent"])
        built = _run(ws, [f"resume {ids[1]}", f"resume {ids[0]}"], agent_first=True)
    assert fresh[1]["error"] and fresh[1]["error"] == built[1]["error"]
    assert fresh[2]["locked"] == sorted([ids[0], ids[1]])
    assert fresh[3]["session"] == ids[1]


def test_the_listing_index_hands_its_backlog_over_to_the_agents(three_sessions) -> None:
    """A listing before the agent marks lagging sessions on the host's own index; the agent,
    once built, takes those marks over (``SessionHost.adopt``), and the host's index indexes
    nothing more after that."""
    from pseudoclaude_nb.history import HistoryIndex
    from pseudoclaude_nb.workspace import session_dir

    ws, ids = three_sessions
    folders = [session_dir(ws, sid) for sid in ids]
    index = HistoryIndex(ws, background=True)
    index.count()  # the file made, nothing in it
    index.schedule(*folders)
    marked = index.hand_over()
    assert sorted(marked) == sorted(folders)
    assert index.catch_up(folders[0]) == 0
    fresh = HistoryIndex(ws)
    try:
        assert fresh.count() == 0  # nothing was indexed by the handed-over index
        fresh.schedule(*marked)
        fresh.flush()
        assert fresh.count() == 7
    finally:
        fresh.close()


def test_a_fresh_listing_says_the_lag_without_opening_the_index_for_writing(three_sessions) -> None:
    """An index that holds none of the logs: the first listing of a fresh kernel says how far
    it is behind as the agent's listing does, from a read-only look at the index; the index
    is not opened for writing (its WAL switch, table checks and settings) just to say so."""
    from pseudoclaude_nb.history import HistoryIndex

    ws, _ = three_sessions
    made = HistoryIndex(ws)
    made.count()
    made.close()
    path = ws / ".pseudoclaude" / "history.sqlite"
    before = (path.stat().st_mtime_ns, path.read_bytes())
    index = HistoryIndex(ws, background=True)
    lag = index.lag(count=1 << 20)
    assert sorted(lag) == sorted(p.name for p in (ws / ".pseudoclaude" / "sessions").iterdir())
    assert index._con is None  # no writer connection was made for the report
    assert (path.stat().st_mtime_ns, path.read_bytes()) == before
    index.close()
    (fresh,) = _run(ws, ["list"])
    (built,) = _run(ws, ["list"], agent_first=True)
    assert "entries behind in 3 sessions" in fresh["printed"]
    assert fresh["printed"] == built["printed"]
    assert _heavy(fresh, NOT_LISTING) == []
