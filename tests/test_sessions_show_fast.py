"""``%sessions show`` of a big log without replaying it (issue 34).

The effective messages come from the last replace (``fast_load``); the counts and problems
of the whole log come from the sidecar, which a full replay would match line for line. The
log here is past ``FAST_MIN_SKIP`` with a replace near its end and an unreadable line near
its start: ``show`` must still name that line, count every logged message and replace, and
never replay the whole log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.logs import build_log
from pseudoclaude_nb.session import loader, replay
from pseudoclaude_nb.session.loader import load_session
from tests.scripts import run_magic as run


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> tuple[Path, str]:
    ws = tmp_path_factory.mktemp("show")
    built = build_log(ws, 20_000_000, seed=3, final_appends=30)
    lines = built.path.read_bytes().split(b"\n")
    lines.insert(12, b'{"v":1,"type":"message", torn')  # an unreadable line early in the log
    built.path.write_bytes(b"\n".join(lines))
    return ws, built.path.parent.name


def test_show_tells_the_whole_log_without_replaying_it(ip, big, monkeypatch):
    ws, sid = big
    full = load_session(ws / ".pseudoclaude" / "sessions" / sid, full=True)
    assert full.replaces >= 2 and full.problems()
    ip.run_line_magic("config", f"PseudoClaude.workspace = {str(ws)!r}")
    run(ip, f"sessions show {sid}")  # the sidecar is caught up once (the log was edited)

    def no_full_replay(*args, **kwargs):
        raise AssertionError("show replayed the whole log")

    monkeypatch.setattr(loader, "replay_file", no_full_replay)
    monkeypatch.setattr(replay, "replay_file", no_full_replay)
    out = run(ip, f"sessions show {sid}")
    assert (
        f"{len(full.messages)} effective messages of {full.physical_messages} logged · {full.replaces} replaces"
        in out
    )
    for problem in full.problems():
        assert problem in out


def test_a_sidecar_stored_before_replaces_were_counted_still_serves(ip, big):
    """Its stored replay is still used (the pins a resume needs, no scan of the log's prefix);
    ``show`` then leaves the replace count out rather than guess it."""
    import json
    import os

    from pseudoclaude_nb import safeio
    from pseudoclaude_nb.session import sidecar

    ws, sid = big
    folder = ws / ".pseudoclaude" / "sessions" / sid
    sidecar.refresh(folder)
    meta = json.loads((folder / "meta.json").read_text())
    meta.pop("replaces", None)
    meta["replay"].pop("replaces")
    (folder / "meta.json").write_text(json.dumps(meta))
    fd = safeio.open_file(folder / "conversation.jsonl")
    try:
        _pins, offset = sidecar.stored_pins(fd, folder, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    assert offset > 0  # the stored state was taken, not thrown away
    ip.run_line_magic("config", f"PseudoClaude.workspace = {str(ws)!r}")
    out = run(ip, f"sessions show {sid}")
    assert " logged · " in out and " replaces" not in out.splitlines()[1]
