"""Benchmarks of SPEC §15, the token estimator and the context-cost curve (not tests).

``python -m bench`` runs them all and writes ``bench/results.md``; ``--quick`` runs small
sizes for CI. Each module measures one family: ``storage`` (appends, replace, resume,
replay, line size), ``overhead`` (per step), ``catalog`` (listing), ``history`` (search),
``tokens`` (estimator vs cl100k), ``cost`` (the context-cost curve).
"""
