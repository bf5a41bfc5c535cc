"""The context-cost curve: one long scripted task under four context strategies.

The task (≥ 200 model steps over four ``%agent`` runs) is played by the scripted provider
through ``Agent``, with every tool call run for real in a workspace of standard-library
sources: pages of files, grep hits, test runs, compile checks, whole large files (spilled
by Layer 1), a few batches of five reads at once (the batch cap). The same script runs
with no management (huge window, spill off), Layer 1 only, Layer 1 + Layer 2, and
rollover. The scripted model heeds the rollover reminder: asked to hand over, it calls
``new_context`` with a handoff before going on with its script.

Every request the provider received is then priced from its token count (cl100k when
installed, else bytes/3.5): total input, peak context, and the cost with prompt caching,
modelled as the longest unchanged prefix (system, tools, messages) between consecutive
agent requests — that prefix is read at 0.1×, the rest written at 1.25×. Summary
requests are priced too (written in full: they share no prefix with the agent's).
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.messages import Message
from pseudoclaude_nb.providers.base import Request
from pseudoclaude_nb.providers.scripted import ScriptedProvider
from pseudoclaude_nb.workspace import LOG_NAME

from .common import Row, Sizes
from .workload import english_prose, stdlib_sources

CACHE_WRITE, CACHE_READ = 1.25, 0.1
HUGE_WINDOW = 10_000_000
STEPS_PER_RUN = 55


@dataclass(frozen=True)
class Strategy:
    name: str
    label: str
    settings: dict[str, Any]


def strategies(window: int) -> list[Strategy]:
    off = {"spill_bytes": 10**12, "spill_batch_bytes": 10**12}
    return [
        Strategy("none", "no management (huge window, spill off)", {"context_window": HUGE_WINDOW, **off}),
        Strategy("layer1", "Layer 1 only (spill; huge window)", {"context_window": HUGE_WINDOW}),
        Strategy("layer2", f"Layer 1 + Layer 2 ({window // 1000}K window)", {"context_window": window}),
        Strategy(
            "rollover",
            f"Layer 1 + rollover ({window // 1000}K window)",
            {"context_window": window, "strategy": "rollover"},
        ),
    ]


# --- the task ----------------------------------------------------------------------------------------


def make_workspace(root: Path) -> Path:
    ws = root / "template"
    (ws / "src").mkdir(parents=True)
    (ws / "tests").mkdir()
    for path, text in stdlib_sources(60):
        (ws / path).write_text(text, encoding="utf-8")
    (ws / "README.md").write_text("# vendored modules\n\nA copy of some standard-library modules.\n")
    return ws


def task(steps: int, seed: int = 3) -> list[tuple[str, list[dict[str, Any]]]]:
    """(prompt, turns) of each run; every turn but a run's last makes 1-5 tool calls."""
    rng = random.Random(seed)
    sources = stdlib_sources(60)
    big = [p for p, t in sources if len(t.splitlines()) > 1_400]
    prose = english_prose()
    written: list[tuple[str, int]] = []

    def say() -> str:
        start = rng.randrange(0, len(prose) - 1_000)
        return "I'll look at this next. " + " ".join(
            prose[start : start + rng.choice((60, 150, 300))].split()
        )

    def read(path: str | None = None, limit: int | None = None) -> dict:
        path = path or rng.choice(sources)[0]
        args: dict[str, Any] = {"path": path}
        if limit is None:
            args |= {"offset": rng.randrange(1, 400), "limit": rng.choice((40, 80, 120, 200))}
        elif limit:
            args["limit"] = limit
        return {"name": "read_file", "arguments": args}

    def one_call(i: int) -> list[dict]:
        # Batches over the cap come early only: a late one is a jump of ~57K tokens at once,
        # past the rollover reminder and fallback straight to the hard limit.
        kind = rng.choices(
            ["read", "grep", "bash", "write", "edit", "test", "big", "batch", "pair"],
            weights=[30, 12, 12, 7, 6, 9, 3, 8 if i < steps // 5 else 0, 12],
        )[0]
        if kind == "read":
            return [read()]
        if kind == "pair":
            return [
                read(),
                {
                    "name": "grep",
                    "arguments": {"pattern": rng.choice(["raise ", "return None", "__all__"]), "path": "src"},
                },
            ]
        if kind == "grep":
            word = rng.choice(["def _", "class ", "import re", "TODO", "self._", "except ", "yield"])
            return [{"name": "grep", "arguments": {"pattern": word, "path": "src", "glob": "*.py"}}]
        if kind == "bash":
            command = rng.choice(
                [
                    "wc -l src/*.py | sort -n | tail -25",
                    "ls -la src tests",
                    "python -m py_compile src/*.py && echo compiled",
                    'python -c "import ast,pathlib;[print(p.name, len([n for n in ast.walk(ast.parse(p.read_text())) '
                    "if isinstance(n, ast.FunctionDef)])) for p in sorted(pathlib.Path('src').glob('*.py'))]\"",
                    "grep -c 'def ' src/*.py | head -40",
                ]
            )
            return [{"name": "bash", "arguments": {"command": command}}]
        if kind in ("write", "edit") and (kind == "write" or not written):
            path, _text = rng.choice(sources)
            name = f"tests/test_{Path(path).stem}_{i}.py"
            marker = i
            written.append((name, marker))
            body = (
                "import pathlib\nimport unittest\n\n\nclass Smoke(unittest.TestCase):\n"
                f"    # check {marker}\n    def test_has_functions(self):\n"
                f"        text = pathlib.Path({path!r}).read_text()\n        self.assertIn('def ', text)\n\n"
                f"    def test_not_empty(self):\n        self.assertGreater(len(pathlib.Path({path!r}).read_text()), 100)\n"
            )
            return [{"name": "write_file", "arguments": {"path": name, "content": body}}]
        if kind == "edit":
            name, marker = written.pop(rng.randrange(len(written)))
            old, new = f"    # check {marker}\n", f"    # check {marker}: reviewed\n"
            return [{"name": "edit_file", "arguments": {"path": name, "old_string": old, "new_string": new}}]
        if kind == "test":
            return [
                {
                    "name": "bash",
                    "arguments": {"command": "python -m unittest discover -s tests -v 2>&1 | tail -60"},
                }
            ]
        if kind == "big":
            return [read(rng.choice(big), limit=0)]  # the whole file (2,000 lines): over the spill limit
        return [read(rng.choice(big), limit=1_100) for _ in range(5)]  # a batch over 200,000 bytes

    prompts = [
        "Review the vendored modules in src/ and tell me which are the largest and most complex.",
        "Add a smoke test in tests/ for each module you looked at, and run the tests.",
        "Find error handling that swallows exceptions in src/ and list it with file and line.",
        "Re-run everything, fix what fails, and summarize the state of the test suite.",
    ]
    runs = []
    per_run = [steps // len(prompts)] * len(prompts)
    per_run[-1] += steps - sum(per_run)
    i = 0
    for prompt, count in zip(prompts, per_run, strict=True):
        turns = []
        for _ in range(count - 1):
            i += 1
            turns.append({"text": say(), "tool_calls": one_call(i)})
        turns.append({"text": "Summary of this part: " + say(), "tool_calls": []})
        runs.append((prompt, turns))
    return runs


SUMMARY = """## Confirmed requirements
- Review the vendored modules in src/ and add smoke tests (source: user).
## Agent inferences (unverified)
- {inference}
## Unresolved problems
- None of the tests failed so far; the largest modules were not read in full.
## Files and changes
- tests/test_*.py: smoke tests written for the modules reviewed; src/ unchanged.
## Next steps
- Continue with the remaining modules; re-run the test suite at the end."""


class HeedingScript(ScriptedProvider):
    """The scripted model, plus one behaviour of a real one: reminded to hand over, it does.

    When the request carries a rollover reminder (or the fallback pruned the tools), it
    answers with ``new_context`` before going on with its script; the answer consumes no
    turn, so the task continues unchanged in the new window.
    """

    def __init__(self, script: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(script, **kwargs)
        self._answered: set[str] = set()
        self.handoffs = 0

    def stream(self, request: Request):  # type: ignore[override]
        note = _pending_note(request.messages)
        if request.purpose == "agent" and note is not None and note.id not in self._answered:
            self._answered.add(note.id)
            self.handoffs += 1
            self.requests.append(request)
            return self._handoff(request)
        return super().stream(request)

    def _handoff(self, request: Request):
        from pseudoclaude_nb.messages import ToolCall, Usage
        from pseudoclaude_nb.providers.base import Response
        from pseudoclaude_nb.providers.scripted import estimated_usage, replay_events

        files = sorted(
            {c.arguments["path"] for m in request.messages for c in m.tool_calls if "path" in c.arguments}
        )
        call = ToolCall(
            id=f"handoff_{self.handoffs}",
            name="new_context",
            arguments={
                "handoff": {
                    "confirmed_requirements": [{"text": "review src/ and add smoke tests", "source": "user"}],
                    "agent_inferences": ["the largest modules need the most tests", "no test failed so far"],
                    "unresolved_conflicts": [],
                    "unverified_acceptance_criteria": [
                        "every module in src/ has a smoke test",
                        "the suite passes",
                    ],
                },
                "related_files": [{"path": p, "role": "other", "note": "looked at"} for p in files[-8:]],
            },
        )
        usage: Usage = estimated_usage(request, "Handing over to a fresh window.", [call])
        return replay_events(
            Response(
                text="Handing over to a fresh window.", tool_calls=[call], usage=usage, stop_reason="tool_use"
            )
        )


def _pending_note(messages: list[Message]) -> Message | None:
    """The newest rollover reminder or fallback note of the window, if any."""
    for m in reversed(messages):
        if m.host is not None:
            return m
        if m.role == "assistant" and any(c.name == "new_context" for c in m.tool_calls):
            return None
    return None


@dataclass
class RunResult:
    strategy: Strategy
    requests: list[Request]
    session_dir: Path
    seconds: float
    steps: int
    compactions: int = 0
    rollovers: int = 0
    spills: int = 0
    statuses: list[str] = field(default_factory=list)
    rollover_reasons: list[str] = field(default_factory=list)  # model (declared) or hard-limit (forced)


def run_task(root: Path, template: Path, strategy: Strategy, runs: list, window: int) -> RunResult:
    ws = root / strategy.name
    shutil.copytree(template, ws)
    turns = [t for _prompt, ts in runs for t in ts]
    script = {
        "model": "bench-scripted",
        "context_window": strategy.settings.get("context_window", window),
        "turns": turns,
        "summaries": [SUMMARY.format(inference=f"compaction {k}: the pattern holds") for k in range(40)],
    }
    provider = HeedingScript(script)
    settings = {k: v for k, v in strategy.settings.items() if k != "context_window"}
    agent = Agent(
        PseudoClaude(
            workspace=str(ws),
            provider="scripted",
            script="(in memory)",
            permission_mode="auto",
            fsync=False,
            memory_policy="off",
            max_steps=1_000,
            context_window=strategy.settings.get("context_window", window),
            **settings,
        ),
        providers=lambda _config: provider,  # every run: the one script, which keeps its place
    )
    started = time.perf_counter()
    statuses = []
    try:
        for prompt, _turns in runs:
            summary = agent.run(prompt)
            statuses.append(summary.status if summary.error is None else f"{summary.status}: {summary.error}")
        assert agent.session is not None
        folder = agent.session.dir
        context = agent.session.context
        result = RunResult(
            strategy=strategy,
            requests=list(provider.requests),
            session_dir=folder,
            seconds=time.perf_counter() - started,
            steps=provider.turns_used + provider.handoffs,
            compactions=context.shared.compactions,
            rollovers=context.shared.rollovers,
            spills=context.shared.ledger.spilled,
            statuses=statuses,
            rollover_reasons=_commits(folder / LOG_NAME),
        )
    finally:
        agent.close()
    return result


def _commits(log: Path) -> list[str]:
    reasons = []
    for raw in log.read_bytes().splitlines():
        entry = orjson.loads(raw)
        if entry.get("type") == "rollover" and entry.get("phase") == "commit":
            reasons.append(entry.get("reason"))
    return reasons


# --- pricing -----------------------------------------------------------------------------------------


class Counter:
    """Token counts per block, each text counted once."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self.count = count
        self._memo: dict[Any, int] = {}

    def text(self, key: Any, make: Callable[[], str]) -> int:
        n = self._memo.get(key)
        if n is None:
            n = self._memo[key] = self.count(make())
        return n

    def blocks(self, request: Request) -> list[tuple[Any, int]]:
        tools = orjson.dumps(request.tools)
        out = [
            (("system", request.system), self.text(("system", request.system), lambda: request.system)),
            (("tools", tools), self.text(("tools", tools), lambda: tools.decode())),
        ]
        for m in request.messages:
            key = (m.id, m.content, m.tool_result.content if m.tool_result else None, len(m.tool_calls))
            out.append((key, self.text(key, lambda m=m: _message_text(m))))
        return out


def _message_text(m: Message) -> str:
    parts = [m.role, m.content]
    parts += [c.name + " " + orjson.dumps(c.arguments).decode() for c in m.tool_calls]
    if m.tool_result is not None:
        parts.append(m.tool_result.content)
    return "\n".join(parts)


def price(result: RunResult, counter: Counter) -> dict[str, Any]:
    """Input tokens and cost of every request of one run, with the prefix cache model."""
    previous: list[tuple[Any, int]] = []
    total = written = read = 0
    per_step: list[int] = []
    summaries = 0
    for request in result.requests:
        blocks = counter.blocks(request)
        size = sum(n for _k, n in blocks)
        total += size
        if request.purpose != "agent":
            summaries += 1
            written += size  # nothing in common with the agent's prefix
            continue
        per_step.append(size)
        common = 0
        for (a, n), (b, _m) in zip(blocks, previous, strict=False):
            if a != b:
                break
            common += n
        read += common
        written += size - common
        previous = blocks
    return {
        "strategy": result.strategy.name,
        "label": result.strategy.label,
        "requests": len(result.requests),
        "agent_steps": len(per_step),
        "summary_requests": summaries,
        "input_tokens": total,
        "peak_context": max(per_step) if per_step else 0,
        "cache_read_tokens": read,
        "cache_write_tokens": written,
        "cost_no_cache": total,
        "cost_with_cache": round(CACHE_WRITE * written + CACHE_READ * read),
        "compactions": result.compactions,
        "rollovers": result.rollovers,
        "rollover_reasons": result.rollover_reasons,
        "spills": result.spills,
        "seconds": round(result.seconds, 1),
        "statuses": result.statuses,
        "per_step": per_step,
    }


def context_cost(
    root: Path, sizes: Sizes, count: Callable[[str], int], counter_name: str
) -> tuple[list[Row], list[dict], list[Path]]:
    window = sizes.cost_window
    base = Path(tempfile.mkdtemp(dir=root, prefix="cost-"))
    template = make_workspace(base)
    runs = task(sizes.cost_steps)
    counter = Counter(count)
    priced, logs = [], []
    for strategy in strategies(window):
        result = run_task(base, template, strategy, runs, window)
        priced.append(price(result, counter))
        logs.append(result.session_dir / LOG_NAME)
    baseline = priced[0]
    rows = []
    for p in priced:
        rows.append(
            Row(
                key=f"cost_{p['strategy']}",
                what=f"context cost: {p['label']}",
                target="",
                value=round(p["cost_with_cache"] / baseline["cost_with_cache"], 3),
                unit="× the unmanaged cost (cached)",
                ok=None,
                detail={k: v for k, v in p.items() if k not in ("per_step", "label", "strategy")}
                | {"tokens_counted_with": counter_name},
            )
        )
    return rows, priced, logs
