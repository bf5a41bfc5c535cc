"""The background indexer (issue 18): off the append path, crash-safe, its lag visible."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.history import HistoryIndex
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session import entries
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir

ROOT = Path(__file__).resolve().parents[1]


def test_appends_do_not_index_in_the_hook_and_a_search_catches_up(workspace, monkeypatch):
    index = HistoryIndex(workspace, background=True)
    d = new_session_dir(workspace)
    calls = []
    monkeypatch.setattr(
        "pseudoclaude_nb.history.backlog.QUIET_SECONDS", 3600.0
    )  # the indexer never gets there
    real = index.catch_up
    index.catch_up = lambda folder: calls.append(folder) or real(folder)  # type: ignore[method-assign]
    try:
        with SessionWriter(d, fsync=False) as w:
            conv = Conversation()
            w.attach(conv)
            conv.add_hooks(index.hooks(d))
            for i in range(20):
                conv.append(Message(role="user", content=f"note KIWI-{i}", ts=1.0 + i))
            assert calls == []  # nothing indexed inside the appends
            (hit,) = index.search("KIWI-19")  # the search catches up first
            assert hit.snippet == "note KIWI-19"
    finally:
        index.close()


def test_the_background_thread_catches_up_by_itself(workspace):
    index = HistoryIndex(workspace, background=True)
    d = new_session_dir(workspace)
    try:
        with SessionWriter(d, fsync=False) as w:
            conv = Conversation()
            w.attach(conv)
            conv.add_hooks(index.hooks(d))
            conv.append(Message(role="user", content="note PLUM-1", ts=1.0))
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and not index._seen:
                time.sleep(0.05)
            assert d.name in index._seen  # consumed to its end without a search
            assert index.lag() == {}
    finally:
        index.close()


def test_the_background_thread_waits_for_the_appends_to_pause(workspace, monkeypatch):
    """A steady stream of appends is not indexed under its feet; the pause after it is."""
    monkeypatch.setattr("pseudoclaude_nb.history.backlog.QUIET_SECONDS", 1.0)
    monkeypatch.setattr("pseudoclaude_nb.history.backlog.MAX_WAIT_SECONDS", 3600.0)
    index = HistoryIndex(workspace, background=True)
    d = new_session_dir(workspace)
    calls = []
    real = index.catch_up
    index.catch_up = lambda folder: calls.append(time.monotonic()) or real(folder)  # type: ignore[method-assign]
    try:
        with SessionWriter(d, fsync=False) as w:
            conv = Conversation()
            w.attach(conv)
            conv.add_hooks(index.hooks(d))
            started = time.monotonic()
            while time.monotonic() - started < 2.0:  # two seconds of appends, 20 ms apart
                conv.append(Message(role="user", content="note FIG", ts=1.0))
                time.sleep(0.02)
            assert calls == []
            stopped = time.monotonic()
            deadline = stopped + 20
            while time.monotonic() < deadline and not calls:
                time.sleep(0.05)
            assert calls and calls[0] >= stopped + 0.9  # after the pause, not before it
    finally:
        index.close()


def test_lag_is_counted_and_shown(workspace):
    from pseudoclaude_nb.agent import Agent
    from pseudoclaude_nb.config import PseudoClaude
    from pseudoclaude_nb.magics import sessions as sessions_magic

    d = new_session_dir(workspace)
    (d / "conversation.jsonl").write_bytes(b"")
    index = HistoryIndex(workspace)
    index.search("x")  # the index knows the session, at offset 0
    index.close()
    with open(d / "conversation.jsonl", "ab") as f:
        for i in range(7):
            m = Message(role="user", content=f"m{i}", ts=1.0 + i)
            f.write(entries.encode(entries.message_entry(m)))
    index = HistoryIndex(workspace)
    try:
        lag = index.lag()
        assert lag[d.name].entries == 7 and lag[d.name].counted
    finally:
        index.close()
    agent = Agent(PseudoClaude(workspace=str(workspace), provider="scripted", fsync=False))
    try:
        line = sessions_magic._index_lag(agent)
        assert line.startswith("history index: 7 entries behind in 1 session")
        agent.history.flush()
        assert agent.history.lag() == {}
    finally:
        agent.close()


CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from pseudoclaude_nb.history import HistoryIndex
    index = HistoryIndex(Path(sys.argv[1]))
    folder = Path(sys.argv[2])
    print("indexing", flush=True)
    while True:  # the whole log in one catch-up: the kill lands inside its transaction
        index.catch_up(folder)
        index.close()
        index = HistoryIndex(Path(sys.argv[1]))
        time.sleep(0.01)
    """
)


@pytest.mark.parametrize("delay", [0.2, 0.6, 1.2])
def test_kill_9_mid_indexing_then_a_search_finds_the_last_message(workspace, tmp_path: Path, delay: float):
    d = new_session_dir(workspace)
    with open(d / "conversation.jsonl", "wb") as f:
        for i in range(6000):
            m = Message(
                role="user" if i % 2 == 0 else "assistant", content=f"entry {i} " + "z" * 300, ts=1.0 + i
            )
            f.write(entries.encode(entries.message_entry(m)))
    # The writer keeps appending while a child indexes; the child dies by SIGKILL.
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(workspace), str(d)],
        stdout=subprocess.PIPE,
        env=env,
        cwd=str(tmp_path),
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"indexing"
        with open(d / "conversation.jsonl", "ab") as f:
            for i in range(40):
                m = Message(role="user", content=f"late MANGO-{i}", ts=9000.0 + i)
                f.write(entries.encode(entries.message_entry(m)))
                time.sleep(delay / 40)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    index = HistoryIndex(workspace, background=True)
    try:
        (hit,) = index.search("MANGO-39")
        assert hit.snippet == "late MANGO-39"
        assert len(index.search("entry 5999")) == 1
        # Nothing indexed twice: one row per message.
        assert index.count(d.name) == 6040
    finally:
        index.close()
