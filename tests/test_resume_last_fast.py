"""``%sessions resume --last`` picks what ``%sessions list`` puts first, without listing (issue 34).

``catalog.latest_session`` reads each folder's sidecar claim and checks in full only the
newest: it must agree with ``list_sessions(...)[0]`` whatever the folders hold — a stale
sidecar (a log grown behind it), a sidecar claiming a time its folder cannot keep (a link in
it), a folder without a log, a missing sidecar — and it must not check every folder in full.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session import catalog, entries, list_sessions
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import LOG_NAME, META_NAME, new_session_dir, sessions_dir
from tests.scripts import run_magic as run


def _sessions(ws: Path, n: int) -> list[Path]:
    folders = []
    for i in range(n):
        folder = new_session_dir(ws, now=1_790_000_000 + i * 60)
        with SessionWriter(folder, fsync=False) as writer:
            conversation = Conversation()
            writer.attach(conversation)
            conversation.append(Message(role="user", content=f"task {i}"))
        folders.append(folder)
    return folders


def _agree(ws: Path) -> str:
    latest = catalog.latest_session(ws)
    listed = list_sessions(ws)
    assert latest is not None and listed
    assert latest.id == listed[0].id
    return latest.id


def test_the_latest_agrees_with_the_listing_whatever_the_folders_hold(workspace: Path, monkeypatch):
    folders = _sessions(workspace, 30)
    _agree(workspace)
    # An older session grown behind its sidecar (a killed kernel): its stale sidecar says nothing.
    line = entries.encode(entries.message_entry(Message(role="user", content="later")))
    with open(folders[3] / LOG_NAME, "ab") as f:
        f.write(line)
    assert _agree(workspace) == folders[3].name
    # A sidecar claiming the future, in a folder holding a link: unsafe, never the latest.
    meta = json.loads((folders[5] / META_NAME).read_text())
    meta["last_activity"] = 4_000_000_000
    (folders[5] / META_NAME).write_text(json.dumps(meta))
    os.symlink("/etc/hostname", folders[5] / "link")
    # A folder without a log, one without a sidecar.
    (sessions_dir(workspace) / "20200101-000000-dead").mkdir()
    (folders[7] / META_NAME).unlink()
    _agree(workspace)
    # Only the newest few are checked in full, not every folder.
    checked = []
    real = catalog._clean_info
    monkeypatch.setattr(catalog, "_clean_info", lambda fd, d: checked.append(d.name) or real(fd, d))
    catalog.latest_session(workspace)
    assert len(checked) <= 5, checked


def test_resume_last_through_the_magic(ip, workspace: Path):
    folders = _sessions(workspace, 12)
    out = run(ip, "sessions resume --last")
    assert f"resumed session {folders[-1].name}" in out
