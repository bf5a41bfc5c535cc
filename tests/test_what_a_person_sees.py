"""What a person reads: text fallbacks of every widget, tool lines, prompts, listings.

A saved or converted notebook shows ``text/plain`` / ``text/html``, not the widget, so those
must be the widget's current state; the notebook renderer's lines run through a real
in-process IPython shell (``ip``), with the outputs captured as the frontend gets them.
"""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

from IPython.utils.capture import capture_output
from pydantic import BaseModel

from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.events import RunFinished, RunSummary, ToolFinished, ToolStarted
from pseudoclaude_nb.magics import current_agent, tool_line
from pseudoclaude_nb.magics.render import NotebookRenderer, TerminalRenderer, result_brief, tool_result_bundle
from pseudoclaude_nb.magics.sessions import _title, _window
from pseudoclaude_nb.magics.tool_line import TOOL_CSS
from pseudoclaude_nb.messages import ToolCall, ToolResult, Usage
from pseudoclaude_nb.session.timeline import build_timeline
from pseudoclaude_nb.tools import Permissions, build_tools
from pseudoclaude_nb.tools.registry import describe_call, permission_prompt
from pseudoclaude_nb.widgets import ContextGauge, GaugeState, SessionTimeline, SpillBrowser, UsageCurves
from pseudoclaude_nb.widgets.gauge import gauge_html, gauge_svg, gauge_text
from tests.picture_support import first_drawing
from tests.scripts import run_magic, save_script, turn, write_script

WIDGET = "application/vnd.jupyter.widget-view+json"


def _demo(workspace: Path) -> Agent:
    agent = Agent(
        PseudoClaude(workspace=str(workspace), provider="demo", permission_mode="auto", fsync=False)
    )
    assert agent.run("Add a stats module").status == "done"
    return agent


def test_gauge_bundle_is_its_current_state_as_text_and_html() -> None:
    gauge = ContextGauge()
    assert gauge.widget._repr_mimebundle_()["text/plain"] == "context gauge: waiting for the first request"
    state = GaugeState(
        estimated_tokens=12_000, anchor_tokens=9_000, context_window=50_000, marks=(("Layer 2", 17_000),)
    )
    gauge.update(state)
    bundle = gauge.widget._repr_mimebundle_()
    assert WIDGET in bundle
    assert bundle["text/plain"] == gauge_text(state) and "~12,000 / 50,000" in bundle["text/plain"]
    assert bundle["text/html"] == gauge_html(state, saved=True)  # a picture, not inline SVG
    assert "<svg" not in bundle["text/html"] and "<svg" in gauge.widget.value


def test_gauge_colours_come_from_the_theme_and_labels_fit() -> None:
    state = GaugeState(
        estimated_tokens=1_000, context_window=50_000, marks=(("hard", 49_000), ("remind", 2_000))
    )
    svg = gauge_svg(state)
    assert "--jp-ui-font-color1" in svg and "--jp-layout-color3" in svg and "--jp-brand-color1" in svg
    assert not re.search(r'fill="#(212121|424242|eceff1)"', svg)  # no fixed light-theme colours left
    # A mark near the right edge is drawn leftwards from its line, one near the left rightwards.
    assert re.search(r'text-anchor="end"[^>]*>hard 49,000<', svg)
    assert re.search(r'text-anchor="start"[^>]*>remind 2,000<', svg)


def test_gauge_mark_labels_close_together_do_not_overlap() -> None:
    # Rollover on a 200K window: remind 152,000, base 167,000 and hard 180,000 are ~35 px
    # apart on the bar, their labels ~80 px wide. They were drawn over each other.
    marks = (("remind", 152_000), ("base", 167_000), ("hard", 180_000))
    svg = gauge_svg(GaugeState(estimated_tokens=60_000, context_window=200_000, marks=marks))
    labels = re.findall(
        r'<text class="pc-gauge-mark" x="([\d.]+)" y="(\d+)"[^>]*text-anchor="(\w+)"[^>]*>([^<]+)<', svg
    )
    assert [text for *_, text in labels] == ["remind 152,000", "base 167,000", "hard 180,000"]
    spans = []
    for x, y, anchor, text in labels:
        w = len(text) * 5.6  # a 10px sans-serif label, as chromium draws it
        start = {"start": float(x), "middle": float(x) - w / 2, "end": float(x) - w}[anchor]
        spans.append((int(y), start, start + w))
    for i, (y, a, b) in enumerate(spans):
        for y2, a2, b2 in spans[i + 1 :]:
            assert y != y2 or b <= a2 or b2 <= a, (labels, spans)
    height = int(re.search(r'<svg[^>]* height="(\d+)"', svg).group(1))
    assert height >= max(y for y, *_ in spans) + 4  # the lowest row is inside the picture
    # Marks far apart keep one row and the picture its height.
    alone = gauge_svg(GaugeState(estimated_tokens=1_000, context_window=50_000, marks=(("Layer 2", 17_000),)))
    assert 'height="64"' in alone


def test_status_gauge_with_a_measured_anchor_does_not_say_no_usage_yet() -> None:
    measured = gauge_html(GaugeState(estimated_tokens=11_000, anchor_tokens=11_000, context_window=50_000))
    assert "measured 11,000" in measured and "no usage yet" not in measured
    fresh = gauge_html(GaugeState(estimated_tokens=2_000, context_window=50_000))
    assert "no usage yet" in fresh


def test_timeline_opens_at_the_effective_window_with_readable_entries(workspace: Path) -> None:
    agent = _demo(workspace)
    timeline = build_timeline(agent.session.dir)
    widget = SessionTimeline(timeline)
    start = next(i for i, it in enumerate(timeline.items) if it.effective)
    assert start > 0 and widget.entries.value == start
    assert "line " in widget.detail.value  # the entry is shown, not "choose an entry"
    bundle = widget._repr_mimebundle_()
    assert bundle["text/plain"].startswith(f"session {timeline.session_id}:")
    assert "<svg" not in bundle["text/html"] and "pc-timeline-static" in bundle["text/html"]
    assert "src='data:image/svg+xml," in bundle["text/html"]  # the overview, as a picture
    assert "font-family" in widget.overview.value and "pc-timeline-list" in widget.entries._dom_classes
    replace = next(i for i, it in enumerate(timeline.items) if it.kind == "replace")
    widget.select(replace)
    assert re.search(r"ts: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", widget.detail.value)
    assert '"ts"' not in widget.detail.value and "&quot;ts&quot;" not in widget.detail.value
    # Token counts in the list as everywhere else: "19,942 → 10,462", not "19942 → 10462".
    (compact,) = [it.label for it in timeline.items if it.kind == "compact"]
    assert re.fullmatch(r"compact \(auto\) \d{1,2},\d{3} → \d{1,2},\d{3} tokens, ok", compact), compact


def test_spill_browser_names_the_file_read_and_folds_the_full_text(workspace: Path) -> None:
    agent = _demo(workspace)
    browser = SpillBrowser(agent.session.dir)
    (row,) = browser.rows
    assert row["target"] == "sample_run.log"
    bundle = browser._repr_mimebundle_()
    assert "read_file(sample_run.log) · 110,069 bytes → demo_05_read_log.txt" in bundle["text/plain"]
    assert "sample_run.log" in bundle["text/html"]
    browser.toggle(row)
    assert "<details open" in browser.full.value and browser.buttons[0].description == "hide"
    browser.toggle(row)
    assert browser.full.value == "" and browser.buttons[0].description == "full text"


def test_usage_curves_keep_their_picture_as_html(workspace: Path) -> None:
    agent = _demo(workspace)
    bundle = UsageCurves({"demo": agent.session.dir})._repr_mimebundle_()
    assert bundle["text/plain"].startswith("demo ") and "<svg" not in bundle["text/html"]
    drawn = first_drawing(bundle["text/html"])
    assert (
        "pc-axis" in drawn and 'style="color:#797979;' in drawn
    )  # its own text colour: no page CSS reaches it


def test_a_failed_command_is_drawn_in_the_error_colour() -> None:
    call = ToolCall(id="c", name="bash", arguments={"command": "python -m unittest"})
    failed = ToolFinished(call, ToolResult(call_id="c", content="Traceback\n" * 5 + "exit code 1"), 0.3)
    bundle = tool_result_bundle(failed)
    assert bundle["text/plain"].startswith("→ bash('python -m unittest') ✗ exit code 1")
    # The line names its colour (the theme's, in the run's shared ``TOOL_CSS``) and keeps a plain one.
    assert (
        "class='pc-bad' style='color:#d32f2f'" in bundle["text/html"] and "pc-ok" not in bundle["text/html"]
    )
    assert ".pc-bad{color:var(--jp-error-color1" in TOOL_CSS
    ok = tool_result_bundle(ToolFinished(call, ToolResult(call_id="c", content="OK"), 0.3))
    assert "class='pc-ok'" in ok["text/html"] and ".pc-ok{color:var(--jp-success-color1" in TOOL_CSS


def test_a_silent_failed_command_is_a_failure_too(tmp_path: Path) -> None:
    # ``exit 1`` prints nothing: the real bash tool's whole result is its "exit code 1" line.
    registry = build_tools(tmp_path)
    for command, last in (("exit 1", "exit code 1"), ("kill -9 $$", "exit code -9 (killed by SIGKILL)")):
        call = ToolCall(id="c", name="bash", arguments={"command": command})
        result = registry.run(call, Permissions("auto"))
        assert result.content == last and not result.is_error
        assert result_brief(result) == f"✗ {last}"
        bundle = tool_result_bundle(ToolFinished(call, result, 0.1))
        assert bundle["text/plain"] == f"→ bash({command!r}) ✗ {last}"
        assert "class='pc-bad'" in bundle["text/html"] and "pc-ok" not in bundle["text/html"]
    # A file whose one line merely mentions an exit code is not a failure.
    assert result_brief(ToolResult(call_id="c", content="exit code 1 means failure")).startswith("✓")


def _outputs(captured) -> list[dict]:
    return [o.data for o in captured.outputs]


def test_notebook_tool_line_appears_at_start_and_is_replaced_in_place(ip, monkeypatch) -> None:
    monkeypatch.setattr(tool_line, "SHOW_AFTER", 0)  # the running line at once, not after 0.5 s
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    updates: list[tuple[str, dict]] = []
    from IPython.core import display_functions

    real_display = display_functions.display

    def spy(*objs, **kwargs):
        if kwargs.get("update"):
            updates.append((kwargs.get("display_id"), objs[0]))
        return real_display(*objs, **kwargs)

    monkeypatch.setattr(display_functions, "display", spy)
    renderer = NotebookRenderer()
    call = ToolCall(id="c", name="bash", arguments={"command": "sleep 3"})
    with capture_output() as captured:
        renderer(ToolStarted(call))
        first = _outputs(captured)[-1]
        assert first["text/plain"] == "→ bash('sleep 3') … running 0 s"
        assert "pc-tool-running" in first["text/html"]
        renderer(ToolFinished(call, ToolResult(call_id="c", content="done"), 3.0))
    assert updates and updates[-1][1]["text/plain"] == "→ bash('sleep 3') ✓ done"
    assert "pc-tool-running" not in updates[-1][1]["text/html"]


def test_an_interrupted_tool_keeps_its_line_marked(ip, monkeypatch) -> None:
    monkeypatch.setattr(tool_line, "SHOW_AFTER", 0)  # the running line at once, not after 0.5 s
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    updates: list[dict] = []
    from IPython.core import display_functions

    real_display = display_functions.display

    def spy(*objs, **kwargs):
        if kwargs.get("update"):
            updates.append(objs[0] if isinstance(objs[0], dict) else {})
        return real_display(*objs, **kwargs)

    monkeypatch.setattr(display_functions, "display", spy)
    renderer = NotebookRenderer()
    call = ToolCall(id="c", name="bash", arguments={"command": "sleep 30"})
    summary = RunSummary(status="interrupted", steps=1, usage=Usage(), seconds=1.0, session_id="s")
    with capture_output():
        renderer(ToolStarted(call))
        renderer(RunFinished(summary))
    marked = [u for u in updates if "text/plain" in u and u["text/plain"].startswith("→ bash('sleep 30')")]
    assert marked and marked[-1]["text/plain"].startswith("→ bash('sleep 30') ■ interrupted after")

    out = io.StringIO()
    terminal = TerminalRenderer(out=out)
    terminal(ToolStarted(call))
    assert out.getvalue() == "→ bash('sleep 30') … "  # the line is there from the start
    terminal(RunFinished(summary))
    assert out.getvalue().splitlines()[0].startswith("→ bash('sleep 30') … ■ interrupted after")


class WriteArgs(BaseModel):
    path: str
    content: str


def test_permission_prompt_shows_text_not_escapes_and_says_no_is_the_default() -> None:
    body = '"""Stats."""\n\ndef mean(xs):\n    return sum(xs) / len(xs)\n'
    prompt = permission_prompt("write_file", WriteArgs(path="stats.py", content=body))
    lines = prompt.splitlines()
    # 4 lines, as read_file and the editor count them (the final newline ends the last one).
    assert lines[0] == "allow write_file(path='stats.py', content=<4 lines, 57 chars>)?"
    assert "  │ def mean(xs):" in lines and "  │     return sum(xs) / len(xs)" in lines
    assert "\\n" not in prompt
    assert lines[-1] == "[y/N, a = always allow write_file]: "
    long = permission_prompt("write_file", WriteArgs(path="a", content="x\n" * 50))
    assert "  … (38 more lines)" in long and "content=<50 lines, 100 chars>" in long
    assert "  … (1 more line)" in permission_prompt("write_file", WriteArgs(path="a", content="x\n" * 13))
    # The one-line form (also what the model reads in a refusal) stays one line.
    assert "\n" not in describe_call("write_file", WriteArgs(path="a", content=body))


def test_the_users_thinking_time_is_not_tool_time(workspace: Path) -> None:
    path = save_script(
        workspace / "s.json",
        turn("writing", ("write_file", {"path": "a.txt", "content": "hi\n"})),
        turn("ok"),
    )

    def slow_yes(prompt: str) -> str:
        time.sleep(0.6)
        return "y"

    agent = Agent(PseudoClaude(workspace=str(workspace), provider="scripted", script=str(path), fsync=False))
    agent.ask = slow_yes
    seen: list[ToolFinished] = []
    agent.run("write it", listeners=[lambda e: seen.append(e) if isinstance(e, ToolFinished) else None])
    assert (workspace / "a.txt").read_text() == "hi\n"
    assert seen and seen[0].seconds < 0.3


def test_sessions_show_limit_tail_and_titles_cut_at_a_word(ip, workspace: Path) -> None:
    path = save_script(workspace / "s.json", turn("answer"))
    for i in range(30):
        # Each run plays the script from the top: one answer per run.
        run_magic(ip, f"agent --provider scripted --script {path} question {i}")
    assert _window(60, limit=None, tail=None) == [*range(20), None, *range(40, 60)]
    shown = run_magic(ip, "sessions show --tail 3")
    body = [line for line in shown.splitlines() if re.match(r"\s+\d+  ", line)]
    assert [line.split()[0] for line in body] == ["57", "58", "59"]
    assert "57 more messages" in shown
    first = run_magic(ip, "sessions show --limit 2")
    assert [line.split()[0] for line in first.splitlines() if re.match(r"\s+\d+  ", line)] == ["0", "1"]
    default = run_magic(ip, "sessions show")
    assert "20 more messages" in default
    title = "Add a stats module with a mean function and a test, then check it against the sample data."
    cut = _title(title)
    assert cut.endswith("…") and title.startswith(cut[:-1]) and title[len(cut) - 1] == " "


def test_sessions_search_speaks_to_a_person(ip, workspace: Path) -> None:
    path = save_script(workspace / "s.json", turn("the build id is ZX-4411-Q"))
    run_magic(ip, f"agent --provider scripted --script {path} what is the build id?")
    sid = current_agent(ip).session.id
    found = run_magic(ip, "sessions search ZX-4411-Q")
    assert found.count(sid) == 1  # the scope, said once
    assert not re.search(r"\b[0-9a-f]{32}\b", found)
    assert "assistant said" in found and "ZX-4411-Q" in found


def test_the_memory_notice_is_in_the_run_that_asked(ip, workspace: Path) -> None:
    op = {
        "op": "create",
        "level": "project",
        "name": "pm",
        "description": "uses pnpm",
        "type": "preference",
        "body": "pnpm",
    }
    path = save_script(workspace / "r.json", turn("Noted."), memory_ops=[[op]])
    out = run_magic(ip, f"agent --provider scripted --script {path} Remember: this project uses pnpm.")
    assert "memory updated: created project/pm" in out and "memory: memory" not in out
    again = save_script(workspace / "a.json", turn("Hello."))
    assert "memory updated" not in run_magic(ip, f"agent --provider scripted --script {again} hi")


def test_the_demo_says_it_plays_a_fixed_script(ip, workspace: Path) -> None:
    out = run_magic(ip, "agent --provider demo --mode auto write me a poem")
    assert "plays a fixed script" in out


def test_a_refused_call_says_how_to_allow_it_in_the_terminal(ip, workspace) -> None:
    path = write_script(
        workspace, "s", turn("", ("write_file", {"path": "a.py", "content": "x"})), turn("ok")
    )
    shown = run_magic(ip, f"agent --provider scripted --script {path} --mode ask write it")
    assert "rerun with --mode auto to allow tools, or --mode read-only" in shown
    assert not (workspace / "a.py").exists()
