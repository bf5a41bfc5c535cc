"""What Anthropic keeps and does on its side, in the Messages API's words (issues 31 and 43).

``anthropic`` builds requests and asks here for the parts that are Anthropic's own features:
the ``context_management`` edits of ``--strategy api`` (threshold compaction, with or without
``pause_after_compaction``, and tool-result clearing), the request for an on-demand compaction
(``compaction: {"type": "summarize"}``) and what its answer stands for, the cache-control marker
with the person's TTL, and the cache diagnosis (``diagnostics.previous_message_id``, which asks
the API why the prompt cache missed). Nothing here sends a request or knows the turn loop.

The shapes follow the installed ``anthropic`` SDK's beta types (2.17.0:
``BetaCompact20260112EditParam``, ``BetaCompactionConfigParam``, ``BetaCompactionBlock``,
``BetaDiagnosticsParam``, ``BetaCacheControlEphemeralParam``) and its beta names. Stored copies of
the documentation disagree on the on-demand beta's date (the compaction pages show
``compact-2026-09-04``, older copies of the threshold page only ``compact-2026-01-12``); the SDK's
``AnthropicBetaParam`` lists both, and its tool runner asks on-demand compaction under
``compact-2026-09-04``: that is the one used here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

from .. import provider_blocks
from ..messages import ORIGIN_ON_DEMAND, ORIGIN_OPENAI, Message, Reasoning, Usage
from .anthropic_stream import COMPACTION
from .base import Compaction, ServerContext

# Threshold compaction (``compact_20260112``) and context editing (``clear_tool_uses_20250919``)
# are in beta behind these headers; the API's floor for a compaction trigger is 50,000 tokens.
COMPACT_BETA = "compact-2026-01-12"
CONTEXT_EDITING_BETA = "context-management-2025-06-27"
MIN_COMPACT_TRIGGER = 50_000
# On-demand compaction: one request with a top-level ``compaction`` answers with a single signed
# ``compaction`` block (stop reason ``compaction``), which later requests send first.
ON_DEMAND_BETA = "compact-2026-09-04"
# The cache diagnosis: ``diagnostics.previous_message_id`` names the previous answer, and the API
# says in ``diagnostics.cache_miss_reason`` why this request could not reuse its cached prefix.
DIAGNOSIS_BETA = "cache-diagnosis-2026-04-07"
TTLS = ("5m", "1h")


def cache_control(ttl: str = "5m") -> dict[str, str]:
    """The breakpoint marker: 5 minutes is the API's default and is sent as the bare marker (the
    form every request had before issue 43); 1 hour says so."""
    if ttl not in TTLS:
        raise ValueError(f"a cache TTL is one of {', '.join(TTLS)}; got {ttl!r}")
    return {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}


def context_edits(ctx: ServerContext, *, compact: bool = True) -> tuple[list[dict[str, Any]], list[str]]:
    """``context_management.edits`` for ``ctx``, and the beta headers they need (the documented
    shapes: ``compact_20260112`` with an ``input_tokens`` trigger and, when the person confirms
    compactions, ``pause_after_compaction``; ``clear_tool_uses_20250919`` with a trigger and the
    tool uses to ``keep``). ``compact`` False leaves the compaction edit out: the messages hold an
    on-demand block, which the API does not take beside one (the SDK's tool runner refuses it)."""
    edits: list[dict[str, Any]] = []
    betas: list[str] = []
    if ctx.clear_tool_results:
        edits.append(
            {
                "type": "clear_tool_uses_20250919",
                "trigger": {"type": "input_tokens", "value": ctx.clear_tool_results},
                "keep": {"type": "tool_uses", "value": ctx.keep_tool_uses},
            }
        )
        betas.append(CONTEXT_EDITING_BETA)
    if compact and ctx.compact:
        edit: dict[str, Any] = {
            "type": "compact_20260112",
            "trigger": {"type": "input_tokens", "value": max(ctx.trigger, MIN_COMPACT_TRIGGER)},
        }
        if ctx.instructions:
            edit["instructions"] = ctx.instructions
        if ctx.pause:
            edit["pause_after_compaction"] = True
        edits.append(edit)
        betas.insert(0, COMPACT_BETA)
    return edits, betas


def holds_on_demand(messages: list[Message]) -> bool:
    """Whether any message carries a block from on-demand compaction (the first ones, in practice:
    such a block goes first and a later compaction replaces it)."""
    return any(r.kind == COMPACTION and r.origin == ORIGIN_ON_DEMAND for m in messages for r in m.reasoning)


def own_block(r: Reasoning) -> bool:
    """A compaction part Anthropic made (threshold or on-demand), which goes back verbatim; an
    OpenAI Responses item does not (its content is another provider's ciphertext)."""
    return r.origin != ORIGIN_OPENAI


def on_demand_params(params: dict[str, Any], instructions: str | None = None) -> dict[str, Any]:
    """An agent request's params as the compaction request: ``compaction`` added, and what the API
    does not take with it (``context_management``, ``thinking``: nothing is sampled) left out."""
    out = {k: v for k, v in params.items() if k not in ("context_management", "thinking", "diagnostics")}
    config: dict[str, Any] = {"type": "summarize"}
    if instructions and instructions.strip():
        config["instructions"] = instructions
    out["compaction"] = config
    return out


def on_demand_compaction(
    content: list[Any], usage: Usage, fields_of: Callable[[Any], dict[str, Any]]
) -> Compaction:
    """What an on-demand answer stands for: its ``compaction`` block, verbatim, in one assistant
    message (the documentation's swap puts the returned message where the summarized ones were),
    and its readable summary. A block with ``content: null`` is the documented failed compaction
    (the API would treat it as a no-op): nothing to apply, said."""
    for block in content:
        fields = fields_of(block)
        if fields.get("type") != COMPACTION:
            continue
        summary = fields.get("content")
        if not isinstance(summary, str) or not summary.strip():
            return Compaction([], "", usage, "the provider's compaction left no summary (content: null)")
        try:
            kept = provider_blocks.kept_json(fields)
        except provider_blocks.OutOfBounds as exc:
            return Compaction([], "", usage, f"{exc}: refused; nothing was compacted")
        part = Reasoning(kind=COMPACTION, data=kept, origin=ORIGIN_ON_DEMAND)
        return Compaction([Message(role="assistant", content="", reasoning=(part,))], summary, usage)
    return Compaction([], "", usage, "the answer held no compaction block")


def cleared_line(usage: Usage) -> str:
    """The run's line for what context editing cleared from a request ('' when nothing was)."""
    if not (usage.cleared_tool_uses or usage.cleared_input_tokens):
        return ""
    n = usage.cleared_tool_uses
    return (
        f"context editing cleared {n} old tool result{'s' if n != 1 else ''} "
        f"(~{usage.cleared_input_tokens:,} input tokens) from this request (applied_edits)"
    )


class Diagnosis:
    """The previous answer's id per endpoint and model, kept across runs of a process: the next
    agent request names it in ``diagnostics.previous_message_id`` (None on the first, to opt in)."""

    _last: dict[Hashable, str] = {}
    _lock = threading.Lock()

    @classmethod
    def previous(cls, key: Hashable) -> str | None:
        with cls._lock:
            return cls._last.get(key)

    @classmethod
    def answered(cls, key: Hashable, message_id: str | None) -> None:
        if message_id:
            with cls._lock:
                cls._last[key] = message_id
