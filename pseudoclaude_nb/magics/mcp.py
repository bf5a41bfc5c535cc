"""``%mcp``: the kernel's MCP servers: status, tools, last error; start and restart them;
approve and revoke the workspace's own (``.mcp.json``) servers.

Thin: it parses, calls the agent's ``McpHub`` and shows the listing as tables (``tables``). It never shows an expanded value
(``env`` and ``headers`` values, ``${VAR}``s): only names and states, and for a project
server waiting for approval its entry as written (what approving it would run).
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from ..agent import Agent
from ..errors import PseudoClaudeError
from ..mcp import McpHub, ServerState
from ..mcp.approval import describe
from ..textsafe import printable
from .args import parse
from .tables import Column, Part, Table, bundle, emit

ACTIONS = ("list", "start", "restart", "approve", "revoke")
_NAMED = ("restart", "approve", "revoke")
_FIRST_LINE = 70  # characters of a tool's description shown


@magics_class
class McpMagics(Magics):
    def __init__(self, shell: Any, agent: Agent) -> None:
        super().__init__(shell)
        self._agent = agent

    @magic_arguments()
    @argument("action", nargs="?", default="list", help=" | ".join(ACTIONS))
    @argument("name", nargs="?", help="with restart, approve, revoke: the server's name")
    @line_magic
    def mcp(self, line: str) -> None:
        """MCP servers: their tools become mcp__<server>__<tool> for %agent.

        %mcp                 servers, status, tools, last error (starts nothing)
        %mcp start           start the configured servers now (else the next %agent run does)
        %mcp restart NAME    stop and start one server (its restart allowance starts afresh)
        %mcp approve NAME    allow the workspace's .mcp.json server NAME, exactly as written now
        %mcp revoke NAME     withdraw that approval (the server is stopped)

        A server from the workspace's .mcp.json (a cloned repository's) never starts before you
        approve it: a run asks when it can, else %mcp shows it as "needs approval". A changed
        entry is asked about again. Approvals live in $PSEUDOCLAUDE_HOME/mcp-approvals.json.

        Servers come from $PSEUDOCLAUDE_HOME/mcp.json, <workspace>/.mcp.json and
        %config PseudoClaude.mcp_servers (later ones win for the same name), in the
        {"mcpServers": {NAME: {"command", "args", "env"} | {"type": "http", "url", "headers"}}}
        format. Timeouts: %config PseudoClaude.mcp_timeout (a call), mcp_start_timeout.
        """
        args = parse(self.mcp, line)
        if args.action not in ACTIONS:
            raise UsageError(
                f"unknown action {args.action!r}; use %mcp, %mcp start, or %mcp restart|approve|revoke NAME"
            )
        if args.action not in _NAMED and args.name:
            raise UsageError(f"%mcp {args.action} takes no name; %mcp restart NAME restarts one server")
        if args.action in _NAMED and not args.name:
            raise UsageError(f"%mcp {args.action} needs the server's name; %mcp lists them")
        try:
            problems = self._agent.prepare_mcp(start=args.action == "start")
            hub = self._agent.mcp
        except PseudoClaudeError as exc:  # a bad workspace setting: one line, as %agent says it
            raise UsageError(str(exc)) from None
        if args.action == "approve":
            print(approve(hub, args.name, problems))
            return
        if args.action == "revoke":
            print(revoke(hub, args.name))
            return
        if args.action == "restart":
            try:
                state = hub.restart(args.name)
            except (KeyError, PermissionError) as exc:
                raise UsageError(str(exc.args[0])) from None
            print(f"{state.name}: {_status_line(state)}")
            return
        emit(self.shell, *listing(hub, problems))


def approve(hub: McpHub, name: str, problems: list[str]) -> str:
    state = hub.servers.get(name)
    if state is None:
        said = [p for p in problems if f"server {name!r}" in p]
        known = ", ".join(hub.servers) or "(none)"
        raise UsageError("; ".join(said) if said else f"no MCP server named {name!r}; configured: {known}")
    if not state.config.project:
        return f"{name} comes from {state.config.source} (your own configuration); it needs no approval."
    hub.approvals.approve(hub.workspace, state.config)
    hub.declined.discard((name, state.config.digest))
    return "\n".join(
        [
            f"Approved MCP server {printable(repr(name), one_line=True)} of {hub.workspace}, exactly as "
            "written now (a change to it is asked about again):",
            *describe(state.config),
            "The next %agent run starts it (or %mcp start); %mcp revoke NAME withdraws this.",
        ]
    )


def revoke(hub: McpHub, name: str) -> str:
    if not hub.approvals.revoke(hub.workspace, name):
        return f"No approval recorded for MCP server {name!r} in {hub.workspace}; nothing to revoke."
    hub.unapproved()  # stops it if it runs
    return f"Revoked the approval of MCP server {name!r}; it is stopped and will not start until approved."


def render(hub: McpHub, problems: list[str]) -> str:
    """The listing as text (what a terminal shows)."""
    return bundle(*listing(hub, problems))["text/plain"]


def listing(hub: McpHub, problems: list[str]) -> list[Part]:
    """The servers (name, transport, status) and their tools (name, effect, first line of the
    description) as tables; what approving a server would run and its errors as lines."""
    config = hub.config
    if not hub.servers and not problems:
        return [
            'No MCP servers configured. Add them to .mcp.json in the workspace ({"mcpServers": '
            '{"NAME": {"command": …, "args": […]}}}), to $PSEUDOCLAUDE_HOME/mcp.json or to '
            "%config PseudoClaude.mcp_servers."
        ]
    parts: list[Part] = [f"MCP servers (from {', '.join(config.sources) or 'nowhere'}):"]
    servers = Table((Column("server"), Column("type"), Column("status")), indent="  ")
    tools = Table(
        (Column("tool", mono=True), Column("effect"), Column("description", code=True)), indent="  "
    )
    said: list[str] = []
    for state in hub.servers.values():
        name = printable(state.name, one_line=True)
        servers.add(name, state.config.type, _status_line(state))
        if state.status == "needs approval":
            said.append(f"  {name}: from {state.config.source}; approving it runs:")
            said += [f"  {line}" for line in describe(state.config)]
        said += [f"  {name}: {why}" for why in state.left_out]
        if state.last_error:
            said.append(f"  {name}: last error: {state.last_error}")
        for tool in hub.tools():
            if tool.server != state.name:
                continue
            effect = "read-only" if not tool.side_effect else "auto" if tool.preapproved else "side effects"
            about = (tool.description.strip().splitlines() or [""])[0][:_FIRST_LINE]
            tools.add(tool.name, effect, about)
    parts.append(servers)
    parts += said
    if tools.rows:
        parts.append(tools)
    parts += [f"  problem: {text}" for text in problems]
    return parts


def _status_line(state: ServerState) -> str:
    parts: list[str] = [state.status]
    if state.status == "not started":
        parts.append("(the next %agent run starts it, or %mcp start)")
    if state.status == "needs approval":
        parts.append(f"(the workspace's; %mcp approve {state.name} allows it as written)")
    if state.tools and state.status in ("running", "crashed"):
        parts.append(f"{len(state.tools)} tools")
    if state.config.trust != "hints":
        parts.append(f"trust {state.config.trust}")
    if state.restarts:
        parts.append(f"restarted {state.restarts}×")
    if state.status == "failed":
        parts.append(f"(%mcp restart {state.name} tries again)")
    return " · ".join(parts)
