"""What an arm spends on a real model, and the budget that stops it (issue 46).

``Meter`` is one arm's account: every request the arm's agents send (agent steps, summaries,
the provider's own compaction on demand) goes through ``metered(provider, meter)``, which
asks the meter first and tells it the usage the provider reported after. Before a request
the meter prices what the request is expected to cost — its estimated prompt (the part the
arm's previous request of the same kind sent is expected from the prompt cache, the rest is
written to it, at the model's prices) and an answer as long as the longest of its kind so
far (at least ``MIN_ANSWER``) — and refuses it with ``BudgetReached`` when what the arm has
spent plus that would pass the arm's budget. The run stops there as after any refused
request; the lab marks the arm ``stopped`` and goes on with the next.

The wrapper keeps the provider's capabilities (``providers.base``: they are checked with
``isinstance``, so each is a member of the wrapper's own class, made for the capabilities
the provider has) and adds nothing else: the request goes out exactly as a run of
``%agent`` sends it, prompt-cache breakpoints and all.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..context.estimate import estimate_request
from ..cost import Spend, money, request_dollars
from ..errors import PseudoClaudeError
from ..messages import Usage
from ..providers.base import (
    Compaction,
    CompactsOnDemand,
    ManagesContext,
    Provider,
    RefusesBlocks,
    Request,
    Response,
    ServerContext,
    StreamEvent,
    ToolCallStart,
    UsageEvent,
)
from .model import Paid

# The answer the meter expects before it has seen one of that kind: a step's tool call and a
# sentence or two; a summary of a screen or two.
MIN_ANSWER = {"agent": 400, "summary": 1_500, "memory": 400}


class BudgetReached(PseudoClaudeError):
    """An arm's next request could pass its budget: not sent; the arm stops here."""


@dataclass
class Meter:
    """One arm's account on a real model: what it asked, was paid, and may still spend."""

    model: str  # the model the requests are priced as (``prices.json``)
    cap: float  # the arm's budget, US dollars
    requests: list[Request] = field(default_factory=list)  # every request sent, in order
    paid: list[Paid] = field(default_factory=list)
    summaries: int = 0
    handoffs: int = 0  # answers that called new_context
    spent: float = 0.0
    _longest: dict[str, int] = field(default_factory=dict)  # output tokens, by purpose
    _last: dict[str, tuple[Request, int]] = field(default_factory=dict)  # by purpose, with its estimate

    def provider(self, inner: Provider) -> Provider:
        return metered(inner, self)

    def spend(self, price_model: str) -> Spend:
        out = Spend()
        for paid in self.paid:
            out.add(paid.usage, price_model)
        return out

    # --- before and after a request --------------------------------------------------------

    def admit(self, request: Request) -> None:
        """Refuse ``request`` (``BudgetReached``) when its expected cost could pass the budget."""
        expected, tokens = self.expected(request)
        if self.spent + expected > self.cap:
            raise BudgetReached(
                f"stopped at the budget: {money(self.spent)} of the arm's {money(self.cap)} spent after "
                f"{len(self.paid)} requests, and the next ({request.purpose}, ~{tokens:,} prompt tokens) "
                f"is expected to cost {money(expected)}; nothing more was sent"
            )
        self._last[request.purpose] = (request, tokens)
        self.requests.append(request)
        if request.purpose == "summary":
            self.summaries += 1

    def expected(self, request: Request) -> tuple[float, int]:
        """(dollars, prompt tokens) the request is expected to cost at ``model``'s prices."""
        tokens = estimate_request(request.system, request.messages, request.tools)
        read = 0
        last = self._last.get(request.purpose)
        if last is not None and _continues(last[0], request):
            read = min(last[1], tokens)
        answer = max(self._longest.get(request.purpose, 0), MIN_ANSWER.get(request.purpose, 400))
        usage = Usage(
            cache_creation_input_tokens=tokens - read, cache_read_input_tokens=read, output_tokens=answer
        )
        dollars = request_dollars(usage, self.model)
        return (dollars if dollars is not None else 0.0), tokens

    def took(self, request: Request, usage: Usage | None, calls: list[str]) -> None:
        """The provider answered ``request`` with ``usage`` (None: it reported none) and ``calls``."""
        if "new_context" in calls:
            self.handoffs += 1
        if usage is None:
            return
        self.paid.append(Paid(request.purpose, usage))
        self.spent += request_dollars(usage, self.model) or 0.0
        out = usage.output_tokens + usage.compaction_output_tokens
        self._longest[request.purpose] = max(self._longest.get(request.purpose, 0), out)


def _continues(before: Request, now: Request) -> bool:
    """Whether ``now`` starts with everything ``before`` sent: the prefix a cache holds."""
    if before.system != now.system or before.tools != now.tools or len(before.messages) > len(now.messages):
        return False
    return all(a.id == b.id for a, b in zip(before.messages, now.messages, strict=False))


# --- the wrapper -------------------------------------------------------------------------------


class Metered:
    """A provider whose every request the meter admits first and is told about after."""

    def __init__(self, inner: Provider, meter: Meter) -> None:
        self.inner = inner
        self.meter = meter
        self.name = inner.name
        self.model = inner.model
        self.context_window = inner.context_window
        self.max_output_tokens = inner.max_output_tokens

    def __repr__(self) -> str:
        return f"Metered({self.inner!r}, {money(self.meter.spent)} of {money(self.meter.cap)})"

    def stream(self, request: Request) -> Iterator[StreamEvent]:
        self.meter.admit(request)
        usage: Usage | None = None
        calls: list[str] = []
        try:
            for event in self.inner.stream(request):
                if isinstance(event, UsageEvent):
                    usage = event.usage
                elif isinstance(event, ToolCallStart):
                    calls.append(event.name)
                yield event
        finally:  # a broken stream was paid for as far as it said
            self.meter.took(request, usage, calls)

    def complete(self, request: Request) -> Response:
        self.meter.admit(request)
        response = self.inner.complete(request)
        self.meter.took(request, response.usage, [c.name for c in response.tool_calls])
        return response


class _ServerContext:
    """``ManagesContext``: what ``--strategy api`` sets before each request reaches the provider."""

    inner: Any

    @property
    def server_context(self) -> ServerContext | None:
        return self.inner.server_context

    @server_context.setter
    def server_context(self, value: ServerContext | None) -> None:
        self.inner.server_context = value


class _OnDemand:
    """``CompactsOnDemand``: the provider's compaction when asked, metered as a summary."""

    inner: Any
    meter: Meter

    def compact_on_demand(self, request: Request) -> Compaction:
        summary = replace(request, purpose="summary")  # the meter counts it as a summary
        self.meter.admit(summary)
        compaction: Compaction = self.inner.compact_on_demand(request)
        self.meter.took(summary, compaction.usage, [])
        return compaction


class _RefusesBlocks:
    """``RefusesBlocks``: why the last answer's compaction block was not kept."""

    inner: Any

    @property
    def refused_block(self) -> str | None:
        return self.inner.refused_block


_CLASSES: dict[tuple[type, ...], type] = {}


def metered(inner: Provider, meter: Meter) -> Provider:
    """``inner`` behind ``meter``, with exactly the capabilities ``inner`` has."""
    mixins = tuple(
        mixin
        for capability, mixin in (
            (ManagesContext, _ServerContext),
            (CompactsOnDemand, _OnDemand),
            (RefusesBlocks, _RefusesBlocks),
        )
        if isinstance(inner, capability)
    )
    cls = _CLASSES.get(mixins)
    if cls is None:
        cls = _CLASSES[mixins] = type("Metered", (*mixins, Metered), {})
    provider: Provider = cls(inner, meter)
    return provider


__all__ = ["BudgetReached", "Meter", "metered"]
