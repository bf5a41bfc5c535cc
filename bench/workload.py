"""Realistic session content for the benchmarks, made here and deterministic: no downloads.

Tool outputs are real text shipped with Python — standard-library sources and the
``pydoc_data`` topics — shaped the way the product's tools shape them (numbered lines,
``path:line:text`` grep hits, command logs). Sizes follow what a coding session sees: most
results are a few KB, a few are tens of KB, and now and then one is over the spill limit.
"""

from __future__ import annotations

import random
import sysconfig
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from pseudoclaude_nb.messages import Message, ToolCall, new_id

TOOLS = ("read_file", "grep", "bash", "list_files", "edit_file", "write_file")


@cache
def stdlib_sources(limit: int = 120) -> tuple[tuple[str, str], ...]:
    """(relative path, text) of standard-library modules, the same ones on every run."""
    root = Path(sysconfig.get_paths()["stdlib"])
    names = sorted(
        p
        for p in root.glob("*.py")
        if not p.name.startswith(("_", "test")) and 4_000 < p.stat().st_size < 400_000
    )
    step = max(1, len(names) // limit)
    out = []
    for path in names[::step][:limit]:
        try:
            out.append((f"src/{path.name}", path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    return tuple(out)


@cache
def english_prose() -> str:
    """Python's own reference documentation, as shipped in ``pydoc_data`` (plain English)."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[k] for k in sorted(topics))


class Workload:
    """Messages of a long coding session; ``seed`` fixes every choice."""

    def __init__(self, seed: int = 7, *, big_every: int = 40) -> None:
        self.rng = random.Random(seed)
        self.sources = stdlib_sources()
        self.big_every = big_every
        self.step = 0

    # --- tool outputs -----------------------------------------------------------------------

    def read_output(self, lines: int | None = None) -> tuple[dict, str]:
        path, text = self.rng.choice(self.sources)
        all_lines = text.splitlines()
        n = lines or self.rng.choice((40, 60, 80, 120, 200))
        start = self.rng.randrange(0, max(1, len(all_lines) - n))
        shown = [f"{i + 1:>6}\t{line}" for i, line in enumerate(all_lines[start : start + n], start)]
        return {"path": path, "offset": start + 1, "limit": n}, "\n".join(shown)

    def grep_output(self) -> tuple[dict, str]:
        word = self.rng.choice(("def ", "return", "self.", "import", "raise", "class ", "if not"))
        out = []
        for path, text in self.rng.sample(self.sources, 6):
            for i, line in enumerate(text.splitlines(), 1):
                if word in line:
                    out.append(f"{path}:{i}:{line[:200]}")
                if len(out) >= self.rng.choice((15, 30, 60)):
                    break
        return {"pattern": word.strip(), "path": "src"}, "\n".join(out) or "no matches"

    def bash_output(self) -> tuple[dict, str]:
        kind = self.rng.choice(("test", "ls", "build"))
        if kind == "ls":
            listing = [
                f"-rw-r--r-- 1 dev dev {len(t):>7} Nov 30 14:{i % 60:02d} {p[4:]}"
                for i, (p, t) in enumerate(self.rng.sample(self.sources, 25))
            ]
            return {"command": "ls -la src"}, "total 1234\n" + "\n".join(listing)
        if kind == "build":
            lines = [
                f"compiling {p} ... ok ({len(t) // 1000} KB)" for p, t in self.rng.sample(self.sources, 30)
            ]
            return {"command": "python -m compileall -q src"}, "\n".join(lines) + "\n[exit status 0]"
        tests = self.rng.randrange(20, 120)
        lines = [
            f"test_{p[4:-3]}_{i} ({p[4:-3]}.Tests.test_{i}) ... ok"
            for i, (p, _t) in enumerate(self.rng.choices(self.sources, k=tests))
        ]
        if self.rng.random() < 0.3:
            path, text = self.rng.choice(self.sources)
            snippet = "\n".join(text.splitlines()[10:24])
            lines += [
                "",
                "=" * 70,
                f"FAIL: test_edge ({path[4:-3]}.Tests.test_edge)",
                "-" * 70,
                "Traceback (most recent call last):",
                f'  File "{path}", line 12, in test_edge',
                snippet,
                "AssertionError: 3 != 4",
            ]
        lines.append(f"\nRan {tests} tests in 0.{self.rng.randrange(100, 999)}s")
        return {"command": "python -m unittest discover -s tests -v"}, "\n".join(lines)

    def big_output(self) -> tuple[dict, str]:
        """A log or file over the spill limit (50,000 bytes): 60-150 KB."""
        path, text = self.rng.choice(self.sources)
        want = self.rng.randrange(60_000, 150_000)
        body = (text * (want // max(len(text), 1) + 1))[:want]
        return {"path": path, "limit": 5000}, body

    def tool_result(self, name: str) -> tuple[dict, str]:
        if name == "read_file":
            return self.read_output()
        if name == "grep":
            return self.grep_output()
        if name == "bash":
            return self.bash_output()
        if name == "list_files":
            return {"pattern": "src/**/*.py"}, "\n".join(p for p, _ in self.sources[:60])
        path, text = self.rng.choice(self.sources)
        if name == "edit_file":
            old = text.splitlines()[self.rng.randrange(5, 40)]
            return (
                {"path": path, "old_string": old, "new_string": old + "  # reviewed"},
                f"edited {path}: 1 replacement",
            )
        body = "\n".join(text.splitlines()[: self.rng.randrange(20, 80)])
        return {"path": path.replace("src/", "new/"), "content": body}, f"wrote {len(body)} bytes"

    # --- messages ------------------------------------------------------------------------------

    def assistant_text(self) -> str:
        prose = english_prose()
        start = self.rng.randrange(0, len(prose) - 2_000)
        return prose[start : start + self.rng.choice((80, 160, 300, 600))].strip()

    def exchange(self) -> list[Message]:
        """One model step: the assistant's tool calls and their results (1-3 calls)."""
        self.step += 1
        if self.big_every and self.step % self.big_every == 0:
            calls = [("read_file", *self.big_output())]
        else:
            names = self.rng.choices(TOOLS, weights=(8, 4, 4, 1, 2, 1), k=self.rng.choice((1, 1, 1, 2, 3)))
            calls = [(n, *self.tool_result(n)) for n in names]
        tool_calls = [ToolCall(id=f"call_{new_id()[:16]}", name=n, arguments=a) for n, a, _ in calls]
        out = [Message(role="assistant", content=self.assistant_text(), tool_calls=tuple(tool_calls))]
        out += [
            Message(role="user", tool_result={"call_id": c.id, "content": body})  # type: ignore[arg-type]
            for c, (_n, _a, body) in zip(tool_calls, calls, strict=True)
        ]
        return out

    def prompt(self) -> Message:
        return Message(role="user", content="Please " + self.assistant_text()[:200])

    def messages(self, count: int) -> Iterator[Message]:
        """About ``count`` messages: a prompt, then exchanges, with a final answer now and then."""
        made = 0
        yield self.prompt()
        made += 1
        while made < count:
            for m in self.exchange():
                yield m
                made += 1
            if self.rng.random() < 0.05:
                yield Message(role="assistant", content=self.assistant_text())
                yield self.prompt()
                made += 2
