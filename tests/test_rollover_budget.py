"""The rollover budget (SPEC §9, pinned in §17): a pure function, checked branch by branch.

For a 200K window with the default reserves: hard limit 180,000, base limit 167,000, the
reminder due from 152,000 (15,000 before the base limit).
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pseudoclaude_nb.context.rollover_budget import BudgetAction, BudgetState, evaluate_budget, limits

WINDOW, OUTPUT, FALLBACK, REMIND = 200_000, 20_000, 13_000, 15_000
HARD, BASE = 180_000, 167_000


def state(current: int, **flags: bool) -> BudgetState:
    return BudgetState(WINDOW, OUTPUT, FALLBACK, REMIND, current, **flags)


CASES = [
    # (id, current tokens, flags, expected type, expected reason)
    ("declared wins below every limit", 1_000, {"explicit_rollover_declared": True}, "rollover", "model"),
    ("declared wins over the hard limit", 190_000, {"explicit_rollover_declared": True}, "rollover", "model"),
    (
        "declared wins in fallback",
        170_000,
        {"explicit_rollover_declared": True, "fallback_claimed": True},
        "rollover",
        "model",
    ),
    ("at the hard limit", HARD, {}, "rollover", "hard-limit"),
    ("past the hard limit, fallback never given", 199_999, {}, "rollover", "hard-limit"),
    ("at the base limit after fallback", BASE, {"fallback_claimed": True}, "rollover", "hard-limit"),
    ("between base and hard after fallback", 175_000, {"fallback_claimed": True}, "rollover", "hard-limit"),
    ("at the base limit", BASE, {}, "fallback", None),
    ("between base and hard", HARD - 1, {}, "fallback", None),
    ("fallback after the reminder", 170_000, {"reminder_claimed": True}, "fallback", None),
    ("remaining exactly the threshold", BASE - REMIND, {}, "remind", None),
    ("remaining under the threshold", BASE - 1, {}, "remind", None),
    ("remaining one over the threshold", BASE - REMIND - 1, {}, "continue", None),
    ("reminder already claimed", 160_000, {"reminder_claimed": True}, "continue", None),
    ("fallback claimed but back under the base limit", 100_000, {"fallback_claimed": True}, "continue", None),
    ("an empty window", 0, {}, "continue", None),
]


@pytest.mark.parametrize(
    ("current", "flags", "kind", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_budget_table(current: int, flags: dict, kind: str, reason: str | None) -> None:
    assert evaluate_budget(state(current, **flags)) == BudgetAction(kind, reason)  # type: ignore[arg-type]


def test_the_pinned_signature_and_defaults() -> None:
    s = BudgetState(
        context_window=128_000,
        output_reserve_tokens=20_000,
        fallback_reserve_tokens=13_000,
        reminder_threshold=15_000,
        current_tokens=80_000,
    )
    assert (s.explicit_rollover_declared, s.reminder_claimed, s.fallback_claimed) == (False, False, False)
    assert (s.hard_limit, s.base_limit, s.remind_at, s.remaining) == (108_000, 95_000, 80_000, 15_000)
    action = evaluate_budget(s)
    assert (action.type, action.reason) == ("remind", None)
    assert BudgetAction("continue").reason is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.current_tokens = 0  # type: ignore[misc]


def test_limits_for_gauges() -> None:
    assert limits(200_000) == {"remind": 152_000, "base": 167_000, "hard": 180_000}
    assert limits(128_000) == {"remind": 80_000, "base": 95_000, "hard": 108_000}
    # A window too small for the reminder's 15,000: it is due from the first request.
    assert limits(40_000)["remind"] == 0


SEVERITY = {"continue": 0, "remind": 1, "fallback": 2, "rollover": 3}


@given(
    a=st.integers(0, 250_000),
    b=st.integers(0, 250_000),
    reminded=st.booleans(),
    fallen=st.booleans(),
)
def test_more_tokens_never_mean_a_milder_action(a: int, b: int, reminded: bool, fallen: bool) -> None:
    low, high = sorted((a, b))
    flags = {"reminder_claimed": reminded, "fallback_claimed": fallen}
    first, second = evaluate_budget(state(low, **flags)), evaluate_budget(state(high, **flags))
    assert SEVERITY[first.type] <= SEVERITY[second.type]


@given(current=st.integers(0, 250_000), reminded=st.booleans(), fallen=st.booleans(), declared=st.booleans())
def test_each_stage_is_given_once_and_a_rollover_always_has_a_reason(
    current: int, reminded: bool, fallen: bool, declared: bool
) -> None:
    action = evaluate_budget(
        state(
            current, reminder_claimed=reminded, fallback_claimed=fallen, explicit_rollover_declared=declared
        )
    )
    if reminded:
        assert action.type != "remind"
    if fallen:
        assert action.type != "fallback"
    assert (action.reason is not None) == (action.type == "rollover")
    if declared:
        assert action == BudgetAction("rollover", "model")
