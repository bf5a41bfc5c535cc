"""Per-session calibration of the token estimate (SPEC §7) from consecutive usage anchors.

Between two responses the provider counted exactly the messages appended in between, so
their bytes over the anchors' difference is the session's bytes per token. The seed (3.5)
is the default, and the floor until the evidence is strong; a replace or a changed system
prompt breaks the pair. Without a tokenizer, "true" counts here come from a fixed ratio.
"""

from __future__ import annotations

import math

import pytest

from pseudoclaude_nb.context.estimate import (
    BYTES_PER_TOKEN,
    SAFETY,
    STRONG_BYTES,
    Calibration,
    estimate_tokens,
    message_bytes,
    tokens_for_bytes,
)
from pseudoclaude_nb.context.host import ContextHost
from pseudoclaude_nb.context.settings import CompactSettings
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import Message, Usage

PROSE = "The quick brown fox jumps over the lazy dog, and the session goes on. " * 40  # ~2.8 KB
CJK = "上下文窗口是编码智能体最稀缺的资源，模型每一次请求都要带上完整的消息历史。" * 30  # ~3.2 KB


def manager(system: str = "system prompt") -> ContextHost:
    context = ContextHost(Conversation(), CompactSettings(context_window=10**9))
    context.shared.configure(context.shared.settings, system=system, tools=[])
    return context


def play(context: ContextHost, text: str, steps: int, bytes_per_token: float, start: int = 1_000) -> int:
    """Append ``steps`` messages; after each, a usage anchor with counts at ``bytes_per_token``."""
    total = start
    for _ in range(steps):
        message = context.shared.conversation.add_user(text)
        total += math.ceil(message_bytes(message) / bytes_per_token)
        context.shared.on_usage(Usage(input_tokens=total), len(context.shared.conversation))
    return total


# --- the Calibration value ---------------------------------------------------------------------------


def test_the_seed_is_the_default():
    c = Calibration()
    assert c.ratio == BYTES_PER_TOKEN == 3.5 and c.observed is None


def test_weak_evidence_may_only_raise_the_estimate():
    sparse, dense = Calibration(), Calibration()
    for _ in range(2):
        sparse.observe(3_000, 3_000 // 5)  # 5 bytes per token: would lower the estimate
        dense.observe(3_000, 3_000 // 2)  # 2 bytes per token: raises it
    assert sparse.ratio == BYTES_PER_TOKEN
    assert dense.ratio == pytest.approx(2 / SAFETY)


def test_strong_evidence_moves_the_ratio_both_ways_with_a_safety_margin():
    c = Calibration()
    for _ in range(4):
        c.observe(STRONG_BYTES // 4, STRONG_BYTES // 4 // 5)
    assert c.observed == pytest.approx(5.0)
    assert c.ratio == pytest.approx(5.0 / SAFETY)  # a little high on tokens: the safe side


@pytest.mark.parametrize("sample", [(0, 10), (10, 0), (-5, 3), (1_000, 1_000), (10_000, 100)])
def test_samples_that_cannot_be_text_are_ignored(sample):
    c = Calibration()
    assert c.observe(*sample) is False
    assert c.samples == 0


def test_reset_forgets():
    c = Calibration()
    for _ in range(5):
        c.observe(5_000, 1_000)
    c.reset()
    assert c.ratio == BYTES_PER_TOKEN and c.samples == 0


# --- in the context manager ---------------------------------------------------------------------------


def test_consecutive_anchors_give_samples_of_the_messages_in_between():
    context = manager()
    context.shared.conversation.add_user("a" * 1_000)
    context.shared.on_usage(Usage(input_tokens=600), 1)
    assert context.shared.calibration.samples == 0  # one anchor: no pair yet
    m2 = context.shared.conversation.add_assistant("b" * 2_000)
    m3 = context.shared.conversation.add_user("c" * 1_000)
    context.shared.on_usage(Usage(input_tokens=600 + 700, output_tokens=0), 3)
    assert context.shared.calibration.samples == 1
    assert context.shared.calibration.bytes == message_bytes(m2) + message_bytes(m3)
    assert context.shared.calibration.tokens == 700


def test_output_tokens_count_in_the_anchor_pair():
    context = manager()
    context.shared.conversation.add_user("go")
    context.shared.conversation.add_assistant("x" * 700)
    context.shared.on_usage(Usage(input_tokens=100, output_tokens=200), 2)
    context.shared.conversation.add_user("y" * 700)
    context.shared.conversation.add_assistant("z" * 700)
    context.shared.on_usage(Usage(input_tokens=100 + 200 + 200, output_tokens=200), 4)
    # anchor 1 = 300 (prompt + its answer); anchor 2 = 700; in between: two messages.
    assert context.shared.calibration.tokens == 400


def test_a_replace_by_anyone_breaks_the_pair():
    context = manager()
    play(context, PROSE, 1, 4.4)
    # An edit (not the manager's own replace): another message now ends the last anchor.
    context.shared.conversation.replace("edit", [Message(role="user", content="edited " + PROSE)])
    play(context, PROSE, 1, 4.4, start=context.shared.anchor[0])  # a plausible count, yet not a pair
    assert context.shared.calibration.samples == 0
    play(context, PROSE, 1, 4.4, start=context.shared.anchor[0])
    assert context.shared.calibration.samples == 1


def test_the_managers_own_replace_breaks_the_pair():
    context = manager()
    play(context, PROSE, 2, 4.4)
    assert context.shared.calibration.samples == 1
    context.shared.reset_anchor(context.shared.conversation.messages())  # what a compaction or snapshot does
    play(context, PROSE, 1, 4.4, start=context.shared.anchor[0])
    assert context.shared.calibration.samples == 1


def test_a_new_system_prompt_breaks_the_pair():
    context = manager("first")
    play(context, PROSE, 1, 4.4)
    context.shared.configure(context.shared.settings, system="second, with a memory index", tools=[])
    play(context, PROSE, 1, 4.4, start=5_000)
    assert context.shared.calibration.samples == 0
    play(context, PROSE, 1, 4.4, start=context.shared.anchor[0])
    assert context.shared.calibration.samples == 1


def test_without_samples_the_estimate_is_the_seeds():
    context = manager()
    context.shared.conversation.add_user("x")
    context.shared.on_usage(Usage(input_tokens=1_000), 1)
    context.shared.conversation.add_user(PROSE)
    assert context.shared.estimate() == 1_000 + estimate_tokens([context.shared.conversation.last()])


@pytest.mark.parametrize(("text", "bytes_per_token"), [(PROSE, 4.4), (PROSE, 4.7), (CJK, 2.7), (PROSE, 3.2)])
def test_the_suffix_estimate_lands_within_the_target(text, bytes_per_token):
    """±15 %, never more than 5 % under, once a session has shown its ratio."""
    context = manager()
    play(context, text, 8, bytes_per_token)
    anchor = context.shared.anchor[0]
    new = context.shared.conversation.add_user(text)
    truth = math.ceil(message_bytes(new) / bytes_per_token)
    error = (context.shared.estimate() - anchor) / truth - 1
    assert -0.05 <= error <= 0.15, error
    seed_error = tokens_for_bytes(message_bytes(new)) / truth - 1
    assert abs(error) < abs(seed_error) or abs(seed_error) < 0.05


def test_a_dense_text_raises_the_estimate_early():
    context = manager()
    play(context, CJK, 3, 2.7)  # two samples of ~3 KB: weak evidence
    assert context.shared.calibration.ratio < BYTES_PER_TOKEN


def test_a_sparse_text_lowers_it_only_on_strong_evidence():
    context = manager()
    play(context, PROSE, 3, 4.6)
    assert context.shared.calibration.ratio == BYTES_PER_TOKEN
    play(context, PROSE, 5, 4.6, start=context.shared.anchor[0])
    assert context.shared.calibration.ratio > BYTES_PER_TOKEN


def test_a_reset_anchor_uses_the_calibrated_ratio():
    context = manager()
    play(context, PROSE, 8, 4.6)
    messages = context.shared.conversation.messages()
    context.shared.conversation.replace("edit", messages[-2:])
    seed = tokens_for_bytes(sum(message_bytes(m) for m in messages[-2:]) + len(b"system prompt"))
    assert context.shared.estimate() < seed  # prose: fewer tokens than bytes/3.5 says


def test_the_cost_per_step_stays_constant():
    """A sample reads only the messages between two anchors, never the history."""
    context = manager()
    for _ in range(200):
        context.shared.conversation.add_user("old")
    play(context, PROSE, 2, 4.4)
    real = context.shared.conversation.messages
    context.shared.conversation.messages = lambda: (_ for _ in ()).throw(AssertionError("history read"))  # type: ignore[method-assign]
    try:
        play(context, PROSE, 3, 4.4, start=context.shared.anchor[0])
        context.shared.estimate()
    finally:
        context.shared.conversation.messages = real  # type: ignore[method-assign]
