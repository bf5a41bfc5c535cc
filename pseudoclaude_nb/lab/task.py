"""The lab's task: a scripted review of a small package, long enough for many replaces.

One session of several ``%agent`` runs. The first prompt states the spec (three
constraints); the second adds a rule; the agent finds an error in the nightly log early
on, writes a test that reproduces it and leaves it open; then it goes module by module —
two pages, a grep, a smoke test, an edit — noting what it found. Every turn is a real tool
call in a generated workspace, so the context grows as a real one does (~1,000 tokens a
step here). Nothing runs a subprocess: the lab must stay fast.

The facts are the lab's ground truth: the must-keep ones (the spec, the later rule, the two
paths of the error, the error itself) are stated once and never repeated, so whether the
final context still holds them is up to the strategy (and the pins); the notes of each
module are what crowds them out of a summary of limited length (``model``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

FactKind = Literal["constraint", "rule", "path", "error", "note"]

PHASE_STEPS = 5  # tool-calling turns per module
PHASES_PER_RUN = 6  # modules per %agent run
PACKAGE = "src/ledger"
MODULE_LINES = 240
PAGE = 120


@dataclass(frozen=True)
class Fact:
    """One thing the task stated or found, as a summary would write it.

    ``needle`` is what must be in a context for the fact to count as kept: the text a
    person would look for (a path, the error's message, the words of a constraint)."""

    key: str
    kind: FactKind
    text: str
    needle: str
    must_keep: bool = False


CONSTRAINTS = (
    Fact("stdlib", "constraint", "Use only the standard library.", "use only the standard library", True),
    Fact(
        "signatures",
        "constraint",
        "Keep every public function signature unchanged.",
        "keep every public function signature unchanged",
        True,
    ),
    Fact("iso-dates", "constraint", "Dates are ISO 8601 (YYYY-MM-DD).", "ISO 8601 (YYYY-MM-DD)", True),
)
RULE = Fact(
    "raw-data", "rule", "Never write to data/raw/ (the customer's copy).", "never write to data/raw/", True
)
ERROR_PATH = Fact(
    "dates-module", "path", "src/ledger/dates.py raises the open error.", "src/ledger/dates.py", True
)
TEST_PATH = Fact(
    "dates-test", "path", "tests/test_dates.py reproduces the open error.", "tests/test_dates.py", True
)
OPEN_ERROR = Fact(
    "open-error",
    "error",
    "Open: ValueError: month must be in 1..12 (row 4127 of the nightly run), not fixed yet.",
    "ValueError: month must be in 1..12",
    True,
)
MUST_KEEP = (*CONSTRAINTS, RULE, ERROR_PATH, TEST_PATH, OPEN_ERROR)
SPEC = (*CONSTRAINTS, RULE)  # what a person would pin: the requirements, not the findings

FIRST_PROMPT = (
    "Review the ledger package module by module: read each module in src/ledger/, add a smoke "
    "test for it in tests/, and keep notes of what you find. Constraints: use only the standard "
    "library; keep every public function signature unchanged; dates are ISO 8601 (YYYY-MM-DD)."
)
RULE_PROMPT = (
    "Continue with the next modules. One more rule from now on: never write to data/raw/ "
    "(it is the customer's copy)."
)
NEXT_PROMPT = "Continue with the next modules."
PIN_TEXTS = (
    "Constraints: use only the standard library; keep every public function signature unchanged; "
    "dates are ISO 8601 (YYYY-MM-DD).",
    "Never write to data/raw/ (it is the customer's copy).",
)

NIGHTLY_LOG = "logs/nightly.log"
ERROR_LINE = "ValueError: month must be in 1..12"


@dataclass(frozen=True)
class Task:
    """The runs (prompt, turns) of a task with ``phases`` modules, and every fact it holds."""

    phases: int
    runs: list[tuple[str, list[dict[str, Any]]]]
    facts: tuple[Fact, ...]  # every fact stated, in the order the task states it

    @property
    def turns(self) -> list[dict[str, Any]]:
        return [t for _prompt, turns in self.runs for t in turns]

    @property
    def steps(self) -> int:
        return len(self.turns)


def module_name(k: int) -> str:
    return f"mod_{k:02d}.py"


def _functions(k: int) -> int:
    return 12 + (k * 7) % 17  # deterministic, varied: 12..28


def module_source(k: int) -> str:
    """A generated module of ``MODULE_LINES`` lines (~10 KB): functions with docstrings and bodies."""
    lines = [f'"""ledger.{module_name(k)[:-3]}: generated for the strategy lab."""', "", "import math", ""]
    n = 0
    while len(lines) < MODULE_LINES - 8:
        n += 1
        lines += [
            "",
            f"def step_{k:02d}_{n:02d}(amount: float, rate: float = 0.{n:02d}) -> float:",
            f'    """Apply rate {n} of module {k} to ``amount`` and round to cents."""',
            f"    scaled = amount * (1 + rate) + {k}.{n:02d}",
            f"    if scaled < 0:  # refunds of module {k} are clamped",
            "        return 0.0",
            "    return round(math.floor(scaled * 100) / 100, 2)",
        ]
    return "\n".join(lines[:MODULE_LINES]) + "\n"


DATES_PY = '''"""ledger.dates: parse the dates of the nightly export."""

from datetime import date


def parse_day(text: str) -> date:
    """Parse YYYY-MM-DD."""
    year, month, day = (int(part) for part in text.split("-"))
    if not 1 <= month <= 12:
        raise ValueError("month must be in 1..12")
    return date(year, month, day)
'''


def nightly_log() -> str:
    rows = [f"2026-11-30 02:{i // 60:02d}:{i % 60:02d} INFO row {4000 + i} booked ok" for i in range(127)]
    rows.append(
        "2026-11-30 02:02:07 ERROR row 4127 failed\nTraceback (most recent call last):\n"
        '  File "src/ledger/dates.py", line 9, in parse_day\n'
        f"{ERROR_LINE} (got '2026-13-01')"
    )
    return "\n".join(rows) + "\n"


def make_workspace(root: Path, phases: int) -> Path:
    """The package the task reviews, with the log that holds the error; written fresh."""
    (root / PACKAGE).mkdir(parents=True, exist_ok=True)
    (root / "tests").mkdir(exist_ok=True)
    (root / "logs").mkdir(exist_ok=True)
    (root / "data" / "raw").mkdir(parents=True, exist_ok=True)
    for k in range(1, phases + 1):
        (root / PACKAGE / module_name(k)).write_text(module_source(k), encoding="utf-8")
    (root / PACKAGE / "dates.py").write_text(DATES_PY, encoding="utf-8")
    (root / NIGHTLY_LOG).write_text(nightly_log(), encoding="utf-8")
    return root


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def _turn(text: str, *calls: dict[str, Any]) -> dict[str, Any]:
    return {"text": text, "tool_calls": list(calls)}


def note_facts(k: int) -> tuple[Fact, Fact]:
    """The two notes module ``k`` leaves: what a summary of limited length must choose among."""
    path = f"{PACKAGE}/{module_name(k)}"
    n = len([ln for ln in module_source(k).splitlines() if ln.startswith("def ")])
    return (
        Fact(
            f"note-{k}",
            "note",
            f"{path} has {n} functions, all with docstrings.",
            f"{module_name(k)} has {n} functions",
        ),
        Fact(
            f"test-{k}",
            "note",
            f"tests/test_mod_{k:02d}.py is the smoke test of {path}.",
            f"test_mod_{k:02d}.py is the smoke test",
        ),
    )


def _error_turns() -> list[dict[str, Any]]:
    test = (
        "import unittest\n\nfrom ledger.dates import parse_day\n\n\nclass NightlyRow4127(unittest.TestCase):\n"
        "    def test_month_13_is_refused(self):\n        with self.assertRaises(ValueError):\n"
        "            parse_day('2026-13-01')\n"
    )
    return [
        _turn(
            "First the last nightly run, to see what state the package is in.",
            _call("read_file", path=NIGHTLY_LOG),
        ),
        _turn(
            f"The nightly run failed at row 4127: {ERROR_LINE}, raised in src/ledger/dates.py. It is not "
            "in scope to fix now, so I leave it open and add a test that reproduces it.",
            _call("write_file", path=TEST_PATH.needle, content=test),
        ),
    ]


def _module_turns(k: int) -> list[dict[str, Any]]:
    path = f"{PACKAGE}/{module_name(k)}"
    note, test_note = note_facts(k)
    test = (
        f"import unittest\n\nfrom ledger import {module_name(k)[:-3]}\n\n\nclass Smoke{k:02d}(unittest.TestCase):\n"
        f"    # smoke {k}\n    def test_first_step(self):\n"
        f"        self.assertGreaterEqual({module_name(k)[:-3]}.step_{k:02d}_01(10.0), 0)\n"
    )
    return [
        _turn(f"Next module: {path}. Reading the first page.", _call("read_file", path=path, limit=PAGE)),
        _turn("And the second page.", _call("read_file", path=path, offset=PAGE + 1, limit=PAGE)),
        _turn(
            "Counting its functions and docstrings.",
            _call("grep", pattern=r"^def |\"\"\"", path=path),
        ),
        _turn(
            f"Noted: {note.text} Adding its smoke test.",
            _call("write_file", path=f"tests/test_mod_{k:02d}.py", content=test),
        ),
        _turn(
            f"Marking it reviewed. {test_note.text}",
            _call(
                "edit_file",
                path=f"tests/test_mod_{k:02d}.py",
                old_string=f"    # smoke {k}\n",
                new_string=f"    # smoke {k}: reviewed\n",
            ),
        ),
    ]


def build_task(phases: int) -> Task:
    """The task over ``phases`` modules: one run per ``PHASES_PER_RUN`` modules, each ending
    with a short answer that repeats none of the must-keep facts."""
    if phases < 1:
        raise ValueError("the lab's task needs at least one module (phases >= 1)")
    runs: list[tuple[str, list[dict[str, Any]]]] = []
    facts: list[Fact] = [*CONSTRAINTS, ERROR_PATH, TEST_PATH, OPEN_ERROR]  # in the order stated
    for start in range(1, phases + 1, PHASES_PER_RUN):
        index = len(runs)
        prompt = FIRST_PROMPT if index == 0 else RULE_PROMPT if index == 1 else NEXT_PROMPT
        turns = _error_turns() if index == 0 else []
        if index == 1:
            facts.append(RULE)
        last = min(start + PHASES_PER_RUN - 1, phases)
        for k in range(start, last + 1):
            turns += _module_turns(k)
            facts += note_facts(k)
        turns.append(_turn(f"Modules {start} to {last} are reviewed, each with a smoke test."))
        runs.append((prompt, turns))
    return Task(phases, runs, tuple(facts))
