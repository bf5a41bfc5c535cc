"""Token estimates without a tokenizer: UTF-8 bytes / 3.5 (the articles' rule), calibrated.

There is no offline tokenizer for current Claude models. Against cl100k, bytes/3.5
over-estimates English by ~26% and Python by ~34%, and under-estimates Chinese and dense
JSON by ~21% (``bench/results.md``). ``Calibration`` refines the ratio per session from
consecutive usage anchors: between two responses the provider counted exactly the
messages appended in between, so their bytes over the anchors' difference is this
session's bytes per token. The seed 3.5 stays the default (no evidence yet) and, until
the evidence is strong, the floor for safety: weak evidence may only *raise* the estimate
(a denser text, such as Chinese); lowering it (English, code) needs 4 observations over
16 KB. The learned ratio is then used 3% conservatively.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..messages import Message
from ..nesting import encoded_size

BYTES_PER_TOKEN = 3.5

# issue-14: an image's tokens. Anthropic documents tokens = width * height / 750 and resizes
# anything beyond ~1.15 megapixels (1,568 px on the long edge) first, so one image costs at
# most ~1,600 tokens. OpenAI documents 765 tokens for a 1024x1024 image in high detail (85
# base + 4 tiles of 170). The estimate takes the larger of the two, so it errs high on both.
IMAGE_TOKENS_CAP = 1_600
IMAGE_TOKENS_OPENAI = 765


def image_tokens(width: int, height: int) -> int:
    """Anthropic's rule, capped (an image of unknown size counts as the cap)."""
    if width <= 0 or height <= 0:
        return IMAGE_TOKENS_CAP
    return min(-(-width * height // 750), IMAGE_TOKENS_CAP)


def image_part_bytes(width: int, height: int) -> int:
    """An image's estimate in the estimator's unit (bytes at the seed ratio)."""
    return int(max(image_tokens(width, height), IMAGE_TOKENS_OPENAI) * BYTES_PER_TOKEN)


def message_bytes(msg: Message) -> int:
    n = len(msg.role) + len(msg.content.encode("utf-8"))
    for call in msg.tool_calls:
        # At any depth: arguments a provider sent are at most MAX_ARGUMENT_DEPTH deep, but a
        # message built by hand or read from an older log may nest past json's recursion limit.
        n += len(call.name.encode("utf-8")) + encoded_size(call.arguments)
    if msg.tool_result is not None:
        n += len(msg.tool_result.content.encode("utf-8"))
    for r in msg.reasoning:  # sent back with the message, so it fills the window too
        n += len(r.text.encode("utf-8")) + len(r.data or "")
    for part in msg.parts:  # issue-14: sent as an image, not as its bytes
        n += image_part_bytes(part.width, part.height)
    return n


# Calibration (see the module docstring): a sample is the bytes of the messages between two
# anchors and the anchors' difference in tokens.
MIN_RATIO, MAX_RATIO = 1.5, 8.0  # a sample outside this is not text (a changed system prompt…)
WEAK_SAMPLES, WEAK_BYTES = 2, 4_000  # from here the estimate may go up
STRONG_SAMPLES, STRONG_BYTES = 4, 16_000  # from here it may go down too
SAFETY = 1.03  # the learned ratio is divided by this: estimates err 3% high


def tokens_for_bytes(n: int, ratio: float = BYTES_PER_TOKEN) -> int:
    return int(-(-n // ratio))  # ceiling: never estimate low


def estimate_tokens(messages: Iterable[Message], ratio: float = BYTES_PER_TOKEN) -> int:
    return tokens_for_bytes(sum(message_bytes(m) for m in messages), ratio)


def estimate_text(text: str, ratio: float = BYTES_PER_TOKEN) -> int:
    return tokens_for_bytes(len(text.encode("utf-8")), ratio)


def estimate_request(
    system: str, messages: Iterable[Message], tools: list[dict[str, Any]], ratio: float = BYTES_PER_TOKEN
) -> int:
    """The full request: system prompt and tool schemas count against the window too."""
    schema_bytes = encoded_size(tools) if tools else 0
    return (
        estimate_tokens(messages, ratio)
        + estimate_text(system, ratio)
        + tokens_for_bytes(schema_bytes, ratio)
    )


class Calibration:
    """Bytes per token of one session, learned from consecutive usage anchors."""

    def __init__(self, seed: float = BYTES_PER_TOKEN) -> None:
        self.seed = seed
        self.bytes = 0
        self.tokens = 0
        self.samples = 0

    def observe(self, bytes_between: int, tokens_between: int) -> bool:
        """Add one sample; False (and ignored) when it cannot be text alone."""
        if bytes_between <= 0 or tokens_between <= 0:
            return False
        if not MIN_RATIO <= bytes_between / tokens_between <= MAX_RATIO:
            return False
        self.bytes += bytes_between
        self.tokens += tokens_between
        self.samples += 1
        return True

    @property
    def observed(self) -> float | None:
        """The session's bytes per token so far (None before any sample)."""
        return self.bytes / self.tokens if self.tokens else None

    @property
    def ratio(self) -> float:
        """The ratio estimates use now."""
        if self.samples < WEAK_SAMPLES or self.bytes < WEAK_BYTES:
            return self.seed
        learned = self.bytes / self.tokens / SAFETY
        if self.samples < STRONG_SAMPLES or self.bytes < STRONG_BYTES:
            return min(self.seed, learned)
        return learned

    def reset(self) -> None:
        self.bytes = self.tokens = self.samples = 0
