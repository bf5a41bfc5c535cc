"""What loading the extension costs a kernel (issue 30 item 10, "Start fast"), in fresh processes.

The issue's target: ``%load_ext pseudoclaude_nb`` costs at most twice ``import IPython`` in
a fresh process. Both sides are the cost of the step itself, timed inside the process:

- ``import IPython`` alone, in its own fresh process (the reference);
- ``%load_ext pseudoclaude_nb`` in another fresh process, after ``import IPython`` and the
  shell (``InteractiveShell.instance()``, what a kernel has before any extension loads).

``startup_load_ext`` is the median of the second over the median of the first (target
≤ 2.0×). Beside it: the modules each step adds, the package's own among them, and the
whole-process wall times (interpreter start, ``import IPython``, the shell and
``%load_ext`` against interpreter start and ``import IPython``) — a looser ratio, since the
shell costs more than the import. ``startup_first_agent`` (no target) is where the work
went: the first magic call, ``%agent why did my last cell fail?`` with no key (the offline
explainer) right after a failing cell, imports the agent and everything a run needs.

The turns alternate (reference, extension, reference, …) so a busy moment hits both sides.
``python -m bench.startup [--against PATH]`` prints the rows; ``--against`` measures another
checkout of the package (``/work/main``, say) in the same turns, for a before/after.
``python -m bench --only startup`` runs them as the ``startup`` section.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import Row, Sizes

TARGET = 2.0
ROOT = Path(__file__).resolve().parent.parent

_IMPORT = r"""
import json, sys, time
started = time.perf_counter()
import IPython
print(json.dumps({"import_s": time.perf_counter() - started, "modules": len(sys.modules)}))
"""

_LOAD = r"""
import json, sys, time
started = time.perf_counter()
import IPython
shell = IPython.core.interactiveshell.InteractiveShell.instance()
ready = time.perf_counter()
before = set(sys.modules)
shell.run_line_magic("load_ext", "pseudoclaude_nb")
loaded = time.perf_counter()
added = sorted(set(sys.modules) - before)
found = {
    "import_and_shell_s": ready - started,
    "load_ext_s": loaded - ready,
    "added": len(added),
    "own": sum(m.split(".")[0] == "pseudoclaude_nb" for m in added),
}
if sys.argv[1] == "agent":
    import contextlib, io
    shell.run_cell("count = 0\n1 / count")
    before = set(sys.modules)
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        shell.run_cell("%agent why did my last cell fail?")
    found["first_agent_s"] = time.perf_counter() - started
    found["first_agent_added"] = len(set(sys.modules) - before)
print(json.dumps(found))
"""


def _env(scratch: Path, package_root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env["PYTHONPATH"] = str(package_root)
    env["PSEUDOCLAUDE_HOME"] = str(scratch / "home")
    env["IPYTHONDIR"] = str(scratch / "ipython")
    env.pop("JPY_SESSION_NAME", None)
    return env


def _fresh(script: str, scratch: Path, package_root: Path, *args: str) -> dict:
    """One fresh process: its own figures and its wall time from outside (interpreter start included)."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=scratch,
        env=_env(scratch, package_root),
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    found["process_s"] = time.perf_counter() - started
    return found


def measure(scratch: Path, roots: dict[str, Path], runs: int) -> dict[str, dict]:
    """``runs`` turns of: ``import IPython`` alone, then ``%load_ext`` of each checkout in ``roots``."""
    ws = scratch / "startup-ws"
    ws.mkdir(parents=True, exist_ok=True)
    reference: list[dict] = []
    loads: dict[str, list[dict]] = {name: [] for name in roots}
    agents: dict[str, list[dict]] = {name: [] for name in roots}
    # Untimed first turn: bytecode compiled, IPython's profile made, files in the page cache.
    _fresh(_IMPORT, ws, ROOT)
    for root in roots.values():
        _fresh(_LOAD, ws, root, "agent")
    for turn in range(runs):
        reference.append(_fresh(_IMPORT, ws, ROOT))
        for name, root in roots.items():
            loads[name].append(_fresh(_LOAD, ws, root, "load"))
        if turn < max(1, runs // 3):  # the first run is informational: a few turns are enough
            for name, root in roots.items():
                agents[name].append(_fresh(_LOAD, ws, root, "agent"))
    out = {}
    ipython_s = statistics.median(r["import_s"] for r in reference)
    ipython_process_s = statistics.median(r["process_s"] for r in reference)
    for name in roots:
        load_s = statistics.median(r["load_ext_s"] for r in loads[name])
        process_s = statistics.median(r["process_s"] for r in loads[name])
        out[name] = {
            "ratio": load_s / ipython_s,
            "load_ext_ms": round(load_s * 1e3, 1),
            "import_ipython_ms": round(ipython_s * 1e3, 1),
            "import_and_shell_ms": round(
                statistics.median(r["import_and_shell_s"] for r in loads[name]) * 1e3, 1
            ),
            "load_ext_ms_all": [round(r["load_ext_s"] * 1e3, 1) for r in loads[name]],
            "import_ipython_ms_all": [round(r["import_s"] * 1e3, 1) for r in reference],
            "modules_import_ipython": reference[0]["modules"],
            "modules_added_by_load_ext": loads[name][0]["added"],
            "own_modules_added": loads[name][0]["own"],
            "process_ms_import_ipython": round(ipython_process_s * 1e3, 1),
            "process_ms_with_load_ext": round(process_s * 1e3, 1),
            "process_ratio": round(process_s / ipython_process_s, 2),
            "first_agent_ms": round(statistics.median(r["first_agent_s"] for r in agents[name]) * 1e3, 1),
            "first_agent_modules_added": agents[name][0]["first_agent_added"],
            "runs": runs,
            "first_agent_runs": len(agents[name]),
        }
    return out


def startup_rows(scratch: Path, sizes: Sizes) -> list[Row]:
    runs = 9 if sizes.name == "full" else 3
    found = measure(scratch, {"this": ROOT}, runs)["this"]
    return rows_for(found)


def rows_for(found: dict) -> list[Row]:
    ratio = found["ratio"]
    load = Row(
        "startup_load_ext",
        "`%load_ext pseudoclaude_nb` in a fresh process vs `import IPython` (each step alone, medians)",
        f"≤ {TARGET}×",
        round(ratio, 2),
        "×",
        ratio <= TARGET,
        {
            **{k: v for k, v in found.items() if not k.startswith("first_agent")},
            "method": (
                "median over fresh processes, turns alternating: the time of `%load_ext` after `import IPython` "
                "and `InteractiveShell.instance()`, over the time of `import IPython` in its own process"
            ),
        },
        note=(
            f"{found['load_ext_ms']} ms against {found['import_ipython_ms']} ms; "
            f"+{found['modules_added_by_load_ext']} modules ({found['own_modules_added']} of the package)"
        ),
    )
    first = Row(
        "startup_first_agent",
        "the first `%agent` after `%load_ext` (offline explainer, no key): imports the agent's world",
        "",
        round(found["first_agent_ms"] / 1e3, 3),
        "s",
        None,
        {
            "first_agent_ms": found["first_agent_ms"],
            "modules_added": found["first_agent_modules_added"],
            "runs": found["first_agent_runs"],
        },
    )
    return [load, first]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="fresh processes per side (default 9)")
    parser.add_argument("--against", type=Path, help="another checkout to measure in the same turns")
    args = parser.parse_args(argv)
    roots = {"this": ROOT}
    if args.against:
        roots["against"] = args.against.resolve()
    with tempfile.TemporaryDirectory(prefix="pseudoclaude-startup-") as tmp:
        found = measure(Path(tmp), roots, args.runs)
    for name, figures in found.items():
        print(f"{name} ({roots[name]}):")
        print(
            f"  %load_ext {figures['load_ext_ms']} ms / import IPython {figures['import_ipython_ms']} ms "
            f"= {figures['ratio']:.2f}× (target ≤ {TARGET}×); +{figures['modules_added_by_load_ext']} modules "
            f"({figures['own_modules_added']} own; import IPython loads {figures['modules_import_ipython']})"
        )
        print(
            f"  whole process: {figures['process_ms_with_load_ext']} ms with the shell and %load_ext, "
            f"{figures['process_ms_import_ipython']} ms for import IPython ({figures['process_ratio']}×)"
        )
        print(
            f"  first %agent (offline): {figures['first_agent_ms']} ms, "
            f"+{figures['first_agent_modules_added']} modules"
        )
        print(f"  {json.dumps(figures)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
