"""The lab for any strategy (issue 46): the person's own as an arm, arms that cannot run, the two
summarizers.

A strategy of one's own is a file in the folder the lab runs from (``MODULE:CLASS``, as
``%agent --strategy`` takes it): it is loaded before any arm plays, so one that does not
import is one line and nothing runs; one that raises while it plays marks its runs failed, and
the other arms play on. The lab model's summaries come in two kinds — the worst case (the last
12 facts) and the careful one (every must-keep fact it saw) — and the tables show both.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from pseudoclaude_nb import cli
from pseudoclaude_nb.errors import ConfigError
from pseudoclaude_nb.lab import arms, experiments, facts, plots, report, run
from pseudoclaude_nb.lab.model import CAREFUL, NEWEST
from pseudoclaude_nb.lab.task import CONSTRAINTS, MUST_KEEP, OPEN_ERROR, RULE, build_task
from pseudoclaude_nb.messages import Message
from tests.strategy_support import DROP_READS

PRICE = "claude-sonnet-4-5"
STRATEGIES = (
    DROP_READS
    + '''


class Boom(Strategy):
    """Fine for five steps, then it raises."""

    name = "boom"

    def decide(self, view):
        if view.step > 5:
            raise ValueError(f"no plan for step {view.step}")
        return Keep()


class NotAStrategy:
    def decide(self, view):
        return None


class Compact(Strategy):
    name = "compact"  # a built-in's name

    def decide(self, view):
        return Keep()
'''
)
SMALL = replace(
    experiments.QUICK,
    name="small",
    modules=6,
    window=30_000,
    sweep_modules=(2, 6),
    sweep_windows=(30_000,),
    drift_modules=8,
    drift_window=30_000,
    drift_generations=2,
)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The person's folder, with their strategies in ``mine.py``, as the current folder."""
    (tmp_path / "mine.py").write_text(STRATEGIES, encoding="utf-8")
    (tmp_path / "broken.py").write_text(
        "from pseudoclaude_nb.strategies import Strategy\nclass Half(Strategy:\n"
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def lab(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["lab", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("arms_given", "said"),
    [
        ("compact,broken:Half", "strategy broken:Half: module broken"),
        ("compact,mine:Missing", "module mine has no Missing"),
        ("compact,mine:NotAStrategy", "class NotAStrategy is not a strategy"),
        ("compact,mine:Compact", "is named 'compact', which is a built-in arm's name"),
        ("compact,nowhere:Thing", "module nowhere"),
        ("compact,sideways", "unknown sideways; choose from none, compact, rollover, api, or MODULE:CLASS"),
    ],
)
def test_an_arm_that_cannot_run_is_one_line_before_any_arm_runs(
    folder: Path, capsys: pytest.CaptureFixture[str], arms_given: str, said: str
) -> None:
    code, out, err = lab(capsys, "--quick", "--arms", arms_given, "--json", "lab.json")
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("python -m pseudoclaude_nb lab: error: --arms"), err
    assert said in lines[0]
    assert "· " not in err and not (folder / "lab.json").exists()  # no arm ran


def test_the_arms_are_loaded_from_the_folder_named(folder: Path) -> None:
    specs = arms.resolve(["compact", "mine:DropReads", "compact"], folder)
    assert [(a.name, a.setting) for a in specs] == [
        ("none", "compact"),
        ("compact", "compact"),
        ("drop-reads", "mine:DropReads"),
    ]
    with pytest.raises(ConfigError, match="does not import"):
        arms.resolve(["broken:Half"], folder)
    load = arms.loader(folder)
    assert load("mine:DropReads", Path("/nonexistent-workspace")).name == "drop-reads"  # the folder's, always


@pytest.mark.script_may_remain  # the failing arm's script stops where its strategy raised
def test_a_strategy_that_raises_fails_its_runs_and_the_other_arms_play_on(folder: Path) -> None:
    result = experiments.run_lab(SMALL, arms=["compact", "mine:Boom"], parts=("side_by_side",), folder=folder)
    boom = [r for r in result.side_by_side if r.arm.name == "boom"]
    others = [r for r in result.side_by_side if r.arm.name != "boom"]
    assert len(boom) == 3 and all(r.failed and r.steps == 5 for r in boom)
    assert all(
        "StrategyError: strategy boom raised ValueError in decide: no plan for step 6" in r.failed
        for r in boom
    )
    assert others and all(r.done and set(r.statuses) == {"done"} for r in others)
    assert result.find(result.side_by_side, "compact").steps > 5  # it played its whole task
    table = report.side_by_side(result)
    row = next(r for r in table.rows if r[0].startswith("boom"))
    assert row[0] == "boom (30K window) (failed)" and row[1] == "5" and set(row[2:9]) == {"–"}
    assert set(row[9:]) == {"failed"}
    (note,) = table.notes
    assert note.startswith(
        "boom: 3 runs, the first (boom (30K window)): failed after 5 requests: StrategyError"
    )
    assert note in str(table) and note in table.html()
    figures = result.to_dict()
    assert [r["failed"] is not None for r in figures["side_by_side"]] == [
        r.arm.name == "boom" for r in result.side_by_side
    ]
    facts_table = report.facts(result)
    assert "boom (failed)" in facts_table.headers


def test_the_person_s_strategy_is_in_every_table_and_plot(folder: Path) -> None:
    result = experiments.run_lab(SMALL, arms=["compact", "rollover", "mine:DropReads"], folder=folder)
    assert result.arms == ["none", "compact", "rollover", "drop-reads"]
    assert result.settings == {"compact": "compact", "rollover": "rollover", "drop-reads": "mine:DropReads"}
    mine = result.find(result.side_by_side, "drop-reads")
    assert mine.done and mine.replaces.get("drop") and mine.replace_count == len(mine.replaced_at)
    tables = [
        report.side_by_side(result),
        report.facts(result),
        report.sweep(result),
        report.sweep(result, cached=False),
        report.break_even_table(result),
        report.drift(result),
    ]
    for t in tables:
        assert any("drop-reads" in h for h in t.headers) or any(
            r[0].startswith("drop-reads") for r in t.rows
        ), t
    assert "drop-reads" in report.render(result)
    figures = [
        plots.context_curves(result),
        plots.costs(result),
        plots.fidelity(result),
        plots.sweep(result),
        plots.sweep(result, "drop-reads"),
        plots.drift(result),
    ]
    for fig in figures:
        ax = fig.axes[0]
        said = [t.get_text() for t in ax.get_legend().get_texts()] + [
            t.get_text() for t in ax.get_xticklabels()
        ]
        said.append(ax.get_title())
        assert any("drop-reads" in s for s in said), (ax.get_title(), said)
    json.dumps(result.to_dict())  # every figure, the person's arm too, as JSON


def play(tmp_path: Path, name: str, modules: int, summarizer: str) -> run.ArmResult:
    root = tmp_path / f"{name}-{modules}-{summarizer}"
    root.mkdir(parents=True)
    with run.lab_process(root / "home"):
        arm = run.Arm(name, 40_000, summarizer=summarizer)
        return run.run_arm(arm, build_task(modules), root, price_model=PRICE)


def test_the_careful_summary_keeps_what_the_worst_case_loses(tmp_path: Path) -> None:
    worst, good = play(tmp_path, "compact", 14, NEWEST), play(tmp_path, "compact", 14, CAREFUL)
    assert worst.replace_count == good.replace_count >= 3  # the same task, the same replaces
    assert good.kept == dict.fromkeys(good.kept, True) and len(good.kept) == len(MUST_KEEP)
    assert worst.fidelity < good.fidelity == 1.0
    assert min(good.drift) == 1.0 and min(worst.drift) < 1.0
    # Rollover's handoffs are written by the same summarizer.
    assert play(tmp_path, "rollover", 14, CAREFUL).fidelity == 1.0


def test_the_careful_summarizer_keeps_every_must_keep_fact_it_saw_then_the_newest() -> None:
    task = build_task(8)
    said = [
        Message(role="user", content="Constraints: use only the standard library."),
        Message(role="assistant", content=f"Found {OPEN_ERROR.needle}."),
        *(Message(role="assistant", content=f"Noted: {f.text}") for f in task.facts if f.kind == "note"),
    ]
    notes = [f for f in task.facts if f.kind == "note"]
    kept_worst = facts.newest(task.facts, said, budget=4)
    kept_good = facts.careful(task.facts, said, budget=4)
    assert kept_worst == notes[-4:]
    assert kept_good == [CONSTRAINTS[0], OPEN_ERROR, *notes[-2:]]
    # More must-keep facts than the budget: all of them, and nothing else.
    assert facts.careful(task.facts, said, budget=1) == [CONSTRAINTS[0], OPEN_ERROR]
    assert RULE not in kept_good  # never stated here, so not made up


def test_the_tables_label_each_summarizer(tmp_path: Path) -> None:
    lab_report = experiments.LabReport(SMALL, PRICE, 12, ["none", "compact"])
    none = run.ArmResult(run.Arm("none", run.UNMANAGED_WINDOW), kept={"a": True, "b": True})
    worst = run.ArmResult(run.Arm("compact", 30_000), kept={"a": False, "b": True})
    pinned = run.ArmResult(run.Arm("compact", 30_000, pins=True), kept={"a": True, "b": True})
    good = run.ArmResult(run.Arm("compact", 30_000, summarizer=CAREFUL), kept={"a": True, "b": True})
    lab_report.side_by_side = [none, worst, pinned, good]
    table = report.side_by_side(lab_report)
    assert table.headers[-3:] == (
        "facts kept, last-12 summary",
        "facts kept, careful summary",
        "spec pinned, last-12 summary",
    )
    assert [r[-3:] for r in table.rows] == [("2/2", "2/2", "–"), ("1/2", "2/2", "2/2")]
    assert "last-12 summary (the facts mentioned last: the worst case)" in table.caption
    assert "careful summary (every must-keep fact seen: the good case)" in table.caption
    assert report.facts(lab_report).headers == (
        "fact",
        "none",
        "compact",
        "compact + pins",
        "compact, careful",
    )


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("0", "--budget-usd 0: must be a number of US dollars above 0"),
        ("-2", "--budget-usd -2: must be a number of US dollars above 0"),
        ("nan", "--budget-usd nan: must be a number of US dollars above 0"),
        ("inf", "--budget-usd inf: must be a number of US dollars above 0"),
        ("two", "--budget-usd two: not a number"),
        ("$2", "--budget-usd $2: not a number"),
    ],
)
def test_a_budget_that_is_no_amount_is_refused(
    folder: Path, capsys: pytest.CaptureFixture[str], given: str, said: str
) -> None:
    args = ["--provider", "anthropic", "--model", "claude-sonnet-4-5", "--budget-usd", given, "--yes"]
    code, out, err = lab(capsys, *args)
    assert code == 2 and out == "" and said in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--budget-usd", "2"], "--budget-usd is for a real model: add --provider"),
        (["--provider", "anthropic", "--budget-usd", "2"], "name the model to spend on with --model"),
        (["--provider", "anthropic", "--model", "claude-sonnet-4-5"], "give the most the run may spend"),
        (
            ["--provider", "anthropic", "--model", "claude-unpriced-9", "--budget-usd", "1"],
            "prices.json has no price for it, so the budget cannot be kept",
        ),
    ],
)
def test_a_real_model_needs_its_provider_model_and_budget(
    folder: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    code, out, err = lab(capsys, *args)
    assert code == 2 and out == "" and said in err, err


def test_the_must_keep_facts_stated_are_those_a_run_heard(tmp_path: Path) -> None:
    """A run that never met a fact (a real model that never read the log) is not marked as
    having lost it: it is not counted."""
    short = play(tmp_path, "compact", 2, NEWEST)
    assert set(short.kept) == {f.key for f in MUST_KEEP if f is not RULE}  # one run: the rule never came
