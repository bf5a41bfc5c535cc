"""The session magics as a user calls them, each in a fresh process (SPEC §15 third wave, issue 34).

One workspace: a log of ``sizes.timeline_mb`` (200 MB in full mode) written by the product's
writer, and ``sizes.sessions`` + 10 small sessions beside it. Each figure is the time of the
magic call alone in a new Python process (IPython shell, ``%load_ext pseudoclaude_nb``,
then the one magic, its output to a buffer), the median of ``RUNS`` processes:

- ``%sessions show BIG`` in a "kernel" (``in_notebook`` true: the timeline widget is built
  and displayed, as a notebook user sees it) — target ≤ 0.5 s;
- the first ``%sessions list`` — target ≤ 0.2 s for 1,000 sessions; and again with a history
  index that holds none of the logs (a workspace whose logs are not indexed yet);
- ``%sessions resume --last`` — target ≤ 0.1 s.

Each row's detail also keeps the median CPU time of the call (``cpu_median_s``): on a host
other work loads, the wall time grows with the load and the CPU time much less.
None of these builds the agent (``magics/session_host.py``): only the import of what each
action reads with is in the figure, besides the reading itself.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .catalog import _make_sessions
from .common import Row, Sizes
from .logs import build_log

RUNS = 3
_SCRIPT = r"""
import contextlib, io, json, os, sys, time
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "pseudoclaude_nb")
if sys.argv[2] == "kernel":
    ip.kernel = object()  # what in_notebook looks for: the widget is built and displayed
buf = io.StringIO()
started, cpu = time.perf_counter(), time.process_time()
with contextlib.redirect_stdout(buf):
    ip.run_line_magic("sessions", sys.argv[1])
print(json.dumps([time.perf_counter() - started, time.process_time() - cpu]))
"""


def _fresh(ws: Path, line: str, kernel: bool = False, runs: int = RUNS) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of the magic call in each of ``runs`` fresh processes. The CPU time
    (the process's, all threads) is kept beside the wall time: on a loaded host it says what
    the call itself costs."""
    env = dict(os.environ)
    env.setdefault("PSEUDOCLAUDE_HOME", str(ws / ".home"))
    env["IPYTHONDIR"] = str(ws / ".ipython")
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(Path(__file__).parent.parent), env.get("PYTHONPATH")])
    )
    out = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT, line, "kernel" if kernel else "terminal"],
            cwd=ws,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        wall, cpu = json.loads(done.stdout.strip().splitlines()[-1])
        out.append((wall, cpu))
    return out


def _row(key: str, what: str, target: float, runs: list[tuple[float, float]], judged: bool, **detail) -> Row:
    times = [wall for wall, _ in runs]
    median = statistics.median(times)
    return Row(
        key=key,
        what=what,
        target=f"≤ {target} s",
        value=round(median, 4),
        unit="s",
        ok=median <= target if judged else None,
        detail={
            "median_s": round(median, 4),
            "min_s": round(min(times), 4),
            "max_s": round(max(times), 4),
            "runs": len(times),
            "cpu_median_s": round(statistics.median(cpu for _, cpu in runs), 4),
            "method": "the magic call alone, each in a fresh process (IPython shell, %load_ext), output to a buffer",
            **detail,
        },
    )


def magic_paths(root: Path, sizes: Sizes) -> list[Row]:
    ws = Path(tempfile.mkdtemp(dir=root, prefix="magics-"))
    big = build_log(ws, sizes.timeline_mb * 1_000_000, seed=11)
    sid = big.path.parent.name
    _make_sessions(ws, sizes.sessions + 9)
    count = sizes.sessions + 10
    full = sizes.name == "full"
    runs = RUNS if full else 1  # quick: keep the code working, one process each
    show = _fresh(ws, f"show {sid}", kernel=True, runs=runs)
    listed = _fresh(ws, "list", runs=runs)
    resumed = _fresh(ws, "resume --last", runs=runs)
    # The same listing where the history index holds none of the logs (not indexed yet).
    from pseudoclaude_nb.history import HistoryIndex

    index = HistoryIndex(ws)
    try:
        index.count()  # the file made, empty
    finally:
        index.close()
    unindexed = _fresh(ws, "list", runs=runs)
    shutil.rmtree(ws, ignore_errors=True)
    where = f"{count:,} sessions"
    return [
        _row(
            "show_magic",
            f"%sessions show of a {big.bytes / 1e6:,.0f} MB log in a kernel (timeline widget), fresh process",
            0.5,
            show,
            full,
            log_mb=round(big.bytes / 1e6, 1),
        ),
        _row("list_magic_fresh", f"first %sessions list with {where}, fresh process", 0.2, listed, full),
        _row(
            "list_magic_unindexed",
            f"… with a history index that holds none of the logs ({where})",
            0.2,
            unindexed,
            full,
        ),
        _row("resume_last_magic", f"%sessions resume --last with {where}, fresh process", 0.1, resumed, full),
    ]
