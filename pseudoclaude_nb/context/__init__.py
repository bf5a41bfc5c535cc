"""Keeping a session's context under the window: one host, strategies as policies, their rules.

One ``ContextHost`` (``host``) per session owns every mechanism: the ``SharedState`` (anchor,
calibration, ledger, breaker, counters, pending tool batch, a declared hand-off, the window's
host notes), Layer 1 (the ``Spiller``) and the one replace step. It asks the current strategy
— a pure policy of the public API, ``pseudoclaude_nb.strategies`` — what to do at each point
of a run, and applies the answer (``apply``).

- the host and what it applies: ``host``, ``run`` (the runner's facade, ``NO_CONTEXT``),
  ``view`` (what a strategy sees), ``apply`` (actions → mechanisms), ``state``, ``settings``,
  ``reserves``, ``layer1`` (spill), ``layer2`` (summary), ``rollover`` (hand-off),
  ``provider_compaction`` (the provider's own), ``confirm``, ``undo``, ``pins``, ``plan``,
  ``host_tools``, ``limits``, ``cache``;
- the strategies: ``policies`` (compact, rollover and api, written with the public API),
  ``registry`` (which strategy a setting names: the only place that tells them apart by name)
  and ``names`` (the setting's syntax, checked without importing);
- pure rules: ``estimate`` (tokens without a tokenizer), ``spill`` (Layer 1: the preview,
  which results spill), ``summarize`` (Layer 2: the prompt and the cut), ``breaker``
  (automatic Layer 2's circuit breaker), ``rollover_budget`` (remind, fallback, rollover)
  and ``handoff`` (the four-section handoff and the new window's first message);
- ``manifest``: what a request holds, part by part, for ``%context``.

This ``__init__`` imports nothing: import each name from its module
(``context.host.ContextHost``, ``context.settings.CompactSettings``). A module that
needs only a pure rule (``context.estimate``: the runner, the providers, the steps) then
loads neither the strategies nor the tools and pydantic with it, and the tools, which the
host's hand-off imports, can import ``handoff`` without a cycle.
"""
