"""What the agent shows about its context: ``%context`` and ``%context --last``.

Only reads. ``next_request`` describes a dry ``RunPlan`` (``plan.plan_run(dry=True)``) —
the same sections, tools, settings, memory index and notebook block a run would use, so
what it shows is what the model gets — with the session's own figures (estimate, anchor,
breaker, counters) as the host computes them under the plan's settings (``figures``:
read, never set). ``last_request`` describes the
request the last runner actually sent.
"""

from __future__ import annotations

import time
from dataclasses import replace

from ..config import PseudoClaude
from ..context.cache import TTL_SECONDS, outlook
from ..context.estimate import message_bytes
from ..context.host import ContextHost
from ..context.manifest import Manifest, head_parts, manifest, notebook_cells
from ..context.settings import CompactSettings
from ..envtrust import from_dotenv
from ..prompt import without_memory
from ..providers import auto_provider
from ..runner import Runner
from ..session.spend import session_spend
from ..tools.memory import withhold_bodies
from ..tools.user import user_tools
from .plan import RunPlan
from .session import ActiveSession


def next_request(
    plan: RunPlan,
    *,
    active: ActiveSession | None,
    settings: PseudoClaude,
    window_source: str | None,
    last_runner: Runner | None,
) -> Manifest:
    """What the next request would contain, part by part (``%context``).

    The memory index is its own part (``memory_included``, ``memory_index``), not a
    system section; with memory off, earlier notes' bodies show as withheld.
    """
    sections = without_memory(list(plan.sections))
    tools = plan.schemas()
    block = plan.block
    pending = block.text if block is not None and block.text else None
    host = active.context if active is not None else ContextHost.blank(plan.strategy, plan.settings)
    figures = host.figures(plan.settings, plan.system, tools)  # computed, never set on the session
    messages = active.conversation.messages() if active is not None else []
    if settings.memory_policy == "off":
        messages, _ = withhold_bodies(messages)
    units = [message_bytes(m) for m in messages]  # once, for the parts and the cache outlook
    data = manifest(
        sections=sections,
        messages=messages,
        tools=tools,
        context_window=plan.settings.context_window,
        threshold=figures.threshold,
        estimated_tokens=figures.estimate if active is not None else None,
        anchor_tokens=figures.anchor_tokens if active is not None else 0,
        memory_index=plan.memory_index,
        pending_notebook=pending,
        units=units,
    )
    data = replace(
        data,
        window_source=window_source,
        strategy=figures.strategy,
        marks=figures.marks,
        strategy_view=figures.describe,  # e.g. rollover's limits instead of the Layer 2 line
        memory_policy=settings.memory_policy,
        user_tools=[t.name for t in user_tools() if t.name in {s["name"] for s in tools}],
        notebook_pending_cells=block.shown if pending and block is not None else 0,
        from_dotenv=from_dotenv(),  # read by the dry plan, as a run reads it
        **notebook_cells(block),  # issue-29: the cells, each with its estimate
    )
    if active is None:
        return data
    data = replace(
        data,
        session_id=active.id,
        breaker="open" if figures.breaker_open else "closed",
        breaker_failures=figures.breaker_failures,
        spills=figures.spills,
        compactions=figures.compactions,
    )
    anchored = figures.anchor_tokens > 0
    return _with_cache_and_cost(data, messages, active, settings, last_runner, anchored=anchored, units=units)


def next_head(plan: RunPlan) -> dict[str, int]:
    """The next request's system prompt, pins, memory index and tool schemas, in tokens, as
    ``next_request`` counts them, without its messages (``%context --at``'s NOW figures: a
    long conversation costs nothing here)."""
    found = head_parts(
        sections=without_memory(list(plan.sections)), tools=plan.schemas(), memory_index=plan.memory_index
    )
    found.pop("system_sections")
    return found


def _with_cache_and_cost(
    data: Manifest,
    messages: list,
    active: ActiveSession,
    settings: PseudoClaude,
    last_runner: Runner | None,
    *,
    anchored: bool,
    units: list[int] | None = None,
) -> Manifest:
    """issue 31: the run's and the session's cost, the cache hit ratio, and the cache outlook
    of the next request (breakpoints, expected cache read)."""
    spend = session_spend(active.writer.path)
    summary = last_runner.last_summary if last_runner is not None else None
    run = summary.spend if summary is not None and summary.session_id == active.id else None
    last_model, last = spend.requests[-1] if spend.requests else (None, None)
    provider = last_runner.provider.name if last_runner is not None else settings.provider
    if provider == "auto":
        provider = auto_provider()  # the one a run would pick now
    head = sum(data.parts.get(k, 0) for k in ("system", "pins", "memory", "tool_schemas", "mcp_tool_schemas"))
    cache = outlook(
        provider=provider,
        head_tokens=head,
        messages=messages,
        last=last,
        last_ts=spend.last_ts,
        anchored=anchored,
        now=time.time(),
        ttl=3600 if settings.cache_ttl == "1h" and provider == "anthropic" else TTL_SECONDS,
        units=units,
    )
    ratio = spend.hit_ratio()
    session_cost = spend.cost()
    return replace(
        data,
        cost={
            "run": run.cost().text() if run is not None and run.requests else None,
            "session": session_cost.text() if spend.requests else None,
            "session_saved": session_cost.saved_text() if spend.requests and session_cost.known else "",
            "session_requests": len(spend.requests),
            "cache_hit_ratio": None if ratio is None else round(ratio, 4),
            "model": last_model,
        },
        cache=cache.as_dict(),
        cache_lines=cache.lines(),
    )


def last_request(
    runner: Runner | None, memory_index: str | None, settings: CompactSettings
) -> Manifest | None:
    """The manifest of the last request ``runner`` actually sent (``%context --last``);
    ``memory_index`` is what that run's system prompt carried."""
    if runner is None or runner.last_request is None:
        return None
    request = runner.last_request
    system = request.system
    if memory_index and system.endswith("\n\n" + memory_index):
        system = system[: -len(memory_index) - 2]
    elif memory_index and memory_index not in system:
        memory_index = None
    data = manifest(
        sections=[("system prompt as sent", system)],
        messages=request.messages,
        tools=request.tools,
        context_window=settings.context_window,
        threshold=settings.threshold,
        memory_index=memory_index,
    )
    return replace(data, provider=runner.provider.name, model=runner.provider.model, next_request=False)
