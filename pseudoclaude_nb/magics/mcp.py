"""``%mcp``: the kernel's MCP servers: status, tools, last error; start and restart them.

Thin: it parses, calls the agent's ``McpHub`` and prints. It never shows a configured value
(commands' arguments, ``env``, ``headers``, expanded ``${VAR}``s): only names and states.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from ..agent import Agent
from ..mcp import McpHub, ServerState

ACTIONS = ("list", "start", "restart")
_FIRST_LINE = 70  # characters of a tool's description shown


@magics_class
class McpMagics(Magics):
    def __init__(self, shell: Any, agent: Agent) -> None:
        super().__init__(shell)
        self._agent = agent

    @magic_arguments()
    @argument("action", nargs="?", default="list", help=" | ".join(ACTIONS))
    @argument("name", nargs="?", help="with restart: the server's name")
    @line_magic
    def mcp(self, line: str) -> None:
        """MCP servers: their tools become mcp__<server>__<tool> for %agent.

        %mcp                 servers, status, tools, last error (starts nothing)
        %mcp start           start the configured servers now (else the next %agent run does)
        %mcp restart NAME    stop and start one server (its restart allowance starts afresh)

        Servers come from $PSEUDOCLAUDE_HOME/mcp.json, <workspace>/.mcp.json and
        %config PseudoClaude.mcp_servers (later ones win for the same name), in the
        {"mcpServers": {NAME: {"command", "args", "env"} | {"type": "http", "url", "headers"}}}
        format. Timeouts: %config PseudoClaude.mcp_timeout (a call), mcp_start_timeout.
        """
        args = parse_argstring(self.mcp, line)
        if args.action not in ACTIONS:
            raise UsageError(f"unknown action {args.action!r}; use %mcp, %mcp start or %mcp restart NAME")
        if args.action != "restart" and args.name:
            raise UsageError(f"%mcp {args.action} takes no name; %mcp restart NAME restarts one server")
        problems = self._agent.prepare_mcp(start=args.action == "start")
        hub = self._agent.mcp
        if args.action == "restart":
            if not args.name:
                raise UsageError("%mcp restart needs the server's name; %mcp lists them")
            try:
                state = hub.restart(args.name)
            except KeyError as exc:
                raise UsageError(str(exc.args[0])) from None
            print(f"{state.name}: {_status_line(state)}")
            return
        print(render(hub, problems))


def render(hub: McpHub, problems: list[str]) -> str:
    config = hub.config
    if not hub.servers and not problems:
        return (
            'No MCP servers configured. Add them to .mcp.json in the workspace ({"mcpServers": '
            '{"NAME": {"command": …, "args": […]}}}), to $PSEUDOCLAUDE_HOME/mcp.json or to '
            "%config PseudoClaude.mcp_servers."
        )
    lines = [f"MCP servers (from {', '.join(config.sources) or 'nowhere'}):"]
    for state in hub.servers.values():
        lines.append(f"  {state.name}  {state.config.type}  {_status_line(state)}")
        if state.last_error:
            lines.append(f"    last error: {state.last_error}")
        for tool in hub.tools():
            if tool.server != state.name:
                continue
            effect = "read-only" if not tool.side_effect else "auto" if tool.preapproved else "side effects"
            about = (tool.description.strip().splitlines() or [""])[0][:_FIRST_LINE]
            lines.append(f"    {tool.name}  [{effect}]  {about}")
    lines += [f"  problem: {text}" for text in problems]
    return "\n".join(lines)


def _status_line(state: ServerState) -> str:
    parts = [state.status]
    if state.status == "not started":
        parts.append("(the next %agent run starts it, or %mcp start)")
    if state.tools and state.status in ("running", "crashed"):
        parts.append(f"{len(state.tools)} tools")
    if state.config.trust != "hints":
        parts.append(f"trust {state.config.trust}")
    if state.restarts:
        parts.append(f"restarted {state.restarts}×")
    if state.status == "failed":
        parts.append(f"(%mcp restart {state.name} tries again)")
    return " · ".join(parts)
