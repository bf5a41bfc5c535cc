"""The built-in script behind the ``demo`` provider: a small, real coding task, offline.

The demo is what a newcomer runs first, with no API key. It plays a fixed script in the
scripted format of SPEC §11 while the host runs every tool call for real in the workspace:
the agent writes ``stats.py`` with an off-by-one bug and a ``unittest`` test, watches the
test fail, generates a ~144 KB ``sample_run.log`` and reads it (a result over 50,000 bytes,
so Layer 1 spills it to disk), pages through the rest of the log (which carries the
estimate over the Layer 2 line of the small window, so older turns get summarized), greps
for warnings instead of re-reading, fixes the bug with ``edit_file``, re-runs the tests and
checks ``stats.mean`` against the sample data.

Under ``--strategy api`` it plays the compact story's turns, and the summary is the emulated
server's compaction block at the same point (``ScriptedProvider``'s emulation).

Under ``--strategy rollover`` the same task plays rollover's story instead of a summary:
after the first log page the host's reminder is due, the model answers it with
``new_context`` (a four-section handoff and related files), and the fresh window greps the
log instead of paging on. Each script's narration says what its strategy really did.

The script must survive a second run in the same directory: every file that ``edit_file``
touches is written fresh by ``write_file`` earlier in the same run, and every command is
deterministic. Only the standard library is used (no pytest on the demo machine).
"""

from __future__ import annotations

from typing import Any

DEMO_MODEL = "pseudoclaude-demo"

DEMO_PROMPT = "Add a stats module with a mean function and a test, then check it against the sample data."

# Layer 2 fires at window - 20,000 (summary reserve) - 13,000 (safety margin) = 17,000
# estimated tokens. The run's messages come to ~10,000 tokens after the first log page and
# ~18,000 after the second (pages of ~28 KB each), so with the system prompt and tool
# schemas on top (1-5K tokens) the line is crossed when the second page arrives, never
# before. After the summary (~1K) plus the second page, the run stays under the line.
DEMO_CONTEXT_WINDOW = 50_000

# Under rollover the same window has its base limit at 17,000 and the reminder 60 % of that
# before it (the 15,000 default is capped for small windows), from 6,800: the first log
# page carries the estimate over it (~13,000), the preview before it does not (~5,500).
# The handoff turn comes right after that page; a window so full that the host goes
# straight to fallback still offers new_context, so the script holds either way.

# The recent tail that Layer 2 keeps must be smaller than one page, or the summary has
# nothing old to replace; the spec default (20,000) is sized for real windows.
DEMO_RECENT_TOKENS = 4_000

# A scripted summary answers at once, so "compacting…" would flash by faster than a screen
# redraws (12,046 → 20,150 → 10,457 in under 0.1 s). A person watching the demo gets this
# long to see it; PSEUDOCLAUDE_DEMO_PACE=0 (the test suite, recorded outputs) skips the wait.
DEMO_SUMMARY_SECONDS = 1.2

SAMPLE_LOG = "sample_run.log"
PAGE_LINES = 500
LOG_PAGES = (2001, 2501)  # the first read stops at line 2000 (read_file's default limit)

# --- files the agent writes ----------------------------------------------------------------

STATS_PY = '''\
"""Small descriptive statistics helpers."""

from __future__ import annotations

from collections.abc import Iterable


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean of *values*; raises ValueError when there are none."""
    xs = list(values)
    if not xs:
        raise ValueError("mean() of empty data")
    return sum(xs) / (len(xs) - 1)
'''

# The bug, and its fix, as exact strings for edit_file (the old string occurs once).
STATS_BUG = "    return sum(xs) / (len(xs) - 1)\n"
STATS_FIX = "    return sum(xs) / len(xs)\n"

TEST_STATS_PY = '''\
"""Tests for stats.py (stdlib unittest: run with `python -m unittest -q test_stats`)."""

import unittest

from stats import mean


class MeanTest(unittest.TestCase):
    def test_several_values(self):
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)

    def test_single_value(self):
        self.assertEqual(mean([7.5]), 7.5)

    def test_any_iterable(self):
        self.assertAlmostEqual(mean(x / 10 for x in range(1, 4)), 0.2)

    def test_empty_is_an_error(self):
        with self.assertRaises(ValueError):
            mean([])


if __name__ == "__main__":
    unittest.main()
'''

# The processing log: 3,000 lines, ~144 KB; lines 418, 1291 and 2649 are the warnings.
MAKE_SAMPLE_LOG_PY = '''\
"""Write sample_run.log: a deterministic processing log (3,000 rows, 3 warnings)."""

from datetime import datetime, timedelta

START = datetime(2026, 11, 30, 14, 20, 0)
ROWS = 3000
WARNINGS = {
    417: "value missing, row skipped",
    1290: "sensor timeout, row skipped",
    2648: "value out of range (-999.0), row skipped",
}


def main():
    lines = []
    for row in range(ROWS):
        stamp = (START + timedelta(seconds=row)).strftime("%Y-%m-%d %H:%M:%S")
        if row in WARNINGS:
            lines.append(f"{stamp} WARNING row {row:04d} {WARNINGS[row]}")
        else:
            value = 12.0 + (row * 37 % 400) / 10
            lines.append(f"{stamp} INFO row {row:04d} value={value:.1f} ok")
    text = "\\n".join(lines) + "\\n"
    with open("sample_run.log", "w", encoding="utf-8", newline="\\n") as fh:
        fh.write(text)
    print(f"wrote {ROWS} lines ({len(text.encode()):,} bytes) to sample_run.log")


if __name__ == "__main__":
    main()
'''

CHECK_SAMPLE_PY = '''\
"""Check stats.mean on the values of sample_run.log against the standard library."""

import re
import statistics

import stats

OK_ROW = re.compile(r" INFO row \\d+ value=(-?[0-9.]+) ok$")

values, skipped = [], 0
with open("sample_run.log", encoding="utf-8") as fh:
    for line in fh:
        match = OK_ROW.search(line.rstrip("\\n"))
        if match:
            values.append(float(match.group(1)))
        elif " WARNING " in line:
            skipped += 1

ours, reference = stats.mean(values), statistics.fmean(values)
print(f"{len(values)} ok rows, {skipped} warning rows skipped")
print(f"stats.mean = {ours:.4f}, statistics.fmean = {reference:.4f}")
assert abs(ours - reference) < 1e-9, "stats.mean disagrees with statistics.fmean"
print("OK: stats.mean matches the standard library on the sample data")
'''

RUN_TESTS = "python -m unittest -q test_stats"

# --- summaries for Layer 2 (SPEC §8.2 evidence tiers) ----------------------------------------

# The first is written for the automatic compaction when the second log page arrives; the
# second for a later one (e.g. a `%compact` after the run), so it describes the finished task.

SUMMARY_AFTER_PAGING = """\
## Confirmed requirements
- Add a `stats` module with a `mean` function. Source: user request (first message).
- Add a test for it. Source: user request.
- Check `mean` against the sample data. Source: user request.

## Agent inferences (unverified)
- Tests use stdlib `unittest` rather than pytest so they run on a bare Python; my choice, \
not a stated requirement.
- "The sample data" is `sample_run.log`, which I generated with `make_sample_log.py` \
(deterministic, 3,000 lines); the user may have meant other data.
- Only rows ending in `ok` carry usable values; `WARNING` rows should be skipped.

## Unresolved problems
- `python -m unittest -q test_stats` fails (failures=2, errors=1): `mean([1, 2, 3, 4])` \
returned 3.333… instead of 2.5 and `mean([7.5])` raised ZeroDivisionError. Likely cause: \
`stats.py` divides by `len(xs) - 1` instead of `len(xs)`. Not fixed yet.
- Warnings in the log not yet counted: lines 1–2000 were only seen as a preview.

## Files and changes
- `stats.py` — created; `mean()` with the divisor above.
- `test_stats.py` — created; 4 unittest cases (several values, single value, any \
iterable, empty input raises ValueError).
- `make_sample_log.py` — created; writes `sample_run.log`.
- `sample_run.log` — generated, 3,000 lines, ~144 KB. The full read of lines 1–2000 (call \
`demo_05_read_log`) was spilled to `tool-results/demo_05_read_log.txt`; only its preview \
was in context. Lines 2001–2500 were then read with offset/limit: all regular `ok` rows.

## Next steps
1. Grep `sample_run.log` for `WARNING` rather than re-reading it.
2. Re-read `stats.py`, then fix the divisor with `edit_file`.
3. Re-run the tests; compute `stats.mean` over the `ok` rows and compare with \
`statistics.fmean`.
"""

SUMMARY_AFTER_FIX = """\
## Confirmed requirements
- Add a `stats` module with a `mean` function. Source: user request (first message).
- Add a test for it. Source: user request.
- Check `mean` against the sample data. Source: user request.

## Agent inferences (unverified)
- Tests use stdlib `unittest` (my choice, so they run without pytest).
- "The sample data" is the generated `sample_run.log`, and its warning rows are excluded \
from the mean. Neither point was confirmed by the user.

## Unresolved problems
- None known. The user has not yet said whether the generated log is the data they meant.

## Files and changes
- `stats.py` — `mean()` fixed with `edit_file`: divides by `len(xs)` (was `len(xs) - 1`, \
which failed 3 of 4 tests). After the fix, `python -m unittest -q test_stats` ran 4 tests: OK.
- `test_stats.py` — 4 unittest cases, unchanged since creation.
- `make_sample_log.py`, `sample_run.log` — deterministic log, 3,000 lines, ~144 KB. The \
full read of lines 1–2000 was spilled to `tool-results/demo_05_read_log.txt`.
- `sample_run.log` has exactly 3 `WARNING` lines (grep): rows 0417 (value missing), \
1290 (sensor timeout), 2648 (value out of range).
- `check_sample.py` — created; `python check_sample.py` found 2,997 `ok` rows and \
`stats.mean` equal to `statistics.fmean` (31.9188).

## Next steps
1. None required; re-run `python -m unittest -q test_stats` and `python check_sample.py` \
after any change to `stats.py`.
"""

# --- turns -------------------------------------------------------------------------------------


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, "id": call_id}


def _turn(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    return {"text": text, "tool_calls": list(calls)}


def _write_code_turns() -> list[dict[str, Any]]:
    return [
        _turn(
            "I'll add a small `stats.py` with `mean()` and a test next to it. The test uses "
            "the standard library's `unittest`, so it runs without installing anything.",
            _call("demo_01_write_stats", "write_file", path="stats.py", content=STATS_PY),
            _call("demo_01_write_test", "write_file", path="test_stats.py", content=TEST_STATS_PY),
        ),
        _turn(
            "Both files are in place. Running the tests:",
            _call("demo_02_run_tests", "bash", command=RUN_TESTS),
        ),
    ]


def _sample_data_turns() -> list[dict[str, Any]]:
    return [
        _turn(
            "The tests **fail**: `mean([1, 2, 3, 4])` returns `3.333…` instead of `2.5`, and "
            "`mean([7.5])` raises `ZeroDivisionError`. That points to the divisor. I'll come "
            "back to it — first I need the sample data to check against, so I'll write a small "
            "generator for a processing log.",
            _call(
                "demo_03_write_generator",
                "write_file",
                path="make_sample_log.py",
                content=MAKE_SAMPLE_LOG_PY,
            ),
        ),
        _turn(
            "Generating the log (the script writes the file and prints only a one-line "
            "summary, so the command output stays small):",
            _call("demo_04_generate_log", "bash", command="python make_sample_log.py"),
        ),
        _turn(
            "Let me look at the log before using it.",
            _call("demo_05_read_log", "read_file", path=SAMPLE_LOG),
        ),
    ]


def _first_page_turn() -> dict[str, Any]:
    return _turn(
        "That result was over 50 KB, so the host **spilled** it to a file and left me a "
        "preview: rows of `INFO … row … value=… ok`, and a note that the read stopped at "
        "line 2000. I'll page through the rest with `offset`/`limit`, 500 lines at a "
        "time — small enough to stay in context.",
        _call("demo_06_read_page_1", "read_file", path=SAMPLE_LOG, offset=LOG_PAGES[0], limit=PAGE_LINES),
    )


def _paging_turns() -> list[dict[str, Any]]:
    # Two pages that stay in context (each under the 50,000-byte spill limit): they are
    # what carries the estimate over the Layer 2 line, and what the summary then replaces.
    second = LOG_PAGES[1]
    return [
        _first_page_turn(),
        _turn(
            "Lines 2001–2500 are all regular `ok` rows. Last page:",
            _call("demo_07_read_page_2", "read_file", path=SAMPLE_LOG, offset=second, limit=PAGE_LINES),
        ),
        _turn(
            "One `WARNING` on this page: row 2648, value out of range. Paging is expensive, so "
            "instead of re-reading the first 2,000 rows I'll **grep** the whole file for "
            "warnings — and look at `stats.py` again before editing it.",
            _call("demo_08_grep_warnings", "grep", pattern="WARNING", path=SAMPLE_LOG),
            _call("demo_08_read_stats", "read_file", path="stats.py"),
        ),
    ]


# The rollover demo's handoff, in the four sections of SPEC §9: what the next window needs,
# with requirements sourced and guesses labelled as guesses.
HANDOFF = {
    "confirmed_requirements": [
        {"text": "Add a stats module with a mean function", "source": "user"},
        {"text": "Add a test for it", "source": "user"},
        {"text": "Check mean against the sample data", "source": "user"},
    ],
    "agent_inferences": [
        "tests use stdlib unittest so they run without pytest (my choice)",
        "the sample data is sample_run.log, generated by make_sample_log.py (3,000 lines)",
        "only rows ending in `ok` carry values; WARNING rows are to be skipped",
        "lines 2001-2500 are all regular ok rows; lines 1-2000 were seen only as a preview",
    ],
    "unresolved_conflicts": [
        "python -m unittest -q test_stats fails (failures=2, errors=1): stats.py divides by "
        "len(xs) - 1 instead of len(xs)",
    ],
    "unverified_acceptance_criteria": [
        "find the WARNING rows of sample_run.log (grep, not paging)",
        "fix the divisor in stats.py with edit_file, then re-run the tests",
        "compare stats.mean with statistics.fmean on the ok rows",
    ],
}

HANDOFF_FILES = [
    {"path": "stats.py", "role": "implementation", "note": "mean() has the off-by-one divisor"},
    {"path": "test_stats.py", "role": "test", "note": "4 unittest cases; 3 fail now"},
    {"path": SAMPLE_LOG, "role": "other", "note": "the sample data; grep it for WARNING"},
]


def _handoff_turns() -> list[dict[str, Any]]:
    return [
        _first_page_turn(),
        _turn(
            "Lines 2001–2500 are all regular `ok` rows. The host's note says this small window "
            "is nearly full, so instead of reading the last page here I'll **hand off** to a "
            "fresh window with `new_context`: what you asked for (with its source), what I "
            "only inferred, the failing tests, what is left to check, and the files to open.",
            _call("demo_07_new_context", "new_context", handoff=HANDOFF, related_files=HANDOFF_FILES),
        ),
        _turn(
            "A fresh window: it starts from your request, my handoff and the related files, and "
            "the old one stays searchable. The workspace is the source of truth, so rather than "
            "paging through the rest of the log I'll **grep** the whole file for warnings — and "
            "re-read `stats.py` before editing it.",
            _call("demo_08_grep_warnings", "grep", pattern="WARNING", path=SAMPLE_LOG),
            _call("demo_08_read_stats", "read_file", path="stats.py"),
        ),
    ]


# What the end of the run says about the window, per strategy: only what really happened.
CONTEXT_STORY = {
    "compact": (
        "- The demo window is small (50,000 tokens; Layer 2 line at 17,000): the two log "
        "pages carried the estimate over it, so the older turns were replaced by a "
        "summary. `%context` shows what I see now.\n"
        "- `%sessions show <session id>` (the id is on the last line below) shows the "
        "whole session log, including the spill and the replace marker."
    ),
    "rollover": (
        "- The demo window is small (50,000 tokens; under rollover the reminder is due from "
        "6,800 and the fallback limit is 17,000): after the first log page the host reminded "
        "me, and I handed off to a fresh window with `new_context` — no summary was written. "
        "The new window began with your request verbatim, my four-section handoff and the "
        "related files; `%context` shows what I see now.\n"
        "- `%sessions show <session id>` (the id is on the last line below) shows the "
        "whole session log, including the spill, the handoff and the rollover marker; "
        "`%sessions search WARNING` searches the old window too."
    ),
    "api": (
        "- The demo window is small (50,000 tokens; the provider was asked to compact from "
        "17,000): the two log pages carried the request over that trigger, so the provider "
        "summarized everything before my answer into a compaction block (the demo emulates "
        "the server's compaction). The host logged it as a replace; `%context` shows what I "
        "see now, and `%compact --undo` would take it back.\n"
        "- `%sessions show <session id>` (the id is on the last line below) shows the "
        "whole session log, including the spill and the replace marker."
    ),
}


def _fix_and_verify_turns(strategy: str) -> list[dict[str, Any]]:
    return [
        _turn(
            "Three warning rows in total (0417, 1290, 2648); they carry no usable value, so "
            "the check must skip them. And the bug is confirmed: `mean()` divides by "
            "`len(xs) - 1`. Fixing it, and adding a script that compares `stats.mean` with "
            "`statistics.fmean` on the `ok` rows:",
            _call(
                "demo_09_fix_mean",
                "edit_file",
                path="stats.py",
                old_string=STATS_BUG,
                new_string=STATS_FIX,
            ),
            _call("demo_09_write_check", "write_file", path="check_sample.py", content=CHECK_SAMPLE_PY),
        ),
        _turn(
            "Re-running the tests and the sample-data check:",
            _call("demo_10_rerun_tests", "bash", command=RUN_TESTS),
            _call("demo_10_check_sample", "bash", command="python check_sample.py"),
        ),
        _turn(
            "Done — all 4 tests pass, and `stats.mean` agrees with `statistics.fmean` on the "
            "2,997 `ok` rows of the sample data (31.9188).\n\n"
            "**What changed**\n"
            "- `stats.py`: `mean()` — fixed an off-by-one (it divided by `len(xs) - 1`).\n"
            "- `test_stats.py`: 4 `unittest` cases; run `python -m unittest -q test_stats`.\n"
            "- `make_sample_log.py` → `sample_run.log` (3,000 lines, ~144 KB, 3 `WARNING` "
            "rows); `check_sample.py` checks `mean` on it.\n\n"
            "**Context management you just saw**\n"
            "- My first read of the log was over 50 KB, so it was spilled to "
            "`.pseudoclaude/sessions/<session id>/tool-results/demo_05_read_log.txt`; only a "
            "preview stayed in my context.\n" + CONTEXT_STORY[strategy],
        ),
    ]


STRATEGIES = tuple(CONTEXT_STORY)


def build_demo_script(strategy: str = "compact") -> dict[str, Any]:
    """Return the demo script for ``strategy`` in the scripted-provider format (SPEC §11).

    A fresh dict each call. Both strategies do the same task with the same files; only the
    middle differs (two log pages and a summary, or one page and a handoff).
    """
    if strategy not in CONTEXT_STORY:
        raise ValueError(f"no demo script for strategy {strategy!r}; choose one of: {', '.join(STRATEGIES)}")
    # The middle and the summaries by strategy (a table, not a comparison of names).
    middle = {"compact": _paging_turns, "rollover": _handoff_turns, "api": _paging_turns}[strategy]()
    turns = _write_code_turns() + _sample_data_turns() + middle + _fix_and_verify_turns(strategy)
    return {
        "model": DEMO_MODEL,
        "context_window": DEMO_CONTEXT_WINDOW,
        "turns": turns,
        # Rollover writes no summary in the run; a `%compact` after it describes the finished task.
        # Under api the emulated server compaction takes the first summary (``ScriptedProvider``).
        "summaries": {
            "compact": [SUMMARY_AFTER_PAGING, SUMMARY_AFTER_FIX],
            "rollover": [SUMMARY_AFTER_FIX],
            "api": [SUMMARY_AFTER_PAGING, SUMMARY_AFTER_FIX],
        }[strategy],
        "memory_ops": [],
        "summary_seconds": DEMO_SUMMARY_SECONDS,
    }
