"""The timeline's index (``timeline.idx``): an open from it equals a full scan, whatever happened to it.

Issue 18: the timeline of a big log is built from the classification the writer keeps
beside the log, scanning only the bytes after it. Every test compares against the same
log scanned in full with no index, the scan ``tests/test_timeline_binned.py`` checks
against a parse of every line.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.session import sidecar, timeline
from pseudoclaude_nb.session.timeline import build_timeline, keep_index
from pseudoclaude_nb.session.timeline import index as timeline_index
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import LOG_NAME, TIMELINE_INDEX
from tests.test_timeline_binned import _varied_lines


def picture(t) -> tuple:
    """Everything a timeline holds and draws."""
    bins = [(b.first, b.end, b.counts, b.effective, b.peak_tokens, b.replaces, b.first_line, b.last_line, b.images)
            for b in t.bins]  # fmt: skip
    return (list(t.offsets), list(t.lines), bytes(t.kinds), t.usage, t.reasons, t.images, bins,
            t.effective_from, t.effective_messages, t.problems)  # fmt: skip


def full_scan(folder: Path) -> tuple:
    """The timeline with no index, and no index left behind."""
    index = folder / TIMELINE_INDEX
    kept = index.read_bytes() if index.exists() else None
    index.unlink(missing_ok=True)
    old = timeline_index.MIN_BYTES
    timeline_index.MIN_BYTES = 1 << 62  # this build must not write one
    try:
        t = build_timeline(folder)
    finally:
        timeline_index.MIN_BYTES = old
    assert t.indexed_bytes == 0
    if kept is not None:
        index.write_bytes(kept)
    return picture(t)


@pytest.fixture
def always_kept(monkeypatch):
    """Every keep and every build writes the index, however little it would cover."""
    monkeypatch.setattr(timeline_index, "MIN_BYTES", 0)


def grown_log(folder: Path, seed: int, *, pieces: int = 5, torn_tail: bool = False) -> bytes:
    """A log of varied lines written in pieces, the index kept after each (as the writer does)."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    lines = _varied_lines(rng, 400)
    cuts = sorted(rng.sample(range(1, len(lines)), pieces - 1))
    log = folder / LOG_NAME
    for lo, hi in zip([0, *cuts], [*cuts, len(lines)], strict=True):
        with open(log, "ab") as f:
            f.write(b"".join(lines[lo:hi]))
        keep_index(folder, sidecar.refresh(folder))
    if torn_tail:
        with open(log, "ab") as f:
            f.write(b'{"v":1,"type":"message","id":"torn","ts":1.0,"role":"us')
    return log.read_bytes()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("chunk", [4096, 1 << 20])
def test_an_open_from_the_index_equals_a_full_scan(
    tmp_path: Path, monkeypatch, always_kept, seed: int, chunk: int
) -> None:
    monkeypatch.setattr(timeline, "READ_CHUNK", chunk)
    folder = tmp_path / "s"
    grown_log(folder, seed, torn_tail=seed % 2 == 1)
    with open(folder / LOG_NAME, "ab") as f:  # lines after the index, the sidecar behind them too
        f.write(b"".join(_varied_lines(random.Random(seed + 100), 30)))
    covered = timeline_index.covered(folder)
    assert covered > 0
    t = build_timeline(folder)
    assert t.indexed_bytes == covered  # read from the index, not scanned
    assert picture(t) == full_scan(folder)
    # An entry is read by its offset all the same.
    for i in random.Random(seed).sample(range(t.count), 20):
        assert t.items[i].line == t.lines[i]


def test_a_build_leaves_an_index_behind_and_the_next_open_uses_it(tmp_path: Path, always_kept) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / LOG_NAME).write_bytes(b"".join(_varied_lines(random.Random(5), 300)))
    first = build_timeline(folder)
    assert first.indexed_bytes == 0 and (folder / TIMELINE_INDEX).exists()
    second = build_timeline(folder)
    assert second.indexed_bytes == (folder / LOG_NAME).stat().st_size
    assert picture(second) == picture(first) == full_scan(folder)


def test_small_logs_get_no_index(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / LOG_NAME).write_bytes(b"".join(_varied_lines(random.Random(6), 300)))
    build_timeline(folder)
    keep_index(folder, sidecar.refresh(folder))
    assert not (folder / TIMELINE_INDEX).exists()


def _damages(raw: bytes, other: bytes, rng: random.Random) -> list[bytes]:
    out = [b"", b"PCTLIDX1", other, raw[:-1], raw + b"x", raw[: len(raw) // 2], os.urandom(len(raw))]
    for at in rng.sample(range(len(raw)), 40):  # one byte changed anywhere
        out.append(raw[:at] + bytes([raw[at] ^ (1 << rng.randrange(8))]) + raw[at + 1 :])
    return out


def test_a_damaged_or_foreign_index_is_not_used(tmp_path: Path, always_kept) -> None:
    folder, elsewhere = tmp_path / "s", tmp_path / "other"
    grown_log(folder, 1)
    grown_log(elsewhere, 2)
    expected = full_scan(folder)
    raw = (folder / TIMELINE_INDEX).read_bytes()
    other = (elsewhere / TIMELINE_INDEX).read_bytes()
    for damaged in _damages(raw, other, random.Random(0)):
        (folder / TIMELINE_INDEX).write_bytes(damaged)
        t = build_timeline(folder)
        assert t.indexed_bytes == 0, damaged[:40]
        assert picture(t) == expected


def test_a_crafted_index_that_checks_out_but_names_impossible_entries_is_not_used(
    tmp_path: Path, always_kept
) -> None:
    """A checksum is not a proof: entries out of order or past the covered bytes are refused."""
    folder = tmp_path / "s"
    log = grown_log(folder, 3)
    expected = full_scan(folder)
    with open(folder / LOG_NAME, "rb") as f:
        fd = f.fileno()
        good = timeline_index.load(folder, fd, size=len(log), trusted=len(log), kinds=len(timeline.KINDS))
        assert good is not None
        crafted = [
            {"offsets": good.offsets[::-1]},
            {"lines": type(good.lines)("Q", [0] * len(good.lines))},
            {"kinds": bytearray([250]) + good.kinds[1:]},
            {"usage": [(len(good.offsets) + 5, 1)]},
            {"reasons": {len(good.offsets): "compact"}},
            {"next_line": 1},
        ]
        for change in crafted:
            fields = {**good.__dict__, **change}
            assert timeline_index.save(folder, fd, timeline_index.Saved(**fields))
            t = build_timeline(folder)
            assert t.indexed_bytes == 0, change.keys()
            assert picture(t) == expected


def test_a_log_rewritten_or_cut_is_scanned_anew(tmp_path: Path, always_kept) -> None:
    folder = tmp_path / "s"
    grown_log(folder, 4)
    index = (folder / TIMELINE_INDEX).read_bytes()
    # Another log under the same name: its first bytes differ.
    (folder / LOG_NAME).write_bytes(b"".join(_varied_lines(random.Random(40), 300)))
    (folder / TIMELINE_INDEX).write_bytes(index)
    t = build_timeline(folder)
    assert t.indexed_bytes == 0 and picture(t) == full_scan(folder)
    # The same lines in another order: as long, a line ending where the index ends; only
    # the first bytes tell the logs apart.
    log = grown_log(tmp_path / "r", 4)
    assert timeline_index.covered(tmp_path / "r") == len(log)
    (tmp_path / "r" / LOG_NAME).write_bytes(b"".join(line + b"\n" for line in log.split(b"\n")[-2::-1]))
    t = build_timeline(tmp_path / "r")
    assert t.indexed_bytes == 0 and picture(t) == full_scan(tmp_path / "r")
    # The same log cut short (a hand repair): the index covers more than there is.
    grown_log(tmp_path / "c", 4)
    log = (tmp_path / "c" / LOG_NAME).read_bytes()
    (tmp_path / "c" / LOG_NAME).write_bytes(log[: len(log) // 2])
    t = build_timeline(tmp_path / "c")
    assert t.indexed_bytes == 0 and picture(t) == full_scan(tmp_path / "c")


def test_the_index_is_never_written_through_a_link_and_a_fifo_is_not_read(
    tmp_path: Path, always_kept
) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / LOG_NAME).write_bytes(b"".join(_varied_lines(random.Random(8), 200)))
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"keep me")
    (folder / TIMELINE_INDEX).symlink_to(outside)
    t = build_timeline(folder)
    assert outside.read_bytes() == b"keep me"
    assert not (folder / TIMELINE_INDEX).is_symlink()  # the rename replaced the link itself
    expected = picture(t)
    (folder / TIMELINE_INDEX).unlink()
    os.mkfifo(folder / TIMELINE_INDEX)
    t = build_timeline(folder)  # does not block on the FIFO
    assert t.indexed_bytes == 0 and picture(t) == expected


def test_the_writer_keeps_the_index_at_its_close_once_the_log_grew_enough(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setattr(timeline_index, "MIN_BYTES", 64 << 10)
    folder = tmp_path / "s"
    folder.mkdir()
    rng = random.Random(9)
    with SessionWriter(folder, fsync=False, meta_bytes=32 << 10) as writer:
        for i in range(600):
            writer.append_message(
                Message(role="user" if i % 2 else "assistant", content="x" * rng.randint(10, 2000))
            )
    size = (folder / LOG_NAME).stat().st_size
    assert timeline_index.covered(folder) == size  # kept at its close
    t = build_timeline(folder)
    assert t.indexed_bytes == size
    assert picture(t) == full_scan(folder)
    # A run too short to keep it again leaves it as it was; the open scans the rest.
    with SessionWriter(folder, fsync=False, meta_bytes=32 << 10) as writer:
        writer.append_message(Message(role="user", content="one more"))
    assert timeline_index.covered(folder) == size < (folder / LOG_NAME).stat().st_size
    t = build_timeline(folder)
    assert t.indexed_bytes == size and picture(t) == full_scan(folder)


def test_opens_while_the_writer_runs_and_keeps_the_index_see_the_log_as_it_was(
    tmp_path: Path, always_kept
) -> None:
    """Builds racing a writer that appends and keeps the index at every few appends (each
    also writing its own): every build is a prefix of the last one, and the last one equals
    a full scan."""
    import threading

    folder = tmp_path / "s"
    folder.mkdir()
    done = threading.Event()
    failures: list[BaseException] = []

    def write() -> None:
        try:
            with SessionWriter(folder, fsync=False) as writer:
                for i in range(400):
                    writer.append_message(
                        Message(role="user" if i % 2 else "assistant", content=f"m{i} " * 50)
                    )
                    if i % 25 == 24:
                        writer.settle_meta()
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=write)
    thread.start()
    seen = []
    while not done.is_set() or len(seen) < 3:
        if (folder / LOG_NAME).exists():
            seen.append(build_timeline(folder))
    thread.join()
    assert not failures
    assert any(t.indexed_bytes for t in seen) and len({t.count for t in seen}) > 2  # it did race
    last = build_timeline(folder)
    assert picture(last) == full_scan(folder)
    assert last.count == 400
    for t in seen:
        n = max(0, t.count - 1)  # the last entry may be a line still being written
        assert list(t.offsets)[:n] == list(last.offsets)[:n]
        assert bytes(t.kinds)[:n] == bytes(last.kinds)[:n]
