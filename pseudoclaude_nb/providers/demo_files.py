"""The demo's data: the files its agent writes, its Layer 2 summaries and rollover's handoff.

``demo_script`` tells the tour; this module holds what the tour writes and hands over, as
exact strings (``edit_file`` needs its old string to occur once in what was written).
"""

from __future__ import annotations

SAMPLE_LOG = "sample_run.log"

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
