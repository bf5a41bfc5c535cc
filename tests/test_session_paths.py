"""Where things live (SPEC §3): workspace resolution, session ids, .gitignore, atomic writes."""

from __future__ import annotations

import os
import re
import secrets
import time
from pathlib import Path

import pytest

from pseudoclaude_nb import workspace as paths
from pseudoclaude_nb.errors import ConfigError, SessionError, SessionNotFoundError
from pseudoclaude_nb.workspace import (
    atomic_write_text,
    ensure_state_dir,
    new_session_dir,
    resolve_workspace,
    session_dir,
)

ID_RE = re.compile(r"^\d{8}-\d{6}-[0-9a-f]{4}$")


# --- resolve_workspace --------------------------------------------------------------------


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name in ("configured", "vscode", "jupyter", "cwd"):
        out[name] = tmp_path / name
        out[name].mkdir()
    return out


def test_configured_wins_over_everything(dirs):
    got = resolve_workspace(
        str(dirs["configured"]),
        cwd=dirs["cwd"],
        environ={"JPY_SESSION_NAME": str(dirs["jupyter"] / "nb.ipynb")},
        notebook_file=str(dirs["vscode"] / "nb.ipynb"),
    )
    assert got == dirs["configured"].resolve()


def test_configured_relative_is_relative_to_cwd(dirs):
    (dirs["cwd"] / "sub").mkdir()
    assert resolve_workspace("sub", cwd=dirs["cwd"], environ={}) == (dirs["cwd"] / "sub").resolve()


def test_configured_expands_user(dirs, monkeypatch):
    monkeypatch.setenv("HOME", str(dirs["configured"].parent))
    assert resolve_workspace("~/configured", cwd=dirs["cwd"], environ={}) == dirs["configured"].resolve()


def test_notebook_file_beats_jupyter_env_and_cwd(dirs):
    got = resolve_workspace(
        None,
        cwd=dirs["cwd"],
        environ={"JPY_SESSION_NAME": str(dirs["jupyter"] / "nb.ipynb")},
        notebook_file=str(dirs["vscode"] / "nb.ipynb"),
    )
    assert got == dirs["vscode"].resolve()


def test_jupyter_env_beats_cwd(dirs):
    got = resolve_workspace(
        None, cwd=dirs["cwd"], environ={"JPY_SESSION_NAME": str(dirs["jupyter"] / "x.ipynb")}
    )
    assert got == dirs["jupyter"].resolve()


def test_relative_notebook_name_is_relative_to_cwd(dirs):
    (dirs["cwd"] / "nbs").mkdir()
    got = resolve_workspace(None, cwd=dirs["cwd"], environ={"JPY_SESSION_NAME": "nbs/a.ipynb"})
    assert got == (dirs["cwd"] / "nbs").resolve()


def test_falls_back_to_cwd(dirs):
    assert resolve_workspace(None, cwd=dirs["cwd"], environ={}) == dirs["cwd"].resolve()
    assert resolve_workspace("", cwd=dirs["cwd"], environ={}) == dirs["cwd"].resolve()


def test_notebook_in_missing_dir_falls_through(dirs):
    got = resolve_workspace(
        None,
        cwd=dirs["cwd"],
        environ={"JPY_SESSION_NAME": str(dirs["jupyter"] / "nb.ipynb")},
        notebook_file=str(dirs["cwd"] / "gone" / "nb.ipynb"),
    )
    assert got == dirs["jupyter"].resolve()


def test_default_cwd_is_process_cwd(workspace):
    assert resolve_workspace(environ={}) == workspace.resolve()


def test_missing_configured_dir_is_a_config_error(dirs):
    missing = dirs["cwd"] / "nope"
    with pytest.raises(ConfigError) as info:
        resolve_workspace(str(missing), cwd=dirs["cwd"], environ={})
    assert str(missing) in str(info.value)
    assert "PseudoClaude.workspace" in str(info.value)


def test_configured_file_is_a_config_error(dirs):
    f = dirs["cwd"] / "file.txt"
    f.write_text("x")
    with pytest.raises(ConfigError):
        resolve_workspace(str(f), cwd=dirs["cwd"], environ={})


# --- session ids ---------------------------------------------------------------------------


def test_new_session_id_format_and_local_time(workspace):
    now = time.mktime((2026, 11, 30, 14, 20, 30, 0, 0, -1))
    path = new_session_dir(workspace, now=now)
    assert path.is_dir()
    assert path.parent == workspace / ".pseudoclaude" / "sessions"
    assert ID_RE.match(path.name), path.name
    assert path.name.startswith("20261130-142030-")


def test_new_session_ids_differ(workspace):
    names = {new_session_dir(workspace).name for _ in range(20)}
    assert len(names) == 20
    assert all(ID_RE.match(n) for n in names)


def test_collision_retries_with_a_new_random_part(workspace, monkeypatch):
    now = time.time()
    first = new_session_dir(workspace, now=now)
    taken = first.name.rsplit("-", 1)[1]
    values = iter([taken, taken, "beef"])
    calls: list[int] = []

    def fake_token_hex(n: int) -> str:
        calls.append(n)
        return next(values)

    monkeypatch.setattr(secrets, "token_hex", fake_token_hex)
    second = new_session_dir(workspace, now=now)
    assert calls == [2, 2, 2]
    assert second.name == first.name.rsplit("-", 1)[0] + "-beef"
    assert first.is_dir() and second.is_dir()
    assert sorted(p.name for p in second.parent.iterdir()) == sorted([first.name, second.name])


def test_gives_up_after_ten_collisions(workspace, monkeypatch):
    now = time.time()
    first = new_session_dir(workspace, now=now)
    taken = first.name.rsplit("-", 1)[1]
    calls = []
    monkeypatch.setattr(secrets, "token_hex", lambda n: calls.append(n) or taken)
    with pytest.raises(SessionError, match="10 tries"):
        new_session_dir(workspace, now=now)
    assert len(calls) == 10


def test_session_dir_lookup(workspace):
    path = new_session_dir(workspace)
    with pytest.raises(SessionNotFoundError):
        session_dir(workspace, path.name)  # no log yet
    (path / "conversation.jsonl").write_bytes(b"")
    assert session_dir(workspace, path.name) == path
    for bad in ("", "../x", ".hidden", "a/b"):
        with pytest.raises(SessionNotFoundError):
            session_dir(workspace, bad)
    with pytest.raises(SessionNotFoundError, match="20000101-000000-0000"):
        session_dir(workspace, "20000101-000000-0000")


# --- .pseudoclaude/.gitignore ---------------------------------------------------------------


def test_gitignore_created_once(workspace):
    root = ensure_state_dir(workspace)
    ignore = root / ".gitignore"
    lines = ignore.read_text().splitlines()
    for pattern in ("sessions/", "trash/", "history.sqlite*"):
        assert pattern in lines
    ignore.write_text("# my own\nsessions/\n")
    new_session_dir(workspace)
    ensure_state_dir(workspace)
    assert ignore.read_text() == "# my own\nsessions/\n"


def test_gitignore_created_by_new_session_dir(workspace):
    new_session_dir(workspace)
    assert (workspace / ".pseudoclaude" / ".gitignore").is_file()
    assert (workspace / ".pseudoclaude" / "sessions").is_dir()


# --- atomic writes --------------------------------------------------------------------------


def test_atomic_write_text_replaces_and_leaves_no_temp(tmp_path):
    target = tmp_path / "meta.json"
    atomic_write_text(target, "first ✓")
    atomic_write_text(target, "second")
    assert target.read_text(encoding="utf-8") == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.json"]


def test_atomic_write_text_fsyncs_before_replace(tmp_path, monkeypatch):
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(paths.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(
        paths.os, "replace", lambda a, b, **kw: (events.append("replace"), real_replace(a, b, **kw))[1]
    )
    atomic_write_text(tmp_path / "x.txt", "data")
    assert events == ["fsync", "replace"]


def test_atomic_write_text_failure_keeps_old_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "meta.json"
    atomic_write_text(target, "old")

    def broken_replace(a, b, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(paths.os, "replace", broken_replace)
    with pytest.raises(OSError):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.json"]
