"""Which arms a lab run plays: ``none``, the built-in strategies, and the person's own.

``--arms compact,rollover,api,MODULE:CLASS`` (and ``run_lab(arms=...)``) names each arm by
its strategy setting, as ``%agent --strategy`` takes it. A ``MODULE:CLASS`` (or the name of an
installed strategy) is loaded here, once, before any arm plays, from the folder the lab was
started in (the notebook's folder; ``registry.load_strategy``). So an arm that does not
import, is not a ``Strategy``, or would carry another arm's name is one ``ConfigError`` line
before anything runs. Tables, plots and the JSON show each arm by its strategy's ``name``.

Each arm's agents load the strategy through ``loader(folder)``: from that folder, not from
the temporary workspace the arm plays in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..context.names import BUILT_IN_NAMES
from ..context.registry import load_strategy
from ..errors import ConfigError
from ..strategies import Strategy

NONE = "none"  # the same agent in a window the task never fills: nothing is ever replaced
OWN = "MODULE:CLASS (a Strategy subclass in a file of this folder)"


@dataclass(frozen=True)
class ArmSpec:
    """One arm as asked for: how it is shown, and the strategy setting its runs get."""

    name: str  # ``none``, a built-in's name, or the person's strategy's ``name``
    setting: str  # ``PseudoClaude.strategy`` for its runs (``compact`` for ``none``)


def built_in() -> list[ArmSpec]:
    """``none`` and every built-in strategy, in the registry's order."""
    from ..context.policies import BUILT_IN

    return [ArmSpec(NONE, "compact"), *(ArmSpec(name, name) for name in BUILT_IN)]


def loader(folder: Path) -> Callable[[str, Path | None], Strategy]:
    """What the arms' agents load their strategy with: a ``MODULE:CLASS`` from ``folder``
    (the person's), whatever workspace the agent plays in."""

    def load(setting: str, _workspace: Path | None) -> Strategy:
        return load_strategy(setting, folder)

    return load


def resolve(asked: Sequence[str], folder: Path) -> list[ArmSpec]:
    """The arms ``asked`` names, ``none`` first (the baseline every ratio is against); each
    strategy of the person's loaded now. ``ConfigError``, one line, for the first that cannot be."""
    known = {a.name: a for a in built_in()}
    arms = [known[NONE]]
    for raw in asked:
        setting = raw.strip()
        if not setting or setting == NONE:
            continue
        if setting.lower() in BUILT_IN_NAMES and setting.lower() in known:
            arm = known[setting.lower()]
        else:
            arm = _own(setting, folder, known)
        clash = next((a for a in arms if a.name == arm.name), None)
        if clash is not None and clash.setting == arm.setting:
            continue  # named twice: one arm
        if clash is not None:
            raise ConfigError(
                f"--arms: {setting} and {clash.setting} are both named {arm.name!r}, and the tables "
                f'tell arms apart by name: give yours another (name = "..." in the class)'
            )
        arms.append(arm)
    return arms


def _own(setting: str, folder: Path, known: dict[str, ArmSpec]) -> ArmSpec:
    if ":" not in setting:
        try:
            strategy = load_strategy(setting, folder)  # an installed strategy's entry point
        except ConfigError:
            choices = ", ".join(known)
            raise ConfigError(f"--arms: unknown {setting}; choose from {choices}, or {OWN}") from None
    else:
        try:
            strategy = load_strategy(setting, folder)
        except ConfigError as exc:
            raise ConfigError(f"--arms: {exc}") from None
    name = strategy.name
    if name == NONE or name in known and known[name].setting != setting:
        raise ConfigError(
            f"--arms: {setting} is named {name!r}, which is a built-in arm's name, and the tables "
            f'tell arms apart by name: give yours another (name = "..." in the class)'
        )
    return ArmSpec(name, setting)


__all__ = ["NONE", "ArmSpec", "built_in", "loader", "resolve"]
