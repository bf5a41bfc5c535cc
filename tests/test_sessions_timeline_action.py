"""``%sessions timeline [ID]``, as the README documents it (issue 34): it answered "unknown action".

In a terminal it prints the timeline's text (the entries of the log, the effective ones
marked); in a notebook it shows the same widget ``%sessions show`` does.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from IPython.core.error import UsageError

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir
from tests.scripts import run_magic as run


def _session(ws: Path) -> str:
    folder = new_session_dir(ws)
    with SessionWriter(folder, fsync=False) as writer:
        conversation = Conversation()
        writer.attach(conversation)
        conversation.append(Message(role="user", content="Fix the error in the file."))
        conversation.append(Message(role="assistant", content="Done: the file reads now."))
    return folder.name


def test_timeline_of_a_session_prints_its_entries(ip, workspace: Path):
    sid = _session(workspace)
    out = run(ip, f"sessions timeline {sid}")
    assert f"session {sid}: " in out and "2 effective messages" in out
    assert "Fix the error in the file." in out


def test_timeline_without_an_id_is_the_current_session(ip, workspace: Path):
    sid = _session(workspace)
    with pytest.raises(UsageError, match="no current session"):
        run(ip, "sessions timeline")
    run(ip, f"sessions resume {sid}")
    assert f"session {sid}: " in run(ip, "sessions timeline")


def test_in_a_notebook_it_is_the_widget_show_displays(ip, workspace: Path, monkeypatch):
    from pseudoclaude_nb.magics import sessions as magic
    from pseudoclaude_nb.widgets import SessionTimeline

    sid = _session(workspace)
    shown = []
    monkeypatch.setattr(magic, "in_notebook", lambda shell: True)
    monkeypatch.setattr(magic, "display", lambda obj: shown.append(obj))
    run(ip, f"sessions timeline {sid}")
    assert len(shown) == 1 and isinstance(shown[0], SessionTimeline)
