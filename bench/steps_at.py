"""The request at any step of a long session (issue 47): ``%context --at`` and ``%sessions fork --at``.

Two sessions of ``STEPS`` model responses (10,000 in full mode) written by the product's writer
with the bench's realistic content (``bench.logs.build_session``): one that compacted along
the way (a 40K window: a ``compact`` replace whenever the estimate crossed 83 % of it, ~400
of them) and one that never compacted (every message stays in the effective state: the last
step's request is the whole session, ~25,000 messages). Each is read in a fresh IPython
process with the extension loaded, as a notebook shows it (``in_notebook``: the HTML table and
its text), after ``%sessions resume`` and one untimed ``%context --at`` (the imports and the
agent built). Then, turns interleaved, ``%context --at N`` for the first, the middle and the
last step, ``REPEAT`` times each, and ``%sessions fork --at N`` for the same steps (each fork
a new session, removed after; the source resumed before each, untimed).

- ``context_at_compacted`` / ``context_at_uncompacted``: the slowest step's median (target
  ≤ 0.3 s) and the last step's median over the first's (target ≤ 1.5×);
- ``fork_at_compacted`` / ``fork_at_uncompacted``: the slowest step's median (target ≤ 0.5 s).

``python -m bench.steps_at [--steps N] [--against PATH]`` prints the rows; ``--against`` also
measures another checkout of the package on the same sessions (a before/after).
``python -m bench --only steps`` runs them as the ``steps`` section.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import Row, Sizes
from .logs import build_session

ROOT = Path(__file__).resolve().parent.parent
REPEAT = 5
AT_TARGET, RATIO_TARGET, FORK_TARGET = 0.3, 1.5, 0.5

_SCRIPT = r"""
import contextlib, io, json, os, shutil, sys, time
from IPython.core.interactiveshell import InteractiveShell
ws, sid, steps, repeat = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "pseudoclaude_nb")
ip.kernel = object()  # in_notebook: the HTML table and its text, as a notebook shows them
ip.run_line_magic("config", f"PseudoClaude.workspace = {ws!r}")
sessions = os.path.join(ws, ".pseudoclaude", "sessions")

def call(name, line):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        started = time.perf_counter()
        ip.run_line_magic(name, line)
        return time.perf_counter() - started, buf.getvalue()

call("sessions", f"resume {sid}")
first, _ = call("context", f"--at {steps[len(steps) // 2] + 1}")  # untimed: the imports, the agent (and the step figures when the log has none kept)
at = {str(n): [] for n in steps}
for _ in range(repeat):
    for n in steps:
        seconds, out = call("context", f"--at {n}")
        assert f"step {n} of" in out, out[-2000:]
        at[str(n)].append(seconds)
fork = {str(n): [] for n in steps}
for _ in range(max(1, repeat // 2 + 1)):
    for n in steps:
        call("sessions", f"resume {sid}")
        before = set(os.listdir(sessions))
        seconds, out = call("sessions", f"fork {sid} --at {n}")
        assert "forked session" in out, out[-2000:]
        fork[str(n)].append(seconds)
        for made in set(os.listdir(sessions)) - before:
            shutil.rmtree(os.path.join(sessions, made))
try:  # the messages of each step's request (this checkout's index; an older one has none)
    from pseudoclaude_nb.session.steps import scan

    index = scan(os.path.join(sessions, sid))
    sizes = {str(n): index.request_size(n) for n in steps}
except (ImportError, AttributeError):
    sizes = {}
print(json.dumps({"at": at, "fork": fork, "sizes": sizes, "first": first}))
"""


def _measure(ws: Path, sid: str, steps: list[int], repeat: int, package: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env["PSEUDOCLAUDE_HOME"] = str(ws / ".home")
    env["IPYTHONDIR"] = str(ws / ".ipython")
    env["PYTHONPATH"] = str(package)
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(ws), sid, json.dumps(steps), str(repeat)],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"steps_at failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def sessions(root: Path, steps: int) -> dict[str, tuple[Path, str, dict]]:
    """The two sessions: name -> (workspace, session id, what was built)."""
    out = {}
    for name, extra in (("compacted", {"window_tokens": 40_000, "tail": 10}), ("uncompacted", {})):
        ws = Path(tempfile.mkdtemp(dir=root, prefix=f"steps-{name}-"))
        built = build_session(ws, steps=steps, **extra)
        out[name] = (
            ws,
            built.path.parent.name,
            {
                "log_mb": round(built.bytes / 1e6, 1),
                "messages": built.physical_messages,
                "replaces": built.replaces,
            },
        )
    return out


def rows_for(name: str, found: dict, built: dict, steps: list[int], judged: bool) -> list[Row]:
    at = {int(n): statistics.median(v) for n, v in found["at"].items()}
    fork = {int(n): statistics.median(v) for n, v in found["fork"].items()}
    first, last = at[steps[0]], at[steps[-1]]
    slowest = max(at.values())
    ratio = last / first if first else float("inf")
    what = f"a {steps[-1]:,}-step session that {'compacted along the way (40K window)' if name == 'compacted' else 'never compacted'}"
    middle = at[steps[len(steps) // 2]]
    detail = {
        **built,
        "request_messages_by_step": found.get("sizes", {}),
        "last_over_middle": round(last / middle, 2) if middle else None,
        "median_s_by_step": {n: round(s, 4) for n, s in at.items()},
        "all_s_by_step": {n: [round(x, 4) for x in v] for n, v in found["at"].items()},
        "last_over_first": round(ratio, 2),
        "first_call_s": round(found["first"], 3) if "first" in found else None,
        "method": "a fresh IPython process, notebook display (HTML + text), after %sessions resume and one "
        "untimed call; steps interleaved, the median of each (the session's step index is kept between calls "
        "while its log is unchanged, as the scrubber keeps its own)",
    }
    return [
        Row(
            f"context_at_{name}",
            f"%context --at STEP on {what}: the slowest step; the last step over the first",
            f"≤ {AT_TARGET} s at any step; last ≤ {RATIO_TARGET}× first",
            round(slowest, 4),
            "s",
            (slowest <= AT_TARGET and ratio <= RATIO_TARGET) if judged else None,
            detail,
            note=f"last step {last:.3f} s = {ratio:.2f}× the first ({first:.3f} s), {last / middle if middle else 0:.2f}× the "
            f"middle; requests of {found.get('sizes', {}).get(str(steps[0]), '?')}, "
            f"{found.get('sizes', {}).get(str(steps[len(steps) // 2]), '?')} and "
            f"{found.get('sizes', {}).get(str(steps[-1]), '?')} messages",
        ),
        Row(
            f"fork_at_{name}",
            f"%sessions fork --at STEP on {what}: the slowest step",
            f"≤ {FORK_TARGET} s",
            round(max(fork.values()), 4),
            "s",
            max(fork.values()) <= FORK_TARGET if judged else None,
            {
                "median_s_by_step": {n: round(s, 4) for n, s in fork.items()},
                "all_s_by_step": {n: [round(x, 4) for x in v] for n, v in found["fork"].items()},
            },
        ),
    ]


def step_rows(root: Path, sizes: Sizes, *, package: Path = ROOT) -> list[Row]:
    count = 10_000 if sizes.name == "full" else 400
    repeat = REPEAT if sizes.name == "full" else 1
    built = sessions(root, count)
    rows: list[Row] = []
    try:
        for name, (ws, sid, facts) in built.items():
            steps = [1, count // 2, count]
            rows += rows_for(
                name, _measure(ws, sid, steps, repeat, package), facts, steps, sizes.name == "full"
            )
    finally:
        for ws, _, _ in built.values():
            shutil.rmtree(ws, ignore_errors=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.steps_at", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=REPEAT)
    parser.add_argument("--against", type=Path, help="another checkout to measure on the same sessions")
    args = parser.parse_args(argv)
    packages = {"this": ROOT, **({"against": args.against.resolve()} if args.against else {})}
    with tempfile.TemporaryDirectory(prefix="pseudoclaude-steps-") as tmp:
        built = sessions(Path(tmp), args.steps)
        steps = [1, args.steps // 2, args.steps]
        for label, package in packages.items():
            for name, (ws, sid, facts) in built.items():
                for row in rows_for(name, _measure(ws, sid, steps, args.repeat, package), facts, steps, True):
                    mark = {True: "met", False: "MISSED", None: ""}[row.ok]
                    print(
                        f"{label:<8} {row.key:<24} {row.value} {row.unit} ({row.target}) {mark}  {row.note}"
                    )
                    print(f"{'':<8} {json.dumps(row.detail)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
