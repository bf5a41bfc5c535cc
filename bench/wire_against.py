"""The ``wire`` rows before/after: this checkout's package against another's, in turns, in one run.

``python -m bench.wire_against --provider anthropic --against /work/main --rounds 3`` runs
``provider_steps.per_step_through`` (the same bench code, this checkout's) in a fresh process
per round and package, alternating the two, so both see the same load on a shared machine;
each round prints its rows and the end a summary (the median over the rounds, and the spread).
The other checkout's ``pseudoclaude_nb`` is imported through a link in a temporary folder and
without writing bytecode: nothing is written into it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_SCRIPT = r"""
import json, shutil, sys, tempfile
from pathlib import Path
sys.path[:0] = [sys.argv[1], sys.argv[2]]  # the package measured, then this checkout's bench
import pseudoclaude_nb
from bench import provider_steps
from bench.common import FULL, QUICK
assert Path(pseudoclaude_nb.__file__).resolve().parent == Path(sys.argv[3]).resolve(), pseudoclaude_nb.__file__
sizes = QUICK if sys.argv[5] == "quick" else FULL
root = Path(tempfile.mkdtemp(prefix="pseudoclaude-wire-against-"))
try:
    rows = provider_steps.per_step_through(root, sizes, provider_steps.PROVIDERS[sys.argv[4]])
finally:
    shutil.rmtree(root, ignore_errors=True)
print(json.dumps([r.to_dict() for r in rows]))
"""

# The figures the summary gives per row (when the row has them): its value, then these details.
FIGURES = (
    "ms_per_step_at_",
    "cpu_ms_per_step_at_",
    "floor_ms_per_step",
    "wire_ms_at_",
    "cpu_ratio",
    "cpu_over_floor",
    "cpu_floor_ms",
)


def measure(package: Path, provider: str, mode: str) -> list[dict]:
    """One round: the rows of ``provider`` with ``package``'s ``pseudoclaude_nb``, in a fresh process."""
    with tempfile.TemporaryDirectory(prefix="pseudoclaude-wire-pkg-") as linked:
        os.symlink(package / "pseudoclaude_nb", Path(linked) / "pseudoclaude_nb")
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                _SCRIPT,
                linked,
                str(ROOT),
                str(package / "pseudoclaude_nb"),
                provider,
                mode,
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=linked,
            check=False,
        )
    if done.returncode:
        raise RuntimeError(f"the wire rows failed with {package}:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def figures(row: dict) -> dict[str, float]:
    detail = row.get("detail", {})
    named = {k: v for k, v in detail.items() if k.startswith(FIGURES) and isinstance(v, int | float)}
    return {"value": row["value"], **named}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.wire_against", description=__doc__.splitlines()[0])
    parser.add_argument("--provider", default="anthropic", help="anthropic, openai or responses")
    parser.add_argument(
        "--against", type=Path, help="another checkout (its pseudoclaude_nb) measured in turns"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1,000 messages instead of 10,000")
    args = parser.parse_args(argv)
    packages = {"this": ROOT, **({"against": args.against.resolve()} if args.against else {})}
    mode = "quick" if args.quick else "full"
    found: dict[str, list[list[dict]]] = {label: [] for label in packages}
    for round_ in range(args.rounds):
        for label, package in packages.items():
            rows = measure(package, args.provider, mode)
            found[label].append(rows)
            for row in rows:
                print(
                    f"round {round_ + 1} {label:<8} {row['key']:<30} {json.dumps(figures(row))}", flush=True
                )
    print("median over the rounds [min, max]:")
    for label, rounds in found.items():
        for i, row in enumerate(rounds[0]):
            for name in figures(row):
                values = [figures(r[i])[name] for r in rounds if i < len(r) and name in figures(r[i])]
                print(
                    f"  {label:<8} {row['key']:<30} {name:<24} {statistics.median(values):8.3f} "
                    f"[{min(values):.3f}, {max(values):.3f}]"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
