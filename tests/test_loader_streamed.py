"""The streamed full replay (issue 18): the log is read a chunk at a time and only the effective
state is kept, so a full load holds about the state it returns, not the log twice over.

The replay must not depend on where the chunks are cut: every damaged log loads to the same
result at any chunk size as in one piece (the whole-buffer replay it replaced). A replace
that never completes gives back the state it would have replaced, held meanwhile by offset
only. And the peak memory of a full load, measured with tracemalloc, stays near the size of
what it returns: before streaming it was over 2x (the bytes, their lines, then the state).
"""

from __future__ import annotations

import dataclasses
import gc
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import ToolCall
from pseudoclaude_nb.session import load_session
from pseudoclaude_nb.session import replay as replay_module
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir
from tests.test_loader_fuzz import _real_log, damage
from tests.test_truncation import write_real_session

FIELDS = [f.name for f in dataclasses.fields(replay_module.LoadResult) if f.name not in ("path",)]


def _fields(r: replay_module.LoadResult) -> dict:
    out = {name: getattr(r, name) for name in FIELDS}
    out["effective_from_line"] = r.effective_from_line
    return out


def _result(path: Path) -> dict:
    return _fields(load_session(path, full=True))


def _at_chunk(path: Path, chunk: int) -> dict:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(replay_module, "CHUNK", chunk)
        return _result(path)


@pytest.fixture(scope="module")
def real_logs(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    root = tmp_path_factory.mktemp("streamed-logs")
    return [
        _real_log(root, "plain", exchanges=4, replace_at=None),
        _real_log(root, "replaced", exchanges=5, replace_at=2),
        _real_log(root, "late-replace", exchanges=3, replace_at=2),
    ]


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("streamed-probe") / "conversation.jsonl"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_logs_load_the_same_at_any_chunk_size(real_logs, probe, data) -> None:
    probe.write_bytes(data.draw(damage(data.draw(st.sampled_from(real_logs)))))
    whole = _at_chunk(probe, 1 << 30)  # one piece: the replay as it was before streaming
    chunk = data.draw(st.sampled_from([1, 2, 3, 7, 64, 1000, 4096]))
    assert _at_chunk(probe, chunk) == whole, f"at {chunk}-byte chunks"


def test_truncations_of_a_real_log_load_the_same_at_small_chunks(workspace, tmp_path) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    log, _final = write_real_session(workspace, scripts)
    data = log.read_bytes()
    cut = tmp_path / "cut" / "conversation.jsonl"
    cut.parent.mkdir()
    for k in range(0, len(data) + 1, max(1, len(data) // 400)):
        cut.write_bytes(data[:k])
        assert _at_chunk(cut, 5) == _at_chunk(cut, 1 << 30), f"truncated at byte {k}"


def _session(workspace: Path, messages: int, *, body: int = 1500) -> tuple[Path, Conversation, SessionWriter]:
    folder = new_session_dir(workspace)
    conv = Conversation()
    writer = SessionWriter(folder, model="m", fsync=False)
    writer.attach(conv)
    for i in range(messages // 3):
        conv.add_user(f"step {i} " + "ask " * (body // 20))
        call = ToolCall(id=f"c{i}", name="read_file", arguments={"path": f"f{i}.py"})
        conv.add_assistant_tool_calls("reading", [call])
        conv.add_tool_result(call.id, f"{i}: " + "line of a file\n" * (body // 15))
    return folder, conv, writer


def test_an_unfinished_replace_gives_back_the_state_held_by_offset(workspace) -> None:
    folder, conv, writer = _session(workspace, 60)
    before = conv.messages()
    log = folder / "conversation.jsonl"
    conv.replace("snapshot", before[:-3])
    writer.close()
    data = log.read_bytes()
    # Cut the replace after its marker and one snapshot line, then go on appending: the
    # replace is torn, the old state stands, and what follows appends to it.
    marker = data.rfind(b'"type":"replace"')
    start = data.rfind(b"\n", 0, marker) + 1
    second = data.index(b"\n", data.index(b"\n", start) + 1) + 1
    log.write_bytes(data[:second])
    with SessionWriter(folder, model="m", fsync=False) as w:
        resumed = Conversation(before)
        w.attach(resumed)
        resumed.add_user("after the crash")
    for chunk in (1 << 30, 4096, 7):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(replay_module, "CHUNK", chunk)
            r = load_session(folder, full=True)
        assert r.torn_replace
        assert [x.to_dict() for x in r.messages] == [x.to_dict() for x in [*before, resumed.messages()[-1]]]


def _peak_and_kept(folder: Path) -> tuple[int, int, int]:
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = load_session(folder, full=True)
        gc.collect()
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.messages
    return peak - base, kept - base, len(result.messages)


@pytest.mark.parametrize("last", ["appends", "snapshot"])
def test_a_full_load_holds_about_the_state_it_returns_not_the_log(workspace, monkeypatch, last) -> None:
    """Peak traced memory of a full load vs what the result keeps (tracemalloc: RSS never shrinks).

    With the log read whole it was over 2x (the bytes, their lines and the state at once),
    over 3x after a snapshot replace (the state it replaced as well). The margin here is
    generous (1.35x plus the read buffer); it fails if the loader holds the log again.
    """
    monkeypatch.setattr(replay_module, "CHUNK", 64 << 10)
    folder, conv, writer = _session(workspace, 2400, body=3000)
    if last == "snapshot":  # a Layer 1 snapshot: the whole conversation again, one result swapped
        msgs = conv.messages()
        result = msgs[-1].tool_result
        assert result is not None
        swapped = msgs[-1].model_copy(
            update={"tool_result": result.model_copy(update={"content": "(preview)"})}
        )
        conv.replace("snapshot", [*msgs[:-1], swapped])
    writer.close()
    log_bytes = (folder / "conversation.jsonl").stat().st_size
    assert log_bytes > 3_000_000
    peak, kept, count = _peak_and_kept(folder)
    assert count == 2400
    assert peak <= 1.35 * kept + 4 * (64 << 10), (peak, kept, log_bytes)


# --- the full replay's hint: lines before the last replace are held by offset ------------------------------


def _hinted(path: Path, hint: int) -> dict:
    result = replay_module.LoadResult(path=path)
    with open(path, "rb") as f:
        replay_module.replay_file(f.fileno(), result, held_before=hint)
    replay_module.settle(result)
    return _fields(result)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_wrong_hint_costs_time_never_the_result(real_logs, probe, data) -> None:
    """Whatever offset the hint names (a marker, mid-line, past the end), the result is the same."""
    raw = data.draw(damage(data.draw(st.sampled_from(real_logs))))
    probe.write_bytes(raw)
    markers = [i for i in range(len(raw)) if raw.startswith(b'{"v":1,"type":"replace"', i)]
    hint = data.draw(st.one_of(st.sampled_from(markers or [0]), st.integers(0, len(raw) + 10)))
    assert _hinted(probe, hint) == _hinted(probe, 0), f"hint {hint}"


def test_the_hint_is_the_last_replace_in_the_window(workspace, monkeypatch) -> None:
    from pseudoclaude_nb.session import fast_load

    folder, conv, writer = _session(workspace, 30)
    conv.replace("snapshot", conv.messages()[-6:])
    conv.add_user("between")
    conv.replace("compact", conv.messages()[-4:])
    conv.add_user("after")
    writer.close()
    log = folder / "conversation.jsonl"
    data = log.read_bytes()
    last = data.rfind(b'{"v":1,"type":"replace"')
    with open(log, "rb") as f:
        assert fast_load.last_replace_hint(f.fileno(), len(data)) == last
        monkeypatch.setattr(fast_load, "HINT_WINDOW", len(data) - last - 10)  # the marker starts before it
        assert fast_load.last_replace_hint(f.fileno(), len(data)) == 0


def test_a_full_load_of_a_long_log_holds_what_a_replace_drops_by_offset(workspace, monkeypatch) -> None:
    from pseudoclaude_nb.session import loader

    folder, conv, writer = _session(workspace, 60)
    conv.replace("snapshot", conv.messages()[-6:])
    conv.add_user("after")
    writer.close()
    seen: list[int] = []
    real = replay_module.replay_file

    def spy(fd, r, *, held_before=0):
        seen.append(held_before)
        return real(fd, r, held_before=held_before)

    monkeypatch.setattr(loader, "replay_file", spy)
    monkeypatch.setattr(loader, "FAST_MIN_SKIP", 1)
    hinted = load_session(folder, full=True)
    assert seen and seen[0] > 0
    log = folder / "conversation.jsonl"
    assert seen[0] == log.read_bytes().rfind(b'{"v":1,"type":"replace"')
    assert [m.to_dict() for m in hinted.messages] == [m.to_dict() for m in conv.messages()]
