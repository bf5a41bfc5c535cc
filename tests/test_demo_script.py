"""The demo script: its shape, and a real run of its tool calls in a temp workspace.

The run uses a tiny interpreter defined here (not the package's tools), so these tests pin
the script itself: the first test run fails, the log read is big enough to be spilled, the
fix makes the tests pass, and a second run in the same directory behaves the same.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pseudoclaude_nb.providers.demo_script import (
    DEMO_CONTEXT_WINDOW,
    DEMO_PROMPT,
    DEMO_RECENT_TOKENS,
    build_demo_script,
)

# Pinned tool names and argument names (SPEC §12): name -> (required, optional).
PINNED_TOOLS: dict[str, tuple[set[str], set[str]]] = {
    "read_file": ({"path"}, {"offset", "limit"}),
    "write_file": ({"path", "content"}, set()),
    "edit_file": ({"path", "old_string", "new_string"}, {"replace_all"}),
    "list_files": (set(), {"pattern"}),
    "grep": ({"pattern"}, {"path", "glob"}),
    "bash": ({"command"}, {"timeout"}),
}

SPILL_BYTES = 50_000
LAYER2_MARGIN = 20_000 + 13_000  # summary reserve + safety margin (SPEC §8.2)
BASH_CAP_BYTES = 30_000
SUMMARY_TIERS = (
    "Confirmed requirements",
    "Agent inferences (unverified)",
    "Unresolved problems",
    "Files and changes",
    "Next steps",
)


# --- a tiny local interpreter for the pinned tools ----------------------------------------------


class ToolError(Exception):
    pass


def _read_file(ws: Path, path: str, offset: int = 1, limit: int = 2000) -> str:
    lines = (ws / path).read_text(encoding="utf-8").splitlines()
    chosen = lines[offset - 1 : offset - 1 + limit]
    shown = [f"{n:>6}\t{line}" for n, line in enumerate(chosen, start=offset)]
    remaining = len(lines) - (offset - 1 + limit)
    if remaining > 0:
        shown.append(f"… {remaining} more lines; use offset={offset + limit}")
    return "\n".join(shown)


def _write_file(ws: Path, path: str, content: str) -> str:
    target = ws / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8", newline="")
    return f"Wrote {len(content.encode())} bytes to {path}"


def _edit_file(ws: Path, path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
    target = ws / path
    text = target.read_text(encoding="utf-8")
    count = text.count(old_string)
    if count == 0:
        raise ToolError(f"old_string not found in {path}")
    if count > 1 and not replace_all:
        raise ToolError(f"old_string occurs {count} times in {path}")
    target.write_text(text.replace(old_string, new_string), encoding="utf-8", newline="")
    return f"Edited {path} ({count if replace_all else 1} replacement)"


def _list_files(ws: Path, pattern: str = "**/*") -> str:
    return "\n".join(sorted(str(p.relative_to(ws)) for p in ws.glob(pattern) if p.is_file()))


def _grep(ws: Path, pattern: str, path: str = ".", glob: str | None = None) -> str:
    regex = re.compile(pattern)
    root = ws / path
    files = [root] if root.is_file() else sorted(root.rglob(glob or "*"))
    hits = []
    for file in files:
        if not file.is_file():
            continue
        for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
            if regex.search(line):
                hits.append(f"{file.relative_to(ws)}:{n}:{line}")
    return "\n".join(hits) or "No matches."


def _bash(ws: Path, command: str, timeout: int = 120) -> str:
    # The script says `python`; here that must be the interpreter running the tests.
    command = re.sub(r"^python\b", shlex.quote(sys.executable), command)
    proc = subprocess.run(
        ["bash", "-c", command],
        cwd=ws,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    return f"{proc.stdout}\n[exit code {proc.returncode}]"


TOOLS = {
    "read_file": _read_file,
    "write_file": _write_file,
    "edit_file": _edit_file,
    "list_files": _list_files,
    "grep": _grep,
    "bash": _bash,
}


def play(script: dict[str, Any], ws: Path) -> dict[str, tuple[str, bool]]:
    """Run every tool call of every turn in order; return call id -> (result, is_error)."""
    results: dict[str, tuple[str, bool]] = {}
    for turn in script["turns"]:
        for call in turn["tool_calls"]:
            try:
                results[call["id"]] = (TOOLS[call["name"]](ws, **call["arguments"]), False)
            except (ToolError, OSError) as exc:
                results[call["id"]] = (f"Error: {exc}", True)
    return results


def _exit_code(result: str) -> int:
    match = re.search(r"\[exit code (-?\d+)\]$", result)
    assert match, result
    return int(match.group(1))


# --- structure ------------------------------------------------------------------------------------


@pytest.fixture
def script() -> dict[str, Any]:
    return build_demo_script()


def test_top_level_keys_follow_the_scripted_format(script):
    assert set(script) == {"model", "context_window", "turns", "summaries", "memory_ops", "summary_seconds"}
    assert script["model"] == "pseudoclaude-demo"
    assert script["context_window"] == DEMO_CONTEXT_WINDOW
    assert isinstance(script["context_window"], int)
    assert script["memory_ops"] == []
    assert json.loads(json.dumps(script)) == script


def test_the_scripted_provider_accepts_it(script):
    scripted = pytest.importorskip("pseudoclaude_nb.providers.scripted")
    parsed, _ = scripted.load_script(script)
    assert parsed.context_window == DEMO_CONTEXT_WINDOW
    assert len(parsed.turns) == len(script["turns"])


def test_each_call_builds_a_fresh_script(script):
    before = copy.deepcopy(script)
    script["turns"][0]["tool_calls"].clear()
    assert build_demo_script() == before


def test_turns_and_tool_calls_are_well_formed(script):
    turns = script["turns"]
    assert len(turns) >= 8
    ids = []
    for turn in turns:
        assert set(turn) == {"text", "tool_calls"}
        assert isinstance(turn["text"], str) and turn["text"].strip()
        for call in turn["tool_calls"]:
            assert set(call) == {"name", "arguments", "id"}
            assert call["name"] in PINNED_TOOLS
            required, optional = PINNED_TOOLS[call["name"]]
            assert required <= set(call["arguments"]) <= required | optional
            assert isinstance(call["id"], str) and re.fullmatch(r"demo_\d\d_[a-z0-9_]+", call["id"])
            ids.append(call["id"])
    assert len(ids) == len(set(ids))
    # Only the last turn may be without tool calls: such a turn ends the run.
    assert turns[-1]["tool_calls"] == []
    assert all(turn["tool_calls"] for turn in turns[:-1])
    assert any(len(turn["tool_calls"]) > 1 for turn in turns)  # parallel calls are shown


def test_edits_target_files_written_fresh_earlier_in_the_run(script):
    written: dict[str, str] = {}
    for turn in script["turns"]:
        for call in turn["tool_calls"]:
            args = call["arguments"]
            if call["name"] == "write_file":
                written[args["path"]] = args["content"]
            elif call["name"] == "edit_file":
                assert args["path"] in written, "edit_file needs a fresh write_file in the run"
                assert written[args["path"]].count(args["old_string"]) == 1


def test_summaries_use_the_evidence_tiers(script):
    assert len(script["summaries"]) == 2
    for summary in script["summaries"]:
        positions = [summary.index(f"## {tier}") for tier in SUMMARY_TIERS]
        assert positions == sorted(positions)
        assert "Source: user request" in summary


def test_prompt_and_final_text_point_at_the_mechanisms(script):
    assert "stats" in DEMO_PROMPT and "mean" in DEMO_PROMPT
    final = script["turns"][-1]["text"]
    assert "%sessions show" in final
    assert "spilled" in final and "demo_05_read_log" in final


# --- a real run -----------------------------------------------------------------------------------


def _check_run(script: dict[str, Any], ws: Path) -> dict[str, tuple[str, bool]]:
    results = play(script, ws)
    errors = {cid: text for cid, (text, is_error) in results.items() if is_error}
    assert not errors

    first_tests, _ = results["demo_02_run_tests"]
    assert _exit_code(first_tests) != 0
    assert "FAILED (failures=2, errors=1)" in first_tests

    generated, _ = results["demo_04_generate_log"]
    assert _exit_code(generated) == 0
    assert "wrote 3000 lines" in generated
    log = ws / "sample_run.log"
    assert 120_000 <= log.stat().st_size <= 150_000
    assert round(log.stat().st_size / 1000) == 144  # the texts say "~144 KB"

    read_log, _ = results["demo_05_read_log"]
    assert len(read_log.encode()) > SPILL_BYTES  # Layer 1 spills this one
    assert read_log.endswith("… 1000 more lines; use offset=2001")
    for call_id, first_line in (("demo_06_read_page_1", 2001), ("demo_07_read_page_2", 2501)):
        page, _ = results[call_id]
        assert page.startswith(f"{first_line:>6}\t")
        assert 20_000 < len(page.encode()) < SPILL_BYTES  # stays in context, in full
    assert "WARNING" not in results["demo_06_read_page_1"][0]  # "all regular ok rows"
    assert "WARNING row 2648" in results["demo_07_read_page_2"][0]

    warnings, _ = results["demo_08_grep_warnings"]
    assert [line.split(" WARNING row ")[1][:4] for line in warnings.splitlines()] == [
        "0417",
        "1290",
        "2648",
    ]

    final_tests, _ = results["demo_10_rerun_tests"]
    assert _exit_code(final_tests) == 0
    assert re.search(r"Ran 4 tests.*\n\s*OK", final_tests, re.S)

    check, _ = results["demo_10_check_sample"]
    assert _exit_code(check) == 0
    assert "2997 ok rows, 3 warning rows skipped" in check
    assert "OK: stats.mean matches" in check

    for call_id, (text, _) in results.items():
        if call_id != "demo_05_read_log":  # the only result Layer 1 spills
            assert len(text.encode()) < SPILL_BYTES, call_id
    bash_ids = [
        call["id"] for turn in script["turns"] for call in turn["tool_calls"] if call["name"] == "bash"
    ]
    for call_id in bash_ids:
        assert len(results[call_id][0].encode()) < BASH_CAP_BYTES
    return results


def test_running_the_script_does_the_task(script, tmp_path):
    _check_run(script, tmp_path)
    assert "return sum(xs) / len(xs)" in (tmp_path / "stats.py").read_text()


def test_running_twice_in_the_same_directory_still_works(script, tmp_path):
    first = _check_run(script, tmp_path)
    second = _check_run(build_demo_script(), tmp_path)
    assert first["demo_05_read_log"] == second["demo_05_read_log"]  # deterministic
    assert first["demo_10_check_sample"] == second["demo_10_check_sample"]


def _request_estimates(script: dict[str, Any], results: dict[str, tuple[str, bool]]) -> list[int]:
    """Estimated tokens of the messages each agent request carries (SPEC §7, bytes / 3.5).

    Layer 1 replaces a spilled result by a preview of ~2,000 bytes plus a header.
    """
    preview_bytes = 2_400
    total = len("user") + len(DEMO_PROMPT.encode())
    estimates = []
    for turn in script["turns"]:
        estimates.append(round(total / 3.5))
        total += len("assistant") + len(turn["text"].encode())
        for call in turn["tool_calls"]:
            total += len(call["name"]) + len(json.dumps(call["arguments"]).encode())
            body = len(results[call["id"]][0].encode())
            total += len("user") + (preview_bytes if body > SPILL_BYTES else body)
    return estimates


@pytest.mark.parametrize("overhead", [1_000, 2_500, 5_000])
def test_layer_2_fires_once_when_the_second_page_arrives(script, tmp_path, overhead):
    """With any plausible system prompt + tool schemas (``overhead`` tokens) on top of the
    messages, the estimate first reaches the Layer 2 line at the request after the second
    log page, and after one summary (tail = the page exchange) it stays below the line."""
    estimates = _request_estimates(script, play(script, tmp_path))
    threshold = script["context_window"] - LAYER2_MARGIN
    ids = [[c["id"] for c in turn["tool_calls"]] for turn in script["turns"]]
    after_page_2 = ids.index(["demo_07_read_page_2"]) + 1
    first_over = next(i for i, e in enumerate(estimates) if e + overhead >= threshold)
    assert first_over == after_page_2

    # The summary replaces everything before the page-2 exchange; the exchange itself is the
    # tail (larger than DEMO_RECENT_TOKENS, so nothing newer than it is summarized either).
    summary_tokens = round((len(script["summaries"][0].encode()) + 600) / 3.5)  # + framing
    old = estimates[after_page_2 - 1]
    tail = estimates[after_page_2] - old
    assert tail > DEMO_RECENT_TOKENS
    for later in estimates[after_page_2:]:
        assert later - old + summary_tokens + overhead < threshold
    assert old > 0.05 * (estimates[after_page_2] + overhead)  # frees well over 5%
