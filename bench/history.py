"""History search (SPEC §15: ≤ 50 ms per query on 1 GB of history), measured and extrapolated.

Indexing trigrams costs far more than writing logs, so a run indexes growing amounts of
history (session logs built by the product's writer) and times the same queries at each
size; the target's 1 GB is then extrapolated from a straight-line fit through the sizes
measured, and said to be an extrapolation. Queries are the kind the model and users make:
identifiers, error names, phrases, a miss, one for the current session only, and 1- and
2-character ASCII and CJK terms (issue 18). Still measured up to the sizes below and
extrapolated, warm only: the issue asks for a real 1 GB history timed cold and warm, which
this row does not do yet.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from pseudoclaude_nb.session.history import HistoryIndex
from pseudoclaude_nb.session.paths import LOG_NAME, sessions_dir

from .common import Row, Sizes, dir_bytes
from .logs import build_log

QUERIES = (
    "TextWrapper",
    "parse_args",
    "AssertionError: 3 != 4",
    "def __init__",
    "ValueError",
    "import os",
    "compiling src",
    '"return self"',
    "unittest discover",
    "no_such_identifier_anywhere",
    # Short terms (issue 18): 1- and 2-character ASCII and CJK, found through the side table.
    "qz",
    "id",
    "x",
    "压缩",
    "猫",
    "上下文",
)
TARGET_MB = 1_000
SESSION_MB = 4


def _time_queries(index: HistoryIndex, one_session: str, rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {}
    for _ in range(rounds):
        for q in QUERIES:
            started = time.perf_counter()
            index.search(q, limit=5)
            times.setdefault(q, []).append(time.perf_counter() - started)
        started = time.perf_counter()
        index.search("ValueError", session_id=one_session, limit=5)
        times.setdefault("ValueError (one session)", []).append(time.perf_counter() - started)
    return {q: statistics.median(t) for q, t in times.items()}


def history_search(root: Path, sizes: Sizes) -> tuple[Row, list[dict]]:
    ws = Path(tempfile.mkdtemp(dir=root, prefix="history-"))
    index = HistoryIndex(ws)
    session_mb = SESSION_MB if sizes.name == "full" else 1
    log_bytes, seed, points = 0, 100, []
    index_seconds = 0.0
    for target_mb in sizes.history_mb:
        while log_bytes < target_mb * 1_000_000:
            built = build_log(ws, session_mb * 1_000_000, seed=seed, final_appends=40)
            log_bytes += built.bytes
            seed += 1
        started = time.perf_counter()
        index.search("warm up: catch up with every log", limit=1)
        index_seconds += time.perf_counter() - started
        sids = sorted(p.name for p in sessions_dir(ws).iterdir() if (p / LOG_NAME).is_file())
        per_query = _time_queries(
            index, sids[len(sids) // 2], rounds=max(1, sizes.history_queries // len(QUERIES))
        )
        db = sum(os.path.getsize(f) for f in ws.joinpath(".pseudoclaude").glob("history.sqlite*"))
        points.append(
            {
                "history_mb": round(log_bytes / 1e6, 1),
                "sessions": len(sids),
                "index_mb": round(db / 1e6, 1),
                "rows": index.count(),
                "median_ms": round(statistics.median(per_query.values()) * 1e3, 2),
                "max_ms": round(max(per_query.values()) * 1e3, 2),
                "slowest": max(per_query, key=per_query.get),  # type: ignore[arg-type]
                "per_query_ms": {q: round(t * 1e3, 2) for q, t in per_query.items()},
                "indexed_mb_per_s": round(log_bytes / 1e6 / index_seconds, 2) if index_seconds else None,
            }
        )
    index.close()
    slope, intercept = _fit([p["history_mb"] for p in points], [p["max_ms"] for p in points])
    at_target = intercept + slope * TARGET_MB
    largest = points[-1]
    measured_ok = largest["max_ms"] <= 50
    extrapolated = largest["history_mb"] < TARGET_MB * 0.9
    row = Row(
        key="history_search",
        what="history search, 1 GB of history (slowest query)",
        target="≤ 50 ms per query",
        value=round(at_target if extrapolated else largest["max_ms"], 1),
        unit="ms" + (" (extrapolated)" if extrapolated else ""),
        # Quick sizes are too small to extrapolate from: there the row only keeps the code working.
        ok=(measured_ok and at_target <= 50) if sizes.name == "full" else None,
        detail={
            "measured": [{k: v for k, v in p.items() if k != "per_query_ms"} for p in points],
            "fit_ms_per_100mb": round(slope * 100, 2),
            "workspace_mb": round(dir_bytes(ws) / 1e6, 1),
        },
        note=(
            f"measured up to {largest['history_mb']:,.0f} MB of logs ({largest['index_mb']:,.0f} MB index); "
            f"1 GB by a straight-line fit of the slowest query over the sizes measured"
            if extrapolated
            else ""
        ),
    )
    return row, points


def _fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares line through the points (slope clamped at 0: search must not get faster)."""
    if len(xs) < 2:
        return 0.0, ys[0] if ys else 0.0
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    slope = max(0.0, sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var) if var else 0.0
    return slope, my - slope * mx
