"""``%context --at STEP`` and ``%context --diff A B`` (SPEC §19 steering).

Thin: the request of a step comes from ``session.steps`` (read from the log); this module
renders it — text for a terminal, an HTML table (with the same text as ``text/plain``) in a
notebook. Everything read from the log goes through ``textsafe.printable`` (and
``html.escape`` for HTML): a crafted message must not drive the reader's terminal.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.display import display

from ..errors import PseudoClaudeError
from ..session.steps import diff_steps, request_at
from ..widgets.step_view import diff_html, render_diff, render_request, request_html
from .render import in_notebook


def steps_action(magics: Any, args: Any) -> None:
    if args.at is not None and args.diff:
        raise UsageError("use --at STEP or --diff A B, not both")
    if args.last or args.json:
        raise UsageError("--last and --json go with %context alone, not with --at or --diff")
    agent = magics._agent
    if agent.session is None:
        raise UsageError(
            "no current session: %context --at/--diff read the current session's log; "
            "resume one with %sessions resume ID (see %sessions list) or run %agent"
        )
    path = agent.session.dir
    try:
        if args.diff:
            a, b = args.diff
            d = diff_steps(path, a, b)
            text, page = render_diff(d), diff_html(d)
        else:
            req = request_at(path, args.at)
            now = _now_tokens(agent)
            text, page = render_request(req, now), request_html(req, now)
    except PseudoClaudeError as exc:
        raise UsageError(str(exc)) from None
    if in_notebook(magics.shell):
        display({"text/html": page, "text/plain": text}, raw=True)
    else:
        print(text)


def _now_tokens(agent: Any) -> dict[str, int] | None:
    """Today's system prompt and tool schema tokens (the log does not keep them), or None."""
    try:
        # Only the parts besides the messages: the current conversation may be long.
        parts = agent.next_head_tokens()
    except (PseudoClaudeError, KeyError, TypeError):
        return None
    return {
        "system": int(parts.get("system", 0)),
        "memory": int(parts.get("memory", 0)),
        "tool_schemas": int(parts.get("tool_schemas", 0)) + int(parts.get("mcp_tool_schemas", 0)),
    }


now_tokens = _now_tokens  # public: the step scrubber of ``%sessions show`` shows the same NOW figures
