"""Keeping a session's context under the window: Layer 1, Layer 2, rollover and their rules.

One ``ContextManager`` per session composes a ``SharedState`` (anchor, calibration,
ledger, breaker, counters, pending tool batch), the Layer 1 ``Spiller`` and a
``ContextStrategy`` — ``CompactStrategy`` (Layer 2 summaries), ``RolloverStrategy``
(a fresh window with a handoff) or ``ProviderCompactionStrategy`` (the provider's own).

The package holds the run-time parts and, beside them, the pure rules they apply (plain
functions, testable without a model or disk):

- run time: ``manager``, ``state``, ``strategy``, ``settings``, ``reserves``, ``layer1``
  (the spiller), ``layer2`` (summaries), ``compact``, ``rollover`` and
  ``provider_compaction`` (the three strategies), ``confirm``, ``undo``, ``pins``, ``plan``, ``limits``, ``cache``;
- pure rules: ``estimate`` (tokens without a tokenizer), ``spill`` (Layer 1: the preview,
  which results spill), ``summarize`` (Layer 2: the prompt and the cut), ``breaker``
  (automatic Layer 2's circuit breaker), ``rollover_budget`` (remind, fallback, rollover)
  and ``handoff`` (the four-section handoff and the new window's first message);
- ``manifest``: what a request holds, part by part, for ``%context``.

This ``__init__`` imports nothing: import each name from its module
(``context.manager.ContextManager``, ``context.settings.CompactSettings``). A module that
needs only a pure rule (``context.estimate``: the runner, the providers, the steps) then
loads neither the strategies nor the tools and pydantic with it, and the tools, which the
rollover strategy imports, can import ``handoff`` without a cycle.
"""
