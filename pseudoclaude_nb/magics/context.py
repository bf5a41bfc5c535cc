"""``%context`` and ``%compact``: see what the model will get, and shrink it on demand."""

from __future__ import annotations

import argparse
import html
import json
import re
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from ..agent import Agent
from ..context.manifest import Manifest
from ..context.plan import DropPlan, Preview
from ..cost import SESSION_HIT, ratio_text
from ..errors import PseudoClaudeError
from ..textsafe import printable
from ..widgets.theme import BRAND, FG2, NO_MATH
from .args import parse, unknown
from .compact_view import outcome_text, plural, preview_html, preview_text, undone_text
from .render import in_notebook
from .tables import TABLE_STYLE

PART_LABELS = {
    "system": "system prompt",
    "pins": "pins",
    "memory": "memory index",
    "tool_schemas": "tool schemas",
    "mcp_tool_schemas": "MCP tool schemas",
    "notebook": "notebook activity",
    "user_text": "user messages",
    "assistant_text": "assistant text",
    "tool_calls": "tool calls",
    "tool_results": "tool results",
    "spill_previews": "spill previews",
    "images": "images",
}


# Lab centres a table, fixes its layout and right-aligns its cells (for DataFrames): these
# are read from the left, their columns as wide as their text, in the theme's text colour.
def manifest_html(m: Manifest, *, title: str) -> str:
    """The breakdown as an HTML table, largest parts visible at a glance."""
    window = m.context_window or 1
    rows = []
    for key, label in _labels(m):
        value = m.parts.get(key, 0)
        width = 100 * value / window
        rows.append(
            f"<tr><td style='text-align:left'>{html.escape(label)}</td><td style='text-align:right'>{value:,}</td>"
            f"<td style='width:240px'><div style='background:#1565c0;background:{BRAND};height:10px;"
            f"width:{width:.2f}%'></div></td></tr>"
        )
        if key == "notebook":
            rows += [
                f"<tr style='color:{FG2}'><td style='text-align:left;padding-left:1.5em'>{html.escape(name)}</td>"
                f"<td style='text-align:right'>{f'{tokens:,}' if tokens >= 0 else ''}</td><td></td></tr>"
                for name, tokens in _notebook_rows(m)
            ]
    sections = ", ".join(f"{html.escape(s['title'])} {s['tokens']:,}" for s in m.system_sections)
    return (
        f"<div class='pc-context {NO_MATH}'><b>{html.escape(title)}</b>: ~{m.estimated_tokens:,} of "
        f"{m.context_window:,} tokens · {html.escape(limits_phrase(m))} · {m.message_count} messages"
        f"<table style='{TABLE_STYLE}'><tr><th style='text-align:left'>part</th><th style='text-align:right'>tokens</th>"
        "<th style='text-align:left'>share of window</th></tr>"
        f"{''.join(rows)}</table>"
        f"<div style='font-size:85%;color:{FG2}'>system: {sections} · tools: {html.escape(', '.join(m.tools))}"
        f" · memory {'included' if m.memory_included else 'not included'}</div>"
        + "".join(
            f"<div class='pc-cost' style='font-size:85%'>{html.escape(row)}</div>" for row in cost_rows(m)
        )
        + "".join(f"<div style='font-size:85%'>{html.escape(printable(row))}</div>" for row in dotenv_rows(m))
        + "</div>"
    )


def render_manifest(m: Manifest, *, title: str) -> str:
    window, est = m.context_window, m.estimated_tokens
    pct = 100 * est / window if window else 0.0
    lines = [
        f"{title}: ~{est:,} of {window:,} tokens ({pct:.0f}%) · {limits_phrase(m)}"
        + (f" · window from {m.window_source}" if m.window_source else "")
        + (f" · breaker {m.breaker}" if m.breaker is not None else "")
    ]
    if m.anchor_tokens:
        lines.append(
            f"  {m.anchor_tokens:,} as last measured by the provider + "
            f"{max(est - m.anchor_tokens, 0):,} estimated since (bytes/3.5)"
        )
    lines.append(f"  {'part':<22}{'tokens':>9}")
    for key, label in _labels(m):
        value = m.parts.get(key, 0)
        note = ""
        if key == "system":
            note = "  " + ", ".join(f"{s['title']} {s['tokens']:,}" for s in m.system_sections)
        elif key == "memory":
            note = "" if m.memory_included else "  (not included)"
        elif key == "tool_schemas":
            own = [t for t in m.tools if t not in set(m.mcp_tools)]
            note = f"  {len(own)} tools: {', '.join(own)}"
            if m.user_tools:
                note += f" (yours: {', '.join(m.user_tools)})"
        elif key == "mcp_tool_schemas":
            note = f"  {len(m.mcp_tools)} tools of {', '.join(_mcp_servers(m.mcp_tools))}"
        elif key == "images":
            note = f"  {m.image_count} images (Anthropic's width*height/750, at least 765)"
        elif key == "notebook" and m.notebook_pending_cells:
            note = f"  incl. {m.notebook_pending_cells} cells for the next run"
        lines.append(f"  {label:<22}{value:>9,}{note}")
        if key == "notebook":
            lines += [
                f"    {name:<20}{tokens:>9,}" if tokens >= 0 else f"    {name}"
                for name, tokens in _notebook_rows(m)
            ]
    lines.append(f"  {m.message_count} messages")
    if m.session_id:
        lines.append(
            f"  session {m.session_id} · {m.spills or 0} spilled results · {m.compactions or 0} compactions"
        )
    lines += [f"  {row}" for row in cost_rows(m)]
    lines += [f"  {row}" for row in dotenv_rows(m)]
    # Section titles (PSEUDOCLAUDE.md headings), tool and server names come from the workspace.
    return printable("\n".join(lines))


def dotenv_rows(m: Manifest) -> list[str]:
    """Which provider variables a workspace ``.env`` gives (issue 41), by name: never a value."""
    by_path: dict[str, list[str]] = {}
    for name, path in m.from_dotenv.items():
        by_path.setdefault(path, []).append(name)
    return [
        f"from {path} (used by the package's providers only): {', '.join(names)}"
        for path, names in by_path.items()
    ]


def cost_rows(m: Manifest) -> list[str]:
    """issue 31: the run's and session's cost with the cache hit ratio, then the cache outlook."""
    cost = m.cost
    if not cost:
        return []
    rows = []
    if cost.get("session"):
        ratio = cost.get("cache_hit_ratio")
        hit = ratio_text(ratio, SESSION_HIT)
        same_unknown = cost.get("run") == cost["session"] and "$" not in cost["session"]
        run = f"last run {cost['run']} · " if cost.get("run") and not same_unknown else ""
        saved = f", {cost['session_saved']}" if cost.get("session_saved") else ""
        n = cost["session_requests"]
        rows.append(
            f"cost: {run}session {cost['session']} ({n} request{'s' if n != 1 else ''}{saved}) · {hit}"
        )
    return rows + list(m.cache_lines or [])


# What JSON leaves as it is but a terminal acts on: C1 controls and the bidi overrides.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def json_text(data: Any) -> str:
    """``data`` as one JSON line a terminal shows as text (C0 controls are escaped by JSON itself)."""
    return _JSON_UNSAFE.sub(lambda c: f"\\u{ord(c.group()):04x}", json.dumps(data, ensure_ascii=False))


def _labels(m: Manifest) -> list[tuple[str, str]]:
    """The parts to show: the MCP row only when MCP tools are offered; pins and images only
    when there are any (a row of zeros for a feature not in use is noise)."""
    return [
        (k, v)
        for k, v in PART_LABELS.items()
        if (k != "mcp_tool_schemas" or m.mcp_tools) and (k not in ("images", "pins") or m.parts.get(k))
    ]


def _notebook_rows(m: Manifest) -> list[tuple[str, int]]:
    """The next run's notebook cells under the "notebook activity" part (issue 29).

    Each cell with its estimate, the block's own lines, then what is left out (tokens -1:
    a line without a number).
    """
    cells = m.notebook_cells
    rows = [(str(c["label"]), int(c["tokens"])) for c in cells]
    if cells:
        rows.append(("(block header)", m.notebook_block_overhead or 0))
    gone = []
    if m.notebook_left_out:
        gone.append(f"{m.notebook_left_out} left out by the budget (read_cells reads them)")
    if m.notebook_skipped:
        gone.append(f"{m.notebook_skipped} skipped (agent-skip)")
    if gone:
        rows.append(("; ".join(gone), -1))
    return rows


def _mcp_servers(names: list[str]) -> list[str]:
    """Server names from ``mcp__<server>__<tool>`` (the server part as made safe)."""
    return sorted({name[len("mcp__") :].split("__", 1)[0] for name in names})


def limits_phrase(m: Manifest) -> str:
    """The lines that matter for the strategy: Layer 2, or rollover's three limits."""
    # The one line a strategy acts at reads "<name> at N"; several lines (rollover's) read "<name> N".
    lines = m.lines()
    return " · ".join(
        f"{name} at {value:,}" if len(lines) == 1 else f"{name} {value:,}" for name, value in lines
    )


def status_gauge(m: Manifest) -> Any:
    from ..widgets import ContextGauge, GaugeState

    gauge = ContextGauge()
    gauge.update(
        GaugeState(
            estimated_tokens=m.estimated_tokens,
            anchor_tokens=m.anchor_tokens,
            context_window=m.context_window,
            marks=m.lines(),
            spills=m.spills or 0,
            compactions=m.compactions or 0,
            rollovers=int(m.strategy_view.get("rollovers", 0)),
            breaker_open=m.breaker == "open",
        )
    )
    return gauge


@magics_class
class ContextMagics(Magics):
    def __init__(self, shell: Any, agent: Agent) -> None:
        super().__init__(shell)
        self._agent = agent

    @magic_arguments()
    @argument("--json", action="store_true", help="print one JSON object instead of a table")
    @argument("--last", action="store_true", help="the last request actually sent, not the next one")
    @argument("--at", type=int, metavar="STEP", help="the request the model received at step STEP")
    @argument("--diff", type=int, nargs=2, metavar=("A", "B"), help="what changed between steps A and B")
    @argument(
        "words", nargs=argparse.REMAINDER, help="pin TEXT | pin --first | pin --message N | pins | unpin N"
    )
    # A pin is kept as typed (SPEC §20): IPython would put a variable's value for {x} and $x
    # into every request. (deferred.AS_TYPED says so before the class is imported.)
    @no_var_expand
    @line_magic
    def context(self, line: str) -> None:
        """What the next request would contain: system prompt sections, memory index,
        messages and tool schemas, with token estimates per part and the thresholds.

        %context            a table
        %context --json     one JSON object (context_window, estimated_tokens, message_count,
                            tools, memory_included, memory_index, parts, …)
        %context --last     the manifest of the last request actually sent
        %context --at STEP  the request the model received at step STEP
        %context --diff A B what changed between the requests of steps A and B
        %context pin TEXT   keep TEXT verbatim through every compaction and handoff
        %context pin --first        pin the session's first prompt as typed
        %context pin --message N    pin message N's text (N as in the # column of --at)
        %context pins       the pins, numbered
        %context unpin N    drop pin N
        """
        verb, rest = _verb(line)
        if verb in ("pin", "pins", "unpin"):
            from .context_pins import pins_action

            # Parsed here, not by argparse: a pin keeps its text as typed (spaces, quotes,
            # a leading "--"), which shell-style splitting would not.
            return pins_action(self, verb, rest)
        args = parse(self.context, line)
        if args.words:
            from .context_pins import USAGE

            # Say which word was not understood, then every form (the table's options too).
            raise unknown(
                "action",
                args.words[0],
                ("pin", "pins", "unpin"),
                usage=f"usage: %context [--json | --last | --at STEP | --diff A B]\n{USAGE}",
            )
        if args.at is not None or args.diff:
            from .context_steps import steps_action

            return steps_action(self, args)
        try:
            data = self._agent.sent_manifest() if args.last else self._agent.next_manifest()
        except PseudoClaudeError as exc:
            raise UsageError(str(exc)) from None
        if data is None:
            raise UsageError("no request has been sent in this kernel yet; run %agent first")
        title = "last request" if args.last else "next request"
        if args.json:
            print(json_text(data.as_dict()))
        elif in_notebook(self.shell):
            display(
                {
                    "text/html": manifest_html(data, title=title),
                    "text/plain": render_manifest(data, title=title),
                },
                raw=True,
            )
        else:
            print(render_manifest(data, title=title))

    @magic_arguments()
    @argument("--layer1", action="store_true", help="only spill large tool results (no summary)")
    @argument("--status", action="store_true", help="show the compaction state; change nothing")
    @argument("--preview", action="store_true", help="show what Layer 2 would do now; write nothing")
    @argument("--apply", action="store_true", help="commit the previewed summary (no new model request)")
    @argument("--undo", action="store_true", help="restore the state before the last compaction or rollover")
    @argument(
        "--edit", metavar="PATH", help="with --apply: commit the text of file PATH as the summary instead"
    )
    @no_var_expand  # the --edit PATH as typed: {x} and $x are a file name's, not variables
    @line_magic
    def compact(self, line: str) -> None:
        """Compact the current session's context now, or look first, or take it back.

        %compact            Layer 2: summarize the old history, keep the recent tail
        %compact --layer1   Layer 1 only: spill tool results over spill_bytes to files
        %compact --status   estimate, thresholds, spills, compactions, breaker
        %compact --preview  what Layer 2 would summarize and keep, and the summary the model
                            writes for it; nothing is written to the session
        %compact --apply    commit that previewed summary (the model is not asked again)
        %compact --apply --edit PATH
                            commit the text of file PATH as the summary instead (framed,
                            logged and redacted like the model's)
        %compact --undo     restore the state before the last compaction or rollover commit
                            (again: the one before that)
        """
        args = parse(self.compact, line)
        chosen = [
            f"--{name}" for name in ("layer1", "status", "preview", "apply", "undo") if getattr(args, name)
        ]
        if len(chosen) > 1:
            both = "not both" if len(chosen) == 2 else "only one"
            raise UsageError(f"use {' or '.join(chosen)}, {both}")
        if args.edit is not None and not args.apply:
            raise UsageError(
                "--edit goes with --apply: %compact --preview, then %compact --apply --edit PATH"
            )
        try:
            if args.status:
                data = self._agent.next_manifest()
                text = render_manifest(data, title="context")
                lines = self._last_compact()
                if not in_notebook(self.shell):
                    print("\n".join([text, *lines]))
                    return
                # The gauge, then the parts as %context's table (not its text again, in monospace).
                display(status_gauge(data).static_bundle(), raw=True)  # HTML + text, no widget
                display(
                    {"text/html": status_html(data, lines), "text/plain": "\n".join([text, *lines])}, raw=True
                )
                return
            if args.preview:
                return self._show_preview(self._agent.compact_preview())
            if args.undo:
                print(undone_text(self._agent.compact_undo()))
                return
            result = (
                self._agent.compact_apply(path=args.edit)  # --edit's file, read within bounds
                if args.apply
                else self._agent.compact(layer1_only=args.layer1)
            )
        except PseudoClaudeError as exc:
            raise UsageError(str(exc)) from None
        if isinstance(result, int) and args.layer1:
            print(f"Layer 1: spilled {result} tool result{'s' if result != 1 else ''} to files")
        else:
            strategy = self._agent.session.context.strategy.name if self._agent.session else "?"
            print(outcome_text(result, strategy))

    def _show_preview(self, plan: Preview | None) -> None:
        if plan is None:
            strategy = self._agent.session.context.strategy.name if self._agent.session else "?"
            print(f"strategy {strategy} would keep the context as it is: nothing to preview")
            return
        lost = self._cached_conversation() if plan.new is not None else 0
        if in_notebook(self.shell):
            display({"text/html": preview_html(plan, lost), "text/plain": preview_text(plan, lost)}, raw=True)
        else:
            print(preview_text(plan, lost))

    def _cached_conversation(self) -> int:
        """The cached conversation tokens a replace now would invalidate (issue 31); 0 if unknown."""
        try:
            return self._agent.next_manifest().cache_lost()
        except PseudoClaudeError:
            return 0

    def _last_compact(self) -> list[str]:
        """The pending preview and the last compaction, a line each (none if neither)."""
        session = self._agent.session
        plan = session.context.pending_preview() if session else None
        lines = []
        if isinstance(plan, DropPlan):
            lines.append(
                f"  preview pending: drops {plural(len(plan.dropped), 'message')}, ~{plan.before:,} → "
                f"~{plan.after:,}; %compact --apply commits it"
            )
        elif plan is not None:
            what = (
                f"summarizes {plural(plan.head, 'message')}, ~{plan.before:,} → ~{plan.after:,}; "
                "%compact --apply commits it"
                if plan.new is not None
                else printable(f"would fail ({plan.error})", one_line=True)
            )
            lines.append(f"  preview pending: {what}")
        last = session.context.last_compact if session else None
        if last is not None:
            outcome = "ok" if last.ok else printable(f"failed ({last.error})", one_line=True)
            lines.append(
                f"  last compaction ({last.trigger}): {last.before_tokens:,} → {last.after_tokens:,}, {outcome}"
            )
        return lines


def status_html(m: Manifest, lines: list[str]) -> str:
    """``%compact --status`` under its gauge: the parts table, then what only the status says
    (where the window comes from, the breaker, the session's spills and compactions)."""
    said = [f"window from {m.window_source}"] if m.window_source else []
    if m.breaker is not None:
        said.append(f"breaker {m.breaker}")
    if m.session_id:
        said.append(
            f"session {m.session_id} · {m.spills or 0} spilled results · {m.compactions or 0} compactions"
        )
    notes = "".join(
        f"<div style='font-size:85%;color:{FG2}'>{html.escape(printable(line.strip()))}</div>"
        for line in [" · ".join(said), *lines]
        if line
    )
    return manifest_html(m, title="context") + notes


def _verb(line: str) -> tuple[str, str]:
    """The first word of a ``%context`` line and the rest as typed (ends stripped)."""
    match = re.match(r"\s*(\S+)(.*)", line, re.DOTALL)
    return (match.group(1), match.group(2).strip()) if match else ("", "")
