"""The strategy lab (issue 31): one long scripted task under every context strategy, measured.

``python -m pseudoclaude_nb lab`` (and ``notebooks/08_strategy_lab.ipynb``) plays the task of
``task`` through the real ``Agent`` with the lab's scripted model (``model``, with a
worst-case and a careful summarizer) under ``none`` and each strategy asked for (``arms``: the
registry's, and the person's own ``MODULE:CLASS``, issue 46), one arm at a time (``run``), and
reports side by side what it cost with and without prompt caching, how often the context was
replaced, its peak, and which must-keep facts the final context still holds under each
summarizer and with pins (``report``, ``plots``). Offline and deterministic: the same command
gives the same tables on any machine. ``real`` plays the same arms on a real model, each within
its share of a budget (``meter``), after printing what each is expected to cost.
"""

from .run import Arm, ArmResult, strategy_names

__all__ = ["Arm", "ArmResult", "strategy_names"]
