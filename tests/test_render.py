"""The one-line forms the renderers print: pure functions of run events."""

from __future__ import annotations

import io

from pseudoclaude_nb.cost import Spend
from pseudoclaude_nb.events import Compacted, ContextState, RunFinished, RunSummary, Spilled
from pseudoclaude_nb.magics.render import TerminalRenderer, call_brief, context_line, end_line, result_brief
from pseudoclaude_nb.messages import ToolCall, ToolResult, Usage
from pseudoclaude_nb.tools.registry import NO_STDIN_REFUSAL


def test_call_brief_is_one_short_line() -> None:
    call = ToolCall(id="c", name="write_file", arguments={"path": "a.py", "content": "x\n" * 500})
    brief = call_brief(call)
    assert brief.startswith("write_file(path='a.py', content=") and brief.endswith("…)")
    assert "\n" not in brief and len(brief) < 90
    assert call_brief(ToolCall(id="c", name="bash", arguments={"command": "ls"})) == "bash('ls')"


def test_result_brief_marks_failures() -> None:
    assert result_brief(ToolResult(call_id="c", content="wrote 3 bytes to a")) == "✓ wrote 3 bytes to a"
    failed = ToolResult(call_id="c", content="Traceback\n" * 5 + "exit code 1")
    assert result_brief(failed) == "✗ exit code 1 · 6 lines, 61 bytes"
    error = ToolResult(call_id="c", content="refused: no stdin\nmore", is_error=True)
    assert result_brief(error) == "✗ refused: no stdin"
    assert result_brief(ToolResult(call_id="c", content="a\n" * 10)) == "✓ 10 lines, 20 bytes"


def test_end_line_and_context_lines() -> None:
    summary = RunSummary(
        status="done", steps=3, usage=Usage(input_tokens=10, output_tokens=5, cache_read_input_tokens=90)
    )
    summary.seconds, summary.session_id = 1.25, "20261130-000000-abcd"
    state = ContextState(2_000, 1_900, 50_000, 17_000, False, 0, 0)
    assert end_line(summary, state) == (
        "✓ done · 3 steps · 100 in / 5 out · cache read 90 (90% of the steps' input) · context ~2,000/50,000 · 1.2 s"
        " · session 20261130-000000-abcd"
    )
    # issue 31: with the run's requests, their cost (and the session's) follow the cache figures.
    summary.spend.add(
        Usage(input_tokens=100_000, output_tokens=10_000, cache_read_input_tokens=900_000),
        "claude-sonnet-4-5",
    )
    summary.session_spend = Spend([("claude-sonnet-4-5", Usage(input_tokens=1_000_000))])
    line = end_line(summary, state)
    # 0.1M x $3 + 0.01M x $15 + 0.9M x $0.30 = $0.72; uncached 1M x $3 + $0.15 = $3.15
    assert " · cost $0.720 (cache saved $2.43) · session cost $3.00 · context" in line
    assert context_line(Spilled("c", "read_file", "x/c.txt", 60_000, "single")).startswith(
        "⤓ spilled the read_file result (60,000 bytes, over the spill limit) → x/c.txt"
    )
    assert (
        context_line(Compacted("auto", 20_000, 9_000, True)) == "⟳ compacted (auto): ~20,000 → ~9,000 tokens"
    )
    assert (
        context_line(Compacted("auto", 20_000, 20_000, False, "boom")) == "✗ compaction (auto) failed: boom"
    )


def test_terminal_renderer_prints_errors_and_the_end_line() -> None:
    out = io.StringIO()
    renderer = TerminalRenderer(out=out)
    summary = RunSummary(status="error", steps=1, session_id="s")
    summary.error = RuntimeError("the provider said no")  # type: ignore[assignment]
    renderer(RunFinished(summary))
    text = out.getvalue()
    assert text.startswith("error: the provider said no\n✗ error · 1 step · ")


def test_an_error_line_keeps_its_fix() -> None:
    # The audit found "… has no stdin; rer" on the tool line: the fix cut off at 80 characters.
    refused = result_brief(ToolResult(call_id="c", content=NO_STDIN_REFUSAL, is_error=True))
    assert refused == f"✗ {NO_STDIN_REFUSAL}"
    long = ToolResult(call_id="c", content="x" * 500 + "\nmore", is_error=True)
    assert result_brief(long) == "✗ " + "x" * 199 + "…"
