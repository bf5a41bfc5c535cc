"""The strategy lab (issue 31): one long scripted task under every context strategy, measured.

``python -m pseudoclaude_nb lab`` (and ``notebooks/08_strategy_lab.ipynb``) plays the task of
``task`` through the real ``Agent`` with the lab's scripted model (``model``) under ``none``
and each strategy of the registry (``run``), and reports side by side what it cost with and
without prompt caching, how often the context was replaced, its peak, and which must-keep
facts the final context still holds with and without pins (``report``). Offline and
deterministic: the same command gives the same tables on any machine.
"""

from .run import Arm, ArmResult, strategy_names

__all__ = ["Arm", "ArmResult", "strategy_names"]
