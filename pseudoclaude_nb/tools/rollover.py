"""The rollover tools: ``new_context`` (declare a handoff) and ``search_history`` (one lookup).

``new_context`` only validates and declares: the handler checks the handoff and every
related file against the workspace, hands the result to ``declare`` (the rollover manager
logs the intent) and answers. It never touches the conversation — the switch happens at the
next pre-step boundary, after every result of this step is in. ``search_history`` reads
the full-history index; it is meant for one targeted lookup, not for browsing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import Field

from ..context.handoff import CheckedFile, Handoff, Intent, RelatedFile
from ..errors import BoundaryError, SessionError, SessionNotFoundError, ToolError
from ..history import HistoryIndex
from ..history.query import render_hits
from ..workspace import session_dir
from .registry import Tool, ToolArgs
from .workspace import display_path, resolve_in_workspace

NEW_CONTEXT = "new_context"
SEARCH_HISTORY = "search_history"
ROLLOVER_TOOLS = (NEW_CONTEXT, SEARCH_HISTORY)
SEARCH_LIMIT = 5

NEW_CONTEXT_DESCRIPTION = (
    "Hand the task over to a fresh context window. Call it when the host reminds you that the "
    "context is nearly full, or at a natural break in a long task. Write the handoff for "
    "someone who sees only it, the original request and the files: confirmed_requirements "
    "(each with its source: 'user', a spec file and section, or a test), agent_inferences "
    "(your own conclusions, unverified), unresolved_conflicts, unverified_acceptance_criteria "
    "(next actions and checks not yet passing). List the related_files the next window should "
    "open first. The switch happens before your next step; the old messages stay searchable."
)

SEARCH_HISTORY_DESCRIPTION = (
    "Search the full history of this session (every message, tool input, tool output and "
    "spilled result, including what earlier context windows held) for an exact substring; "
    "words are matched together. Returns up to 5 snippets with their message_uuid. Make one "
    "targeted lookup for a specific detail you lost (an error message, a name, a value). On a "
    "miss, do not search again with variations: go back to the workspace — read the files, "
    "run the tests — because the workspace, not the transcript, is the source of truth."
)


class NewContextArgs(ToolArgs):
    handoff: Handoff = Field(description="the four-section handoff for the next window")
    related_files: list[RelatedFile] = Field(
        default_factory=list, description="files the next window should open first"
    )


class SearchHistoryArgs(ToolArgs):
    query: str = Field(min_length=1, description="an exact substring to find (case-insensitive)")
    session_id: str | None = Field(None, description="the session to search; default: the current one")
    limit: int = Field(SEARCH_LIMIT, ge=1, description="at most 5 matches")


def check_related_files(workspace: Path, files: list[RelatedFile]) -> list[CheckedFile]:
    """Each path resolved inside the workspace (else ``BoundaryError``), with whether it exists."""
    checked, refused = [], []
    for f in files:
        try:
            resolved = resolve_in_workspace(workspace, f.path)
        except BoundaryError as exc:
            refused.append(str(exc))
            continue
        shown = display_path(workspace, resolved)
        checked.append(CheckedFile(shown, f.role, f.note, resolved.exists()))
    if refused:
        raise BoundaryError(
            "new_context refused, nothing was declared: "
            + "; ".join(refused)
            + ". Fix related_files and call again."
        )
    return checked


def new_context_tool(workspace: Path, declare: Callable[[Intent], str]) -> Tool:
    def run(args: NewContextArgs) -> str:
        files = check_related_files(workspace, args.related_files)
        return declare(Intent(handoff=args.handoff, related_files=files))

    return Tool(name=NEW_CONTEXT, description=NEW_CONTEXT_DESCRIPTION, args=NewContextArgs, handler=run)


def search_history_tool(index: HistoryIndex, current_session: Callable[[], str | None]) -> Tool:
    def run(args: SearchHistoryArgs) -> str:
        current = current_session()
        sid = args.session_id or current
        if sid is None:
            raise ToolError("there is no current session to search; pass session_id")
        try:
            session_dir(index.workspace, sid)
        except SessionNotFoundError:
            raise ToolError(
                f"no session {sid!r} in this workspace; the current session is {current}"
            ) from None
        try:
            hits = index.search(args.query, session_id=sid, limit=min(args.limit, SEARCH_LIMIT))
        except SessionError as exc:
            raise ToolError(f"{exc}. Go back to the workspace (read the files, run the tests).") from exc
        text = render_hits(hits, args.query, f"session {sid}")
        if not hits:
            text += " Do not search again with variations: go back to the workspace (read the files, run the tests)."
        return text

    return Tool(
        name=SEARCH_HISTORY, description=SEARCH_HISTORY_DESCRIPTION, args=SearchHistoryArgs, handler=run
    )
