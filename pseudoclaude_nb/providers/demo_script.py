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

Nothing it says is false whatever happened (issue 44): a sentence that depends on what a tool
did is a function of what the model saw (``Seen``: the results, whether the window was
replaced), and the ``DemoProvider`` plays each turn only when every call of the turn before it
succeeded; a refused or failed call ends the tour with a turn that says so.
``build_demo_script`` renders the story as planned (every effect as expected).

The script must survive a second run in the same directory: every file that ``edit_file``
touches is written fresh by ``write_file`` earlier in the same run, and every command is
deterministic. Only the standard library is used (no pytest on the demo machine).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..messages import ToolResult

from .demo_files import (
    CHECK_SAMPLE_PY,
    HANDOFF,
    HANDOFF_FILES,
    MAKE_SAMPLE_LOG_PY,
    RUN_TESTS,
    SAMPLE_LOG,
    STATS_BUG,
    STATS_FIX,
    STATS_PY,
    SUMMARY_AFTER_FIX,
    SUMMARY_AFTER_PAGING,
    TEST_STATS_PY,
)

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

PAGE_LINES = 500
LOG_PAGES = (2001, 2501)  # the first read stops at line 2000 (read_file's default limit)

# --- what the model saw ------------------------------------------------------------------------


class Seen:
    """What the tour's tools did, as the model saw it; ``Seen()`` is the story as planned.

    ``results``: every tool result seen so far in the run, by call id (kept across requests:
    a compaction takes older ones out of the request); ``replaced``: the window was replaced
    (a summary, a handoff, the provider's compaction); ``reminded``: rollover's host reminder
    came; ``window``: the run's context window.
    """

    def __init__(
        self,
        results: dict[str, ToolResult] | None = None,
        *,
        replaced: bool = True,
        reminded: bool = True,
        window: int = DEMO_CONTEXT_WINDOW,
    ) -> None:
        self.results = results
        self.replaced = replaced
        self.reminded = reminded
        self.window = window

    def says(self, call_id: str, *needles: str) -> bool:
        """The call's result came back and holds every one of ``needles``."""
        if self.results is None:
            return True
        result = self.results.get(call_id)
        return result is not None and not result.is_error and all(n in result.content for n in needles)

    def never_says(self, call_id: str, needle: str) -> bool:
        """The call's result came back without ``needle``."""
        if self.results is None:
            return True
        result = self.results.get(call_id)
        return result is not None and not result.is_error and needle not in result.content

    def spilled(self, call_id: str) -> str | None:
        """Where Layer 1 put the call's result (relative to the session), or None."""
        if self.results is None:
            return f"tool-results/{call_id}.txt"
        result = self.results.get(call_id)
        return result.spilled if result is not None else None


Said = str | Callable[[Seen], str]  # a turn's text, or how it depends on what the tools did


@dataclass(frozen=True)
class DemoTurn:
    said: Said
    calls: tuple[dict[str, Any], ...]

    def text(self, seen: Seen) -> str:
        return self.said if isinstance(self.said, str) else self.said(seen)

    def as_script(self, seen: Seen) -> dict[str, Any]:
        return {
            "text": self.text(seen),
            "tool_calls": [dict(c, arguments=dict(c["arguments"])) for c in self.calls],
        }


# --- turns -------------------------------------------------------------------------------------


def _call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments, "id": call_id}


def _turn(said: Said, *calls: dict[str, Any]) -> DemoTurn:
    return DemoTurn(said, calls)


def _write_code_turns() -> list[DemoTurn]:
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


def _tests_failed(seen: Seen) -> str:
    if seen.says("demo_02_run_tests", "FAILED (failures=2, errors=1)", "ZeroDivisionError"):
        found = (
            "The tests **fail**: `mean([1, 2, 3, 4])` returns `3.333…` instead of `2.5`, and "
            "`mean([7.5])` raises `ZeroDivisionError`. That points to the divisor. I'll come back to it"
        )
    else:
        found = "The tests did not fail the way I expected (their output is above); I'll come back to them"
    return (
        f"{found} — first I need the sample data to check against, so I'll write a small "
        "generator for a processing log."
    )


def _log_written(seen: Seen) -> str:
    if seen.says("demo_04_generate_log", "wrote 3000 lines"):
        return "Let me look at the log before using it."
    return "The generator did not say it wrote 3,000 lines (its output is above). Let me look at the log:"


def _sample_data_turns() -> list[DemoTurn]:
    return [
        _turn(
            _tests_failed,
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
            _log_written,
            _call("demo_05_read_log", "read_file", path=SAMPLE_LOG),
        ),
    ]


def _first_read(seen: Seen) -> str:
    if seen.spilled("demo_05_read_log"):
        got = (
            "That result was over 50 KB, so the host **spilled** it to a file and left me a "
            "preview: rows of `INFO … row … value=… ok`, and a note that the read stopped at line 2000."
        )
    else:
        got = (
            "That result came back whole (the host's spill limit is above its size here), so all "
            "of it is in my context; the read stopped at line 2000."
        )
    return f"{got} I'll page through the rest with `offset`/`limit`, 500 lines at a time."


def _first_page_turn() -> DemoTurn:
    return _turn(
        _first_read,
        _call("demo_06_read_page_1", "read_file", path=SAMPLE_LOG, offset=LOG_PAGES[0], limit=PAGE_LINES),
    )


def _first_page(seen: Seen) -> str:
    if seen.never_says("demo_06_read_page_1", "WARNING"):
        return "Lines 2001–2500 are all regular `ok` rows."
    return "Lines 2001–2500 are above."


def _second_page(seen: Seen) -> str:
    if seen.says("demo_07_read_page_2", "WARNING row 2648"):
        found = "One `WARNING` on this page: row 2648, value out of range."
    else:
        found = "That was the last page."
    return (
        f"{found} Paging is expensive, so instead of re-reading the first 2,000 rows I'll **grep** "
        "the whole file for warnings — and look at `stats.py` again before editing it."
    )


def _paging_turns() -> list[DemoTurn]:
    # Two pages that stay in context (each under the 50,000-byte spill limit): they are
    # what carries the estimate over the Layer 2 line, and what the summary then replaces.
    second = LOG_PAGES[1]
    return [
        _first_page_turn(),
        _turn(
            lambda seen: f"{_first_page(seen)} Last page:",
            _call("demo_07_read_page_2", "read_file", path=SAMPLE_LOG, offset=second, limit=PAGE_LINES),
        ),
        _turn(
            _second_page,
            _call("demo_08_grep_warnings", "grep", pattern="WARNING", path=SAMPLE_LOG),
            _call("demo_08_read_stats", "read_file", path="stats.py"),
        ),
    ]


def _handing_off(seen: Seen) -> str:
    why = (
        "The host's note says this small window is nearly full, so instead of reading the last page here"
        if seen.reminded
        else "The host has not said this window is full (its reminder did not come), but to show a handoff"
    )
    return (
        f"{_first_page(seen)} {why} I'll **hand off** to a fresh window with `new_context`: what "
        "you asked for (with its source), what I only inferred, the failing tests, what is left "
        "to check, and the files to open."
    )


def _handed_off(seen: Seen) -> str:
    if seen.replaced:
        where = (
            "A fresh window: it starts from your request, my handoff and the related files, and "
            "the old one stays searchable."
        )
    else:
        where = "The host kept this window (no rollover happened)."
    return (
        f"{where} The workspace is the source of truth, so rather than paging through the rest of "
        "the log I'll **grep** the whole file for warnings — and re-read `stats.py` before editing it."
    )


def _handoff_turns() -> list[DemoTurn]:
    return [
        _first_page_turn(),
        _turn(
            _handing_off,
            _call("demo_07_new_context", "new_context", handoff=HANDOFF, related_files=HANDOFF_FILES),
        ),
        _turn(
            _handed_off,
            _call("demo_08_grep_warnings", "grep", pattern="WARNING", path=SAMPLE_LOG),
            _call("demo_08_read_stats", "read_file", path="stats.py"),
        ),
    ]


# What the end of the run says about the window, per strategy: only what really happened.
SHOW_LOG = "- `%sessions show <session id>` (the id is on the last line below) shows the whole session log"


def _compact_story(seen: Seen) -> str:
    if not seen.replaced:
        return _kept(seen, "the Layer 2 line") + f"\n{SHOW_LOG}, including the spill."
    return (
        f"- The demo window is small ({seen.window:,} tokens; the gauge marks the Layer 2 line): "
        "the log pages carried the estimate over that line, so the older turns were replaced by "
        "a summary. `%context` shows what I see now.\n"
        f"{SHOW_LOG}, including the spill and the replace marker."
    )


def _rollover_story(seen: Seen) -> str:
    if not seen.replaced:
        return (
            _kept(seen, "rollover's limits") + f"\n{SHOW_LOG}, including the spill and the handoff I offered."
        )
    reminded = "the host reminded me, and " if seen.reminded else ""
    return (
        f"- The demo window is small ({seen.window:,} tokens; the gauge marks the reminder and "
        f"rollover's limits): after the first log page {reminded}I handed off to a fresh window with "
        "`new_context` — no summary was written. The new window began with your request verbatim, "
        "my four-section handoff and the related files; `%context` shows what I see now.\n"
        f"{SHOW_LOG}, including the spill, the handoff and the rollover marker; "
        "`%sessions search WARNING` searches the old window too."
    )


def _api_story(seen: Seen) -> str:
    if not seen.replaced:
        return _kept(seen, "the provider's trigger") + f"\n{SHOW_LOG}, including the spill."
    return (
        f"- The demo window is small ({seen.window:,} tokens): the log pages carried the request "
        "over the trigger the provider was given, so the provider summarized everything before my "
        "answer into a compaction block (the demo emulates the server's compaction). The host "
        "logged it as a replace; `%context` shows what I see now, and `%compact --undo` would "
        "take it back.\n"
        f"{SHOW_LOG}, including the spill and the replace marker."
    )


def _kept(seen: Seen, line: str) -> str:
    return (
        f"- This window ({seen.window:,} tokens) never reached {line}, so nothing was replaced: "
        "the whole run is still in my context (`%context` shows it). The demo's own window "
        "(run it without `--context-window`) is small enough for the log pages to cross it."
    )


CONTEXT_STORY: dict[str, Callable[[Seen], str]] = {
    "compact": _compact_story,
    "rollover": _rollover_story,
    "api": _api_story,
}


def _fix(seen: Seen) -> str:
    found = []
    if seen.says("demo_08_grep_warnings", "0417", "1290", "2648"):
        found.append(
            "Three warning rows in total (0417, 1290, 2648); they carry no usable value, so the "
            "check must skip them."
        )
    if seen.says("demo_08_read_stats", STATS_BUG.strip()):
        found.append("And the bug is confirmed: `mean()` divides by `len(xs) - 1`.")
    return " ".join(
        [*found, "Fixing the divisor, and adding a script that compares `stats.mean` with "
         "`statistics.fmean` on the `ok` rows:"]
    )  # fmt: skip


def _done(strategy: str) -> Callable[[Seen], str]:
    def said(seen: Seen) -> str:
        passed = seen.says("demo_10_rerun_tests", "Ran 4 tests", "OK")
        agrees = seen.says("demo_10_check_sample", "2997 ok rows", "OK: stats.mean matches", "31.9188")
        if passed and agrees:
            head = (
                "Done — all 4 tests pass, and `stats.mean` agrees with `statistics.fmean` on the "
                "2,997 `ok` rows of the sample data (31.9188)."
            )
        else:
            head = (
                "Not done: " + ("the tests pass, but " if passed else "the tests did not pass, and ")
                + ("the sample check agrees" if agrees else "the sample check did not agree")
                + " (the outputs are above)."
            )  # fmt: skip
        where = seen.spilled("demo_05_read_log")
        spill = (
            f"- My first read of the log was over 50 KB, so it was spilled to "
            f"`.pseudoclaude/sessions/<session id>/{where}`; only a preview stayed in my context.\n"
            if where
            else "- My first read of the log stayed whole in my context (nothing was spilled).\n"
        )
        return (
            f"{head}\n\n"
            "**What changed**\n"
            "- `stats.py`: `mean()` — the divisor changed from `len(xs) - 1` to `len(xs)`.\n"
            "- `test_stats.py`: 4 `unittest` cases; run `python -m unittest -q test_stats`.\n"
            "- `make_sample_log.py` → `sample_run.log` (3,000 lines, ~144 KB, 3 `WARNING` "
            "rows); `check_sample.py` checks `mean` on it.\n\n"
            "**Context management you just saw**\n" + spill + CONTEXT_STORY[strategy](seen)
        )

    return said


def _fix_and_verify_turns(strategy: str) -> list[DemoTurn]:
    return [
        _turn(
            _fix,
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
        _turn(_done(strategy)),
    ]


STRATEGIES = tuple(CONTEXT_STORY)


def demo_turns(strategy: str = "compact") -> list[DemoTurn]:
    """The tour's turns for ``strategy``: their calls, and how each one's text depends on ``Seen``."""
    if strategy not in CONTEXT_STORY:
        raise ValueError(f"no demo script for strategy {strategy!r}; choose one of: {', '.join(STRATEGIES)}")
    # The middle by strategy (a table, not a comparison of names).
    middle = {"compact": _paging_turns, "rollover": _handoff_turns, "api": _paging_turns}[strategy]()
    return _write_code_turns() + _sample_data_turns() + middle + _fix_and_verify_turns(strategy)


def tour_text(turns: list[DemoTurn]) -> str:
    """What the tour does to the workspace, for the one question mode ``ask`` puts (issue 44)."""
    calls = [c for turn in turns for c in turn.calls]
    written = [c["arguments"]["path"] for c in calls if c["name"] == "write_file"]
    edits = sum(c["name"] == "edit_file" for c in calls)
    commands = [c["arguments"]["command"] for c in calls if c["name"] == "bash"]
    runs = [
        f"`{c}`" + (f" ({n} times)" if (n := commands.count(c)) > 1 else "") for c in dict.fromkeys(commands)
    ]
    return (
        f"The demo tour writes {len(written)} files ({', '.join(written)}), edits "
        f"{'one of them' if edits == 1 else f'{edits} times'} and runs {', '.join(runs)} in the workspace."
    )


def build_demo_script(strategy: str = "compact") -> dict[str, Any]:
    """Return the demo script for ``strategy`` in the scripted-provider format (SPEC §11).

    A fresh dict each call. Both strategies do the same task with the same files; only the
    middle differs (two log pages and a summary, or one page and a handoff).
    """
    turns = demo_turns(strategy)
    return {
        "model": DEMO_MODEL,
        "context_window": DEMO_CONTEXT_WINDOW,
        "turns": [turn.as_script(Seen()) for turn in turns],
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
