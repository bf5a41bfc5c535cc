"""Memory stores (pseudoclaude_nb/memory/store.py): topic files, headers, slugs, permissions.

SPEC §3 (project store in .pseudoclaude/memory/, user store in $PSEUDOCLAUDE_HOME/memory/
with folder 0700 and files 0600, atomic writes) and §10 (the front-matter header).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pseudoclaude_nb.memory import MemoryManager, MemoryStore, Topic, slugify, user_memory_dir
from pseudoclaude_nb.memory.store import HEADER_FIELDS, INDEX_NAME, parse_stamp

ANTHROPIC_SHAPED = "sk-ant-api03-" + "Q" * 40


def topic(**fields) -> Topic:
    base = dict(
        name="package manager",
        description="This project uses pnpm, never npm",
        type="preference",
        level="project",
        source="20261130-142030-a1b2/" + "a" * 32,
        created_at="2026-11-01T10:00:00Z",
        updated_at="2026-11-02T11:30:00Z",
        status="active",
        body="Use `pnpm install`.\n\nnpm writes the wrong lock file.",
    )
    base.update(fields)
    return Topic(**base)


def test_a_topic_round_trips_through_its_file_with_every_header_field(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "memory", "project")
    original = topic()
    path = store.put(original)
    assert path == tmp_path / "memory" / "package-manager.md"
    text = path.read_text(encoding="utf-8")
    header = text.split("---\n")[1]
    assert [line.split(":")[0] for line in header.splitlines()] == list(HEADER_FIELDS)
    assert "created_at: 2026-11-01T10:00:00Z" in text and "status: active" in text
    assert store.get("package manager") == original
    assert store.get("Package  Manager") == original  # the slug is the identity
    assert store.topics() == [original] and store.problems == []


def test_awkward_values_are_quoted_so_yaml_reads_them_as_the_same_strings(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    store = MemoryStore(tmp_path, "user")
    awkward = topic(
        name="yes",
        description='key: value # not a comment, "quoted" and 引号',
        level="user",
        body="- a list\n- as the body",
    )
    text = store.put(awkward).read_text(encoding="utf-8")
    header = yaml.safe_load(text.split("---\n")[1])
    assert header["name"] == "yes" and header["description"] == awkward.description
    assert store.get("yes") == awkward


@given(
    name=st.text(min_size=1, max_size=80).filter(lambda s: s.strip()),
    description=st.text(min_size=1, max_size=120).filter(lambda s: s.strip()),
    body=st.text(max_size=300),
)
@settings(max_examples=60, deadline=None)
def test_any_name_description_and_body_survive_a_round_trip(
    tmp_path_factory: pytest.TempPathFactory, name: str, description: str, body: str
) -> None:
    store = MemoryStore(tmp_path_factory.mktemp("m"), "project")
    original = topic(name=" ".join(name.split()), description=" ".join(description.split()), body=body)
    if not original.name or not original.description:
        return
    store.put(original)
    back = store.get(original.name)
    assert back is not None
    assert (back.name, back.description) == (original.name, original.description)
    assert back.body == body.replace("\r\n", "\n").replace("\r", "\n").strip("\n")


def test_slugs_are_safe_file_names() -> None:
    assert slugify("Package Manager!") == "package-manager"
    assert slugify("项目 约定") == "项目-约定"
    assert slugify("../../etc/passwd") == "etc-passwd"
    assert slugify("MEMORY") == "memory-topic"  # memory.md would be MEMORY.md on macOS
    assert slugify("con") == "con-topic"
    assert slugify("...").startswith("topic-") and slugify("...") != slugify("!!!")
    assert slugify("under_score") == "under-score"
    assert len(slugify("x" * 500)) == 60
    assert not slugify(".hidden").startswith(".")


def test_unreadable_files_are_reported_not_fatal(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path, "project")
    store.put(topic())
    (tmp_path / "broken.md").write_text("no header here\n")
    (tmp_path / "bad-type.md").write_text("---\nname: bad type\ndescription: d\ntype: rumour\n---\nbody\n")
    (tmp_path / INDEX_NAME).write_text("# whatever\n")
    assert [t.name for t in store.topics()] == ["package manager"]
    reasons = {p.path.name: p.reason for p in store.problems}
    assert set(reasons) == {"broken.md", "bad-type.md"}
    assert "'---'" in reasons["broken.md"] and "rumour" in reasons["bad-type.md"]


def test_a_hand_written_minimal_topic_gets_defaults(tmp_path: Path) -> None:
    (tmp_path / "tabs.md").write_text("---\nname: tabs\ndescription: Indent with tabs\n---\nAlways.\n")
    (found,) = MemoryStore(tmp_path, "project").topics()
    assert (found.type, found.status, found.source, found.body) == ("fact", "active", "user", "Always.")


def test_user_store_is_private_under_pseudoclaude_home(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "pc-home"
    monkeypatch.setenv("PSEUDOCLAUDE_HOME", str(home))
    old = os.umask(0o022)
    try:
        manager = MemoryManager(tmp_path / "ws")
        assert manager.user.root == user_memory_dir() == home / "memory"
        manager.add("user", "editor", "Prefers vim keybindings", "preference", "vim")
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(home) == 0o700 and mode(home / "memory") == 0o700
    files = sorted((home / "memory").iterdir())
    assert [f.name for f in files] == [INDEX_NAME, "editor.md"]
    assert all(mode(f) == 0o600 for f in files)
    # No temporary file is left behind by the atomic writes.
    assert not [p for p in (home / "memory").iterdir() if p.name.startswith(".")]


def test_an_existing_user_folder_that_is_too_open_is_tightened(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PSEUDOCLAUDE_HOME", str(tmp_path / "h"))
    (tmp_path / "h" / "memory").mkdir(parents=True)
    os.chmod(tmp_path / "h" / "memory", 0o755)
    MemoryManager(tmp_path / "ws").add("user", "shell", "Uses fish", "preference", "fish")
    assert stat.S_IMODE((tmp_path / "h" / "memory").stat().st_mode) == 0o700


def test_project_files_follow_the_umask_like_the_code_beside_them(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        MemoryManager(tmp_path).add("project", "tests", "Run pytest -q", "convention", "pytest -q")
    finally:
        os.umask(old)
    path = tmp_path / ".pseudoclaude" / "memory" / "tests.md"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_secrets_never_reach_a_memory_file(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "env-key-value-1234567890")
    manager = MemoryManager(tmp_path)
    manager.add(
        "project",
        "deploy",
        f"Deploy with token {ANTHROPIC_SHAPED}",
        "reference",
        f"curl -H 'Authorization: Bearer abcdefghijklmnop1234' … key env-key-value-1234567890 and {ANTHROPIC_SHAPED}",
    )
    folder = tmp_path / ".pseudoclaude" / "memory"
    on_disk = "".join(p.read_text(encoding="utf-8") for p in folder.iterdir())
    assert ANTHROPIC_SHAPED not in on_disk and "env-key-value-1234567890" not in on_disk
    assert "abcdefghijklmnop1234" not in on_disk
    assert "[REDACTED:anthropic]" in on_disk and "[REDACTED:OPENAI_API_KEY]" in on_disk


def test_stamps_parse_with_or_without_a_zone() -> None:
    assert parse_stamp("2026-11-30T14:20:30Z").utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    assert parse_stamp("2026-11-30T14:20:30").tzinfo is not None  # type: ignore[union-attr]
    assert parse_stamp("last tuesday") is None


def test_a_topic_renamed_by_hand_stays_reachable_and_is_not_duplicated(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path, "project")
    store.put(topic())
    (tmp_path / "package-manager.md").rename(tmp_path / "pm.md")
    assert store.get("package manager") == topic() and store.get("pm") == topic()
    assert [p.reason for p in (store.topics(), store.problems)[1]] == [
        "its name 'package manager' belongs in package-manager.md"
    ]
    store.put(topic(body="new body"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["package-manager.md"]
    assert store.delete("package manager") and not store.delete("package manager")
