"""MEMORY.md and the system-prompt index (pseudoclaude_nb/memory/index.py), SPEC §10.

The topics are the truth: a missing, edited or stale MEMORY.md is rebuilt. The prompt
index puts project before user, gives each entry its age under the staleness note, and
holds 200 lines and 25,000 bytes — cut between lines, never inside a character, with
"… N more not shown".
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pseudoclaude_nb.memory import MemoryManager, MemoryStore, Topic, prompt_index, sync_index
from pseudoclaude_nb.memory.index import MAX_BYTES, MAX_LINES, NOTE, age_phrase, cap_lines, render_index
from pseudoclaude_nb.memory.store import INDEX_NAME, now_stamp

NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone.utc)
CJK = "项目约定：所有脚本用 pnpm 运行，测试用 vitest，提交前必须通过类型检查和格式检查，不要直接修改生成的文件。"


def topic(
    name: str, level: str = "project", *, days_old: float = 0.0, status: str = "active", description: str = ""
) -> Topic:
    stamp = now_stamp(NOW - dt.timedelta(days=days_old))
    return Topic(
        name=name,
        description=description or f"about {name}",
        type="fact",
        level=level,  # type: ignore[arg-type]
        source="user",
        created_at=stamp,
        updated_at=stamp,
        status=status,  # type: ignore[arg-type]
        body=f"body of {name}",
    )


def test_project_comes_before_user_each_entry_with_its_age_under_the_note() -> None:
    text = prompt_index(
        {"user": [topic("editor", "user", days_old=40)], "project": [topic("pnpm", days_old=0.5)]}, now=NOW
    )
    assert text is not None
    lines = text.splitlines()
    assert lines[0] == NOTE and "stale" in NOTE and "workspace" in NOTE
    assert lines.index("## Project Memory") < lines.index("## User Memory")
    assert "- pnpm — about pnpm (fact, updated <1 day ago, active)" in lines
    assert "- editor — about editor (fact, updated 40 days ago, active)" in lines
    assert "more not shown" not in text


def test_no_topics_means_no_index_at_all() -> None:
    assert prompt_index({"project": [], "user": []}, now=NOW) is None
    only_user = prompt_index({"user": [topic("x", "user")]}, now=NOW)
    assert only_user is not None and "## Project Memory" not in only_user


def test_ages() -> None:
    assert age_phrase(NOW - dt.timedelta(hours=3), NOW) == "updated <1 day ago"
    assert age_phrase(NOW - dt.timedelta(days=1, hours=2), NOW) == "updated 1 day ago"
    assert age_phrase(NOW - dt.timedelta(days=59), NOW) == "updated 59 days ago"
    assert age_phrase(NOW - dt.timedelta(days=200), NOW) == "updated 6 months ago"
    assert age_phrase(NOW - dt.timedelta(days=1000), NOW) == "updated 2 years ago"
    assert age_phrase(None, NOW) == "age unknown"


def test_verified_and_recent_notes_come_first_stale_ones_last() -> None:
    text = prompt_index(
        {
            "project": [
                topic("old", days_old=30),
                topic("checked", days_old=90, status="verified"),
                topic("doubtful", days_old=1, status="stale"),
                topic("new", days_old=2),
            ]
        },
        now=NOW,
    )
    names = [line.split(" — ")[0][2:] for line in text.splitlines() if line.startswith("- ")]  # type: ignore[union-attr]
    assert names == ["checked", "new", "old", "doubtful"]


def _check_cap(text: str, total_entries: int) -> int:
    data = text.encode("utf-8")
    assert data.decode("utf-8") == text  # valid UTF-8, whatever was cut
    assert len(data) <= MAX_BYTES and len(text.splitlines()) <= MAX_LINES
    last = text.splitlines()[-1]
    assert last.startswith("… ") and last.endswith(" more not shown")
    hidden = int(last.split()[1])
    shown = sum(1 for line in text.splitlines() if line.startswith("- "))
    assert shown + hidden == total_entries
    return shown


def test_many_cjk_descriptions_are_cut_by_bytes_at_a_line_boundary() -> None:
    project = [topic(f"约定{i:03d}", description=CJK) for i in range(150)]
    user = [topic(f"偏好{i:03d}", "user", description=CJK) for i in range(150)]
    text = prompt_index({"project": project, "user": user}, now=NOW)
    assert text is not None
    shown = _check_cap(text, 300)
    assert len(text.encode("utf-8")) > MAX_BYTES - 400  # bytes were the binding limit
    assert 0 < shown < 300
    # Every shown entry is whole: the cut fell between lines.
    assert all(line.endswith(", active)") for line in text.splitlines() if line.startswith("- "))
    assert "## User Memory" not in text  # project first: it used the whole budget


def test_many_short_entries_are_cut_by_lines() -> None:
    text = prompt_index(
        {
            "project": [topic(f"n{i}") for i in range(120)],
            "user": [topic(f"u{i}", "user") for i in range(120)],
        },
        now=NOW,
    )
    assert text is not None
    shown = _check_cap(text, 240)
    assert len(text.splitlines()) == MAX_LINES and shown < 240
    assert "## User Memory" in text


@given(
    descriptions=st.lists(
        st.text(min_size=1, max_size=200).map(lambda s: " ".join(s.split()) or "x"), max_size=400
    ),
    split=st.integers(min_value=0, max_value=400),
)
@settings(max_examples=40, deadline=None)
def test_the_cap_holds_for_any_descriptions(descriptions: list[str], split: int) -> None:
    topics = [
        topic(f"t{i}", "project" if i < split else "user", description=d) for i, d in enumerate(descriptions)
    ]
    stores = {
        "project": [t for t in topics if t.level == "project"],
        "user": [t for t in topics if t.level == "user"],
    }
    text = prompt_index(stores, now=NOW)
    if not topics:
        assert text is None
        return
    assert text is not None
    data = text.encode("utf-8")
    assert len(data) <= MAX_BYTES and len(text.splitlines()) <= MAX_LINES
    if "more not shown" in text.splitlines()[-1]:
        _check_cap(text, len(topics))


def test_cap_lines_drops_a_heading_left_without_entries() -> None:
    lines = ["note", "", "## A", "- a1", "", "## B", "- b1", "- b2"]
    assert cap_lines(lines, {3, 6, 7}, max_lines=6, max_bytes=10_000) == [
        "note",
        "",
        "## A",
        "- a1",
        "… 2 more not shown",
    ]


# --- MEMORY.md: generated, and rebuilt when missing or wrong -------------------------------------


def test_memory_md_lists_each_topic_with_link_description_date_and_status(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path, "project")
    store.put(topic("pnpm", days_old=3))
    store.put(topic("tabs [style]", days_old=1, status="verified"))
    topics, rewritten = sync_index(store)
    assert rewritten
    text = (tmp_path / INDEX_NAME).read_text(encoding="utf-8")
    assert text == render_index("project", topics)
    assert text.startswith("# Project memory\n")
    entries = [line for line in text.splitlines() if line.startswith("- ")]
    assert entries == [
        "- [tabs \\[style\\]](tabs-style.md) — about tabs [style] · fact · updated 2026-11-29 · verified",
        "- [pnpm](pnpm.md) — about pnpm · fact · updated 2026-11-27 · active",
    ]
    assert sync_index(store) == (topics, False)  # in step: not rewritten


def test_index_is_rebuilt_after_it_is_deleted_or_edited(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path)
    manager.add("project", "pnpm", "Use pnpm", "preference", "pnpm, never npm")
    index = tmp_path / ".pseudoclaude" / "memory" / INDEX_NAME
    good = index.read_text(encoding="utf-8")

    index.unlink()
    assert "pnpm — Use pnpm" in (manager.prompt_index() or "")
    assert index.read_text(encoding="utf-8") == good
    assert any("rebuilt project memory index" in n for n in manager.take_notices())

    index.write_text("# Project memory\n\n- [npm](npm.md) — use npm\n", encoding="utf-8")
    assert "npm — use npm" not in (manager.prompt_index() or "")
    assert index.read_text(encoding="utf-8") == good


def test_topics_edited_added_or_removed_by_hand_show_up_in_the_index(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path)
    manager.add("project", "pnpm", "Use pnpm", "preference", "pnpm")
    folder = tmp_path / ".pseudoclaude" / "memory"
    path = folder / "pnpm.md"
    path.write_text(path.read_text(encoding="utf-8").replace("Use pnpm", "Use pnpm 9"), encoding="utf-8")
    (folder / "yarn.md").write_text(
        "---\nname: yarn\ndescription: Not yarn either\n---\nno\n", encoding="utf-8"
    )
    text = manager.prompt_index() or ""
    assert "pnpm — Use pnpm 9" in text and "yarn — Not yarn either" in text
    assert "[yarn](yarn.md)" in (folder / INDEX_NAME).read_text(encoding="utf-8")

    path.unlink()
    (folder / "yarn.md").unlink()
    assert manager.prompt_index() is None
    assert not (folder / INDEX_NAME).exists()  # no topics, no index


def test_rebuild_rewrites_and_reports_skipped_files(tmp_path: Path) -> None:
    manager = MemoryManager(tmp_path)
    manager.add("project", "pnpm", "Use pnpm", "preference", "pnpm")
    folder = tmp_path / ".pseudoclaude" / "memory"
    (folder / "junk.md").write_text("not a topic\n")
    [(level, count, problems)] = manager.rebuild(["project"])
    assert (level, count) == ("project", 1)
    assert problems and problems[0].startswith("junk.md")
