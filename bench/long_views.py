"""Views of a long session in a real kernel (issue 48): ``%sessions show`` and ``%context``.

The session: 10,000 messages (~20 MB; 18.8 MiB) of the bench's realistic content written by
the product's writer, never compacted (``bench.logs.build_session``): its effective state is
all of it, ~5,600,000 tokens against a 200,000 window, as a session resumed from before
compaction existed, or imported, can be. The reference within the window: a 10,000-step
session that compacted along the way (a 40K window), whose state is a few dozen messages.

Each figure is taken in a real ipykernel (``bench.kernel_wire``: every iopub message counted,
the outputs a saved notebook keeps), the package imported from this checkout (or ``--against``):

- ``show_kernel``: ``%sessions show ID`` as the first magic of a fresh kernel after
  ``%load_ext`` (what a person running it pays): the time from the execute request to the
  kernel's idle (target ≤ 0.5 s), the iopub bytes (≤ 100 KB), the bytes its outputs add to a
  saved notebook — every display bundle plus the widget state a front end saving it would keep
  (≤ 100 KB) — and the kernel's RSS growth over the call, its peak (``VmHWM``, reset before the
  call) minus its RSS before (≤ 2× the log's size); the median of ``KERNELS`` fresh kernels.
- ``context_vs_json_within`` / ``context_vs_json_past``: ``%context`` over ``%context --json``
  of the same state in one kernel after ``%sessions resume`` and one untimed call of each,
  the calls alternating; each time is the kernel's own (the magic call, inside the cell), the
  median of ``REPEAT`` (target ≤ 2×).

``python -m bench.long_views [--against PATH]`` prints the rows; ``python -m bench --only
views`` runs them as the ``views`` section.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from .common import Row, Sizes
from .kernel_wire import HERE, Wire, saved_bytes
from .logs import build_session

KERNELS = 3
REPEAT = 7
SHOW_SECONDS, SHOW_BYTES, RSS_TIMES, CONTEXT_RATIO = 0.5, 100_000, 2.0, 2.0
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

# VmRSS now, and the process's peak (VmHWM: its own, since exec; ``ru_maxrss`` also holds the
# RSS of the process that started the kernel, which was the bench's); the peak is reset first
# where Linux allows it (clear_refs), so it is the call's.
_RSS = (
    "import resource as _r\n"
    "def _rss(key='VmRSS'):\n"
    "    with open('/proc/self/status') as f:\n"
    "        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key))\n"
    "try:\n"
    "    with open('/proc/self/clear_refs', 'w') as _f:\n"
    "        _f.write('5')\n"
    "except OSError:\n"
    "    pass\n"
)
_TIMED = (
    "import time as _t\n"
    "_s = _t.perf_counter()\n"
    "get_ipython().run_line_magic({name!r}, {line!r})\n"
    "_took = _t.perf_counter() - _s"
)


def show_row(ws: Path, sid: str, log_bytes: int, *, kernels: int, package: Path) -> Row:
    figures = []
    for _ in range(kernels):
        with Wire(ws, env=_env(ws), package=package) as wire:
            wire.run("%load_ext pseudoclaude_nb")
            wire.run(
                _RSS + "_before = _rss(); _peak_before = _rss('VmHWM')\n"
                "_u = _r.getrusage(_r.RUSAGE_SELF); _cpu0 = _u.ru_utime + _u.ru_stime"
            )
            cell = wire.run(f"%sessions show {sid}")
            grown = json.loads(
                wire.run(
                    "import json; _u = _r.getrusage(_r.RUSAGE_SELF)\n"
                    "print(json.dumps([_rss('VmHWM') - _before, _peak_before - _before,"
                    " _u.ru_utime + _u.ru_stime - _cpu0]))"
                ).outputs[-1]["text"]
            )
        figures.append(
            {
                "seconds": cell.seconds,
                "iopub_bytes": cell.bytes,
                "outputs_bytes": saved_bytes(cell.outputs),
                "widget_state_bytes": cell.widget_state_bytes,
                "rss_growth": grown[0],
                "peak_before_minus_rss": grown[1],
                "cpu_s": grown[
                    2
                ],  # the kernel's CPU from before the cell to after it (incl. the next cell's start)
                "messages": len(cell.sizes),
            }
        )
    med = {k: statistics.median(f[k] for f in figures) for k in figures[0]}
    saved = med["outputs_bytes"] + med["widget_state_bytes"]
    ok = (
        med["seconds"] <= SHOW_SECONDS
        and med["iopub_bytes"] <= SHOW_BYTES
        and saved <= SHOW_BYTES
        and med["rss_growth"] <= RSS_TIMES * log_bytes
    )
    return Row(
        "show_kernel",
        f"%sessions show of a 10,000-message {log_bytes / 1e6:.1f} MB session in a fresh real kernel",
        "≤ 0.5 s; ≤ 100 KB iopub; ≤ 100 KB saved; RSS growth ≤ 2× the log",
        round(med["seconds"], 3),
        "s",
        ok,
        {
            "iopub_bytes": int(med["iopub_bytes"]),
            "saved_bytes": int(saved),
            "outputs_bytes": int(med["outputs_bytes"]),
            "widget_state_bytes": int(med["widget_state_bytes"]),
            "kernel_cpu_s": round(med["cpu_s"], 3),
            "rss_growth_mb": round(med["rss_growth"] / 1e6, 1),
            "rss_growth_over_log": round(med["rss_growth"] / log_bytes, 2),
            "log_bytes": log_bytes,
            "runs": figures,
            "method": "the first magic after %load_ext in a fresh kernel; execute request to idle; iopub "
            "messages as serialized; saved = the outputs nbformat writes plus the last state of the widget "
            "models left open; RSS growth = the peak RSS (VmHWM, reset before the call) minus VmRSS before it; medians",
        },
        note=(
            f"kernel CPU {med['cpu_s']:.3f} s · {int(med['iopub_bytes']):,} B iopub · {int(saved):,} B saved · "
            f"RSS +{med['rss_growth'] / 1e6:.0f} MB "
            f"({med['rss_growth'] / log_bytes:.2f}× the log)"
        ),
    )


def context_row(key: str, what: str, ws: Path, sid: str, *, repeat: int, package: Path) -> Row:
    with Wire(ws, env=_env(ws), package=package) as wire:
        wire.run("%load_ext pseudoclaude_nb")
        wire.run(f"%sessions resume {sid}")

        def timed(line: str) -> float:
            wire.run(_TIMED.format(name="context", line=line))
            return float(wire.run("print(_took)").outputs[-1]["text"])

        timed("--json"), timed("")  # untimed: the agent built, the imports
        text, js = [], []
        for n in range(repeat):
            for line in ("", "--json") if n % 2 == 0 else ("--json", ""):
                (text if line == "" else js).append(timed(line))
    ratio = statistics.median(text) / statistics.median(js)
    return Row(
        key,
        f"%context over %context --json of the same state, {what}, in a real kernel",
        f"≤ {CONTEXT_RATIO}×",
        round(ratio, 2),
        "×",
        ratio <= CONTEXT_RATIO,
        {
            "context_s": [round(x, 4) for x in text],
            "json_s": [round(x, 4) for x in js],
            "context_median_s": round(statistics.median(text), 4),
            "json_median_s": round(statistics.median(js), 4),
        },
        note=f"{statistics.median(text):.3f} s against {statistics.median(js):.3f} s",
    )


def _env(ws: Path) -> dict[str, str]:
    return {"PSEUDOCLAUDE_HOME": str(ws / ".home"), "IPYTHONDIR": str(ws / ".ipython")}


def view_rows(root: Path, sizes: Sizes, *, package: Path = HERE.parent) -> list[Row]:
    full = sizes.name == "full"
    messages, steps = (10_000, 10_000) if full else (1_000, 400)
    past = Path(tempfile.mkdtemp(dir=root, prefix="views-past-"))
    within = Path(tempfile.mkdtemp(dir=root, prefix="views-within-"))
    try:
        big = build_session(past, messages=messages)
        small = build_session(within, steps=steps, window_tokens=40_000, tail=10)
        rows = [
            show_row(past, big.path.parent.name, big.bytes, kernels=KERNELS if full else 1, package=package),
            context_row(
                "context_vs_json_within",
                f"a {steps:,}-step session within its window",
                within,
                small.path.parent.name,
                repeat=REPEAT if full else 2,
                package=package,
            ),
            context_row(
                "context_vs_json_past",
                f"a {messages:,}-message session far past its window",
                past,
                big.path.parent.name,
                repeat=REPEAT if full else 2,
                package=package,
            ),
        ]
    finally:
        shutil.rmtree(past, ignore_errors=True)
        shutil.rmtree(within, ignore_errors=True)
    if not full:
        for row in rows:
            row.ok, row.note = None, "quick mode: small sessions, no verdict"
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.long_views", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--against", type=Path, help="another checkout of the package, measured after this one"
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    from .common import FULL, QUICK

    packages = {"this": HERE.parent, **({"against": args.against.resolve()} if args.against else {})}
    for label, package in packages.items():
        with tempfile.TemporaryDirectory(prefix="pseudoclaude-views-") as tmp:
            for row in view_rows(Path(tmp), QUICK if args.quick else FULL, package=package):
                mark = {True: "met", False: "MISSED", None: ""}[row.ok]
                print(f"{label:<8} {row.key:<24} {row.value} {row.unit} ({row.target}) {mark}  {row.note}")
                print(f"{'':<8} {json.dumps(row.detail)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
