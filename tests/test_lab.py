"""The strategy lab (issue 31): its figures are measured from real runs, not written down.

Each arm plays the scripted task through the real ``Agent`` (tools run, the session is
logged); these tests change what the lab is given — the task's length, the pins, the
registry — and check that the figures move with it, and run the command a person runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pseudoclaude_nb.context import policies
from pseudoclaude_nb.lab import experiments, facts, report, run, strategy_names
from pseudoclaude_nb.lab.task import CONSTRAINTS, OPEN_ERROR, PIN_TEXTS, RULE, build_task
from pseudoclaude_nb.messages import Message
from tests.strategy_support import DROP_READS

PRICE = "claude-sonnet-4-5"


def play(tmp_path: Path, name: str, modules: int, window: int = 40_000, pins: bool = False) -> run.ArmResult:
    root = tmp_path / f"{name}-{modules}-{window}-{pins}"
    root.mkdir(parents=True, exist_ok=True)
    with run.lab_process(root / "home"):
        return run.run_arm(run.Arm(name, window, pins), build_task(modules), root, price_model=PRICE)


def test_a_longer_task_changes_every_figure(tmp_path: Path) -> None:
    short, long = play(tmp_path, "compact", 2), play(tmp_path, "compact", 8)
    assert short.statuses == ["done"] and long.statuses == ["done", "done"]
    assert long.steps > short.steps and long.input_tokens > short.input_tokens
    assert long.peak_context > short.peak_context and long.dollars > short.dollars
    assert short.replace_count == 0 < long.replace_count == long.summaries
    # Costs are the provider's reported usage priced: caching reads the unchanged prefix.
    for r in (short, long):
        assert r.cache_read > 0 and r.cache_write > 0
        assert r.input_tokens == r.uncached_input + r.cache_read + r.cache_write
        assert r.dollars < r.dollars_uncached


def test_the_unmanaged_arm_never_replaces_and_rollover_hands_off(tmp_path: Path) -> None:
    none = play(tmp_path, run.NONE, 8, window=run.UNMANAGED_WINDOW)
    rollover = play(tmp_path, "rollover", 8)
    assert none.replace_count == 0 and none.fidelity == 1.0 and none.peak_context == max(none.per_step)
    assert rollover.replaces == {"rollover": rollover.handoffs} and rollover.handoffs > 0
    assert rollover.peak_context < none.peak_context
    # The re-reads after each handoff are extra steps, paid for.
    assert rollover.steps > none.steps


def test_the_lab_is_deterministic(tmp_path: Path) -> None:
    first, again = play(tmp_path / "a", "rollover", 4), play(tmp_path / "b", "rollover", 4)
    assert first.to_dict() | {"seconds": 0} == again.to_dict() | {"seconds": 0}


def test_reset_cache_makes_the_next_request_start_cold() -> None:
    from pseudoclaude_nb.providers.base import Request
    from pseudoclaude_nb.providers.scripted import ScriptedProvider, reset_cache

    request = Request(system="s" * 8_000, messages=[Message(role="user", content="go")])
    turn = {"text": "ok"}
    read = []
    for reset in (False, False, True):
        if reset:
            reset_cache()
        provider = ScriptedProvider({"turns": [turn]})
        read.append(provider.complete(request).usage.cache_read_input_tokens)
    assert read[1] > 0 and read[2] == 0 and read[0] in (0, read[1])  # a head sent before is read back


def test_a_pinned_spec_survives_the_summaries_and_a_removed_pin_loses_its_fact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unpinned = play(tmp_path, "compact", 14)
    pinned = play(tmp_path, "compact", 14, pins=True)
    spec = [f.key for f in (*CONSTRAINTS, RULE)]
    assert unpinned.replace_count >= 3
    assert not all(unpinned.kept[k] for k in spec)  # the summaries dropped some of the spec...
    assert all(pinned.kept[k] for k in spec)  # ...the pins kept all of it
    assert min(pinned.drift) == 1.0 and min(unpinned.drift) < 1.0
    # The constraints' pin removed (the rule's kept): they are gone from the final context.
    monkeypatch.setattr(run, "PIN_TEXTS", PIN_TEXTS[1:])
    fewer = play(tmp_path / "constraints-unpinned", "compact", 14, pins=True)
    assert fewer.kept[RULE.key]
    assert not all(fewer.kept[f.key] for f in CONSTRAINTS)
    assert fewer.fidelity < pinned.fidelity


def test_facts_are_found_case_folded_and_the_newest_are_kept() -> None:
    said = [
        Message(role="user", content="Constraints: use only the standard library."),
        Message(role="assistant", content=f"Found {OPEN_ERROR.needle} in src/ledger/dates.py"),
    ]
    found = facts.kept([CONSTRAINTS[0], OPEN_ERROR], facts.context_text("", said))
    assert found == {CONSTRAINTS[0].key: True, OPEN_ERROR.key: True}
    assert facts.fidelity([CONSTRAINTS[0], RULE], facts.context_text("", said)) == 0.5
    task = build_task(2)
    # The later message wins over the first; within one message, the fact stated later.
    assert [f.key for f in facts.newest(task.facts, said, budget=1)] == ["open-error"]
    assert [f.key for f in facts.newest(task.facts, said, budget=2)] == ["dates-module", "open-error"]
    assert len(facts.newest(task.facts, said, budget=9)) == 3


def test_the_arms_are_none_and_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    registered = list(policies.BUILT_IN)
    assert registered[:2] == ["compact", "rollover"] and strategy_names() == ["none", *registered]
    monkeypatch.setitem(policies.BUILT_IN, "sideways", policies.Compact)  # a strategy registered later
    assert strategy_names() == ["none", *registered, "sideways"]


def test_break_even_is_read_from_the_sweep() -> None:
    def result(name: str, window: int, modules: int, dollars: float) -> run.ArmResult:
        return run.ArmResult(
            run.Arm(name, window), modules=modules, dollars=dollars, dollars_uncached=2 * dollars
        )

    lab = experiments.LabReport(experiments.QUICK, PRICE, 12, ["none", "compact", "rollover"])
    lab.sweep = [
        result("none", run.UNMANAGED_WINDOW, 2, 1.0),
        result("none", run.UNMANAGED_WINDOW, 4, 2.0),
        result("none", run.UNMANAGED_WINDOW, 8, 4.0),
        result("rollover", 40_000, 2, 1.2),
        result("rollover", 40_000, 4, 1.9),
        result("rollover", 40_000, 8, 3.0),
        result("rollover", 80_000, 2, 1.1),
        result("rollover", 80_000, 4, 2.1),
        result("rollover", 80_000, 8, 4.1),
    ]
    assert report.break_even(lab) == {40_000: 4, 80_000: None}


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    out = tmp_path_factory.mktemp("lab")
    (out / "mine.py").write_text(DROP_READS, encoding="utf-8")
    arms = "compact,rollover,api,mine:DropReads"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pseudoclaude_nb",
            "lab",
            "--quick",
            "--arms",
            arms,
            "--json",
            str(out / "lab.json"),
        ],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout, json.loads((out / "lab.json").read_text())


def test_the_command_prints_the_tables_a_person_reads(cli_run: tuple[str, dict]) -> None:
    stdout, figures = cli_run
    for heading in ("## Side by side", "## Sweep", "## Drift", "first replace at step"):
        assert heading in stdout
    names = [*policies.BUILT_IN, "drop-reads"]
    arms = [(r["arm"], r["pins"], r["summarizer"]) for r in figures["side_by_side"]]
    variants = [(False, "newest"), (True, "newest"), (False, "careful")]
    assert arms == [("none", False, "newest"), *((n, p, s) for n in names for p, s in variants)]
    assert figures["strategies"]["drop-reads"] == "mine:DropReads" and figures["mode"] == "scripted"
    every = figures["side_by_side"] + figures["sweep"] + figures["drift"]
    assert all(r["statuses"] and set(r["statuses"]) == {"done"} and r["failed"] is None for r in every)
    assert all(r["dollars"] <= r["dollars_uncached"] for r in every)
    # The tables are the JSON's figures, rendered; the person's strategy is a row and a column
    # of each, named by its name.
    for name in ("rollover", "drop-reads"):
        row = next(r for r in figures["side_by_side"] if r["arm"] == name and not r["pins"])
        assert f"{row['peak_context']:,}" in stdout and f"{row['input_tokens']:,}" in stdout
    assert "| drop-reads (60K window) " in stdout and "| drop-reads + pins " in stdout
    assert "drop-reads 40K" in stdout and "| drop-reads, careful " in stdout
    assert any(r["arm"] == "drop-reads" and r["replace_count"] for r in figures["sweep"])


def test_the_command_says_how_to_fix_a_wrong_option(tmp_path: Path) -> None:
    for args, said in (
        (["--price-model", "no-such-model"], "prices.json has no such model"),
        (["--arms", "none,sideways"], "choose from none, compact, rollover, api, or MODULE:CLASS"),
        (["--summary-facts", "0"], "at least 1"),
        (["--quick", "--json", "missing/figures.json"], "the folder missing does not exist; create it"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "pseudoclaude_nb", "lab", *args],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("target", "said"),
    [
        ("folder", "is a folder, not a file"),
        ("/dev/full", "is a device, not a regular file"),
        ("fifo", "is a FIFO, not a regular file"),
        ("missing/figures.json", "the folder missing does not exist; create it"),
        ("readonly/figures.json", "cannot write into the folder readonly"),
    ],
)
def test_the_json_path_is_checked_before_any_arm_runs(tmp_path: Path, target: str, said: str) -> None:
    """Issue 41: a folder or /dev/full failed with a traceback after the whole run; a FIFO blocked."""
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "readonly").mkdir(mode=0o500)
    if target.startswith("readonly") and os.access(tmp_path / "readonly", os.W_OK):
        pytest.skip("running as root: a read-only folder is still writable")  # nothing to refuse
    proc = subprocess.run(
        [sys.executable, "-m", "pseudoclaude_nb", "lab", "--quick", "--json", target],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and f"--json {target}: " in proc.stderr and said in proc.stderr, proc.stderr
    assert "· " not in proc.stderr and proc.stdout == ""  # no arm ran


def test_the_plots_say_how_to_get_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from pseudoclaude_nb.errors import ConfigError
    from pseudoclaude_nb.lab import plots

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a)
    )
    lab = experiments.LabReport(experiments.QUICK, PRICE, 12, ["none"])
    with pytest.raises(ConfigError, match=r"pip install -e '\.\[lab\]'"):
        plots.costs(lab)
