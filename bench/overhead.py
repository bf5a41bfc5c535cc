"""Harness overhead per step (SPEC §15): the same step at 10,000 messages costs what it costs at 100.

A step, as the runner drives it, without the model and the tools: ``before_step``
(Layer 1 batch check, the estimate, the gauge state, the strategy asked), the assistant
message appended and logged, the usage anchor and the strategy asked about the answer, each
result admitted (spill check) and appended, the batch noted.
The log is written with fsync off, so what is timed is the harness, not the disk.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from pseudoclaude_nb.context.host import ContextHost
from pseudoclaude_nb.context.settings import CompactSettings
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.history import HistoryIndex
from pseudoclaude_nb.messages import Message, Usage
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir

from .common import Row, Sizes, timed
from .workload import Workload

SYSTEM = "You are a coding agent in a notebook.\n" * 40


class _Harness:
    """A conversation of ``history`` with its writer and context manager, driven one step at a time."""

    def __init__(self, ws: Path, history: list[Message], *, index: bool) -> None:
        folder = new_session_dir(ws)
        self.conversation = conversation = Conversation()
        self.writer = SessionWriter(folder, model="bench-model", fsync=False)
        self.writer.attach(conversation)
        for m in history:
            conversation.append(m)
        self.index = HistoryIndex(ws) if index else None
        if self.index is not None:
            conversation.add_hooks(self.index.hooks(folder))
            self.index.catch_up(folder)
        self.context = context = ContextHost(
            conversation,
            CompactSettings(context_window=10**9),
            session_dir=folder,
            workspace=ws,
            writer=self.writer,
        )
        context.configure(context.shared.settings, system=SYSTEM, tools=[])
        context.on_usage(Usage(input_tokens=context.estimate(), output_tokens=100), len(conversation))

    def step(self, exchange: list[Message]) -> float:
        """One step's seconds: what the runner does around a model call and its tools."""
        context, conversation = self.context, self.conversation
        assistant, results = exchange[0], exchange[1:]
        calls = {c.id: c for c in assistant.tool_calls}

        def step() -> None:
            context.before_step(None)  # type: ignore[arg-type] - no compaction at this window
            conversation.append(assistant)
            context.on_usage(Usage(input_tokens=context.estimate(), output_tokens=120), len(conversation))
            context.after_answer(None)  # type: ignore[arg-type]
            for r in results:
                assert r.tool_result is not None
                context.admit(calls[r.tool_result.call_id], r.tool_result)
                conversation.append(r)
            context.after_tools(len(results))

        return timed(step)

    def close(self) -> None:
        self.writer.close()
        if self.index is not None:
            self.index.close()


def harness_overhead(root: Path, sizes: Sizes) -> list[Row]:
    work = Workload(31, big_every=0)
    big = list(work.messages(sizes.overhead_big))[: sizes.overhead_big]
    small = big[: sizes.overhead_small]
    steps = [work.exchange() for _ in range(sizes.overhead_steps)]
    rows = []
    for index in (False, True) if sizes.index_variants else (False,):
        ws = Path(tempfile.mkdtemp(dir=root, prefix="overhead-"))
        at_small, at_big = [], []
        for _ in range(max(1, sizes.repeat // 2)):
            # Step by step in turn, the first of each pair alternating: a change in the
            # machine's speed (this one's varies by 2x within minutes) hits both sizes alike.
            harnesses = _Harness(ws, small, index=index), _Harness(ws, big, index=index)
            times: tuple[list[float], list[float]] = ([], [])
            try:
                for i, exchange in enumerate(steps):
                    for k in (0, 1) if i % 2 == 0 else (1, 0):
                        times[k].append(harnesses[k].step(exchange))
            finally:
                for h in harnesses:
                    h.close()
            at_small.append(statistics.median(times[0]))
            at_big.append(statistics.median(times[1]))
        s, b = statistics.median(at_small), statistics.median(at_big)
        ratio = b / s
        rows.append(
            Row(
                key="overhead_indexed" if index else "overhead",
                what=(
                    "… the same with the history index updated on each append, for reference"
                    if index
                    else f"harness overhead per step (manage_context + append, fsync off) at "
                    f"{sizes.overhead_big:,} messages vs {sizes.overhead_small:,}"
                ),
                target="" if index else "≤ 1.5×",
                value=round(ratio, 3),
                unit="×",
                ok=None if index else ratio <= 1.5,
                detail={
                    f"us_per_step_at_{sizes.overhead_small}": round(s * 1e6, 1),
                    f"us_per_step_at_{sizes.overhead_big}": round(b * 1e6, 1),
                    "steps_timed": len(steps),
                    "messages_per_step": round(sum(len(x) for x in steps) / len(steps), 2),
                    f"min_max_us_at_{sizes.overhead_small}": [
                        round(min(at_small) * 1e6, 1),
                        round(max(at_small) * 1e6, 1),
                    ],
                    f"min_max_us_at_{sizes.overhead_big}": [
                        round(min(at_big) * 1e6, 1),
                        round(max(at_big) * 1e6, 1),
                    ],
                    "runs": len(at_small),
                    "method": "the two sizes' steps timed in turn, GC on (median step per run, median of the runs)",
                },
            )
        )
    return rows
