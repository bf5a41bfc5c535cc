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

Per content kind (issue 32): bytes/3.5 is far low on dense text. Against a real tokenizer
(Gemma 3, llama.cpp ``/tokenize``) a server log is 1.8 bytes a token (−48 % at 3.5), a
file listing 2.6 (−25 %), ``git log --stat`` 2.5 (−28 %), hex ids 1.1, dense JSON 2.3.
So on a local server (``SharedState.digits``, set per run from the provider) a text
counts at least its *pieces* (``dense_tokens``): a word (two when long or camel-cased),
each punctuation mark, each newline or run of whitespace, each CJK character (cl100k's
rate: ~1 token a character; Gemma's is lower) and each digit (most open-weights
tokenizers split every digit), and the chat template's framing is added (``*_FRAME_TOKENS``,
``TOOLS_PREAMBLE_TOKENS``). In the estimator's unit a text is then
``max(bytes, pieces × 3.5)``: prose and code keep bytes/3.5 (high by 20–33 %), the dense
kinds rise to within −5 %…+20 % of Gemma's count (logs +6.6 %, file listing +4.9 %, hex
+3.3 %, JSON +17.8 %; ``tests/test_local_estimate.py``, ``docs/context.md``). Tool schemas
stay at bytes/3.5 (+12 % on Gemma): their JSON keys are whole words to a tokenizer.

Hosted models keep bytes/3.5 and their session calibration (``DIGITS_HOSTED``): counting
their dense kinds too (digits up to three a token, as cl100k) brings the demo's log page
from −46 % to −10 % of cl100k, but moves every hosted session's compaction points (the
quickstart compacts twice); that is a separate change.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from functools import lru_cache
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


# Content kinds (see the module docstring): the pieces a tokenizer cannot merge much.
DENSE_SAFETY = 1.1  # marks and digits merge less than words: their count runs a little under
_WORD = re.compile(r"[A-Za-z]+")
_LONG_WORD = re.compile(r"[A-Za-z]{7,}")  # often two tokens
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")  # a case change splits a word
_DIGITS = re.compile(r"[0-9]+")
# Digits a token holds, the estimate's profile of a server's tokenizer: one in those of most
# open-weights models (Gemma, Llama 2, Mistral, Qwen); 0 for a hosted model, whose texts
# count by their bytes (see the module docstring). ``SharedState.digits`` is the session's.
DIGITS_HOSTED, DIGITS_LOCAL = 0, 1
# ASCII marks: what is neither space, letter, digit nor non-ASCII (``[^\sA-Za-z0-9\x80-\U0010ffff]``),
# spelled as the ASCII ranges it leaves: the same characters (tests/test_compact_estimate.py
# checks every code point), and ``re`` compiles it in ~0.1 ms, not ~7 ms (a class reaching
# U+10FFFF is built as a big charset), on every kernel's first run (issue 47).
_PUNCT = re.compile(r"[\x00-\x08\x0e-\x1b!-/:-@\[-`{-\x7f]")
_SPACE = re.compile(r"\s{2,}|\n")  # indentation, column padding, line ends
_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
_WORDS = (_WORD, _LONG_WORD, _CAMEL)
_MARKS = (_PUNCT, _SPACE, _CJK)


def dense_tokens(text: str, digits: int = DIGITS_LOCAL) -> float:
    """A text's tokens counted by its pieces (words, digits, marks, line ends, CJK characters);
    ``digits``: how many digits one token holds."""
    words = sum(len(p.findall(text)) for p in _WORDS)
    marks = sum(len(p.findall(text)) for p in _MARKS)
    if digits <= 1:
        marks += sum(1 for c in text if "0" <= c <= "9")
    else:
        marks += sum(-(-len(run) // digits) for run in _DIGITS.findall(text))
    size = len(text.encode("utf-8"))
    ascii_size = len(text.encode("ascii", "ignore"))
    cjk = len(_CJK.findall(text))
    other = max(0, size - ascii_size - 3 * cjk)  # other non-ASCII text: ~3 bytes a token
    return words + (marks + other / 3) * DENSE_SAFETY


@lru_cache(maxsize=4_096)  # a conversation's texts are estimated again at every step
def _dense_units(text: str, digits: int) -> int:
    size = len(text.encode("utf-8"))
    return max(size, math.ceil(dense_tokens(text, digits) * BYTES_PER_TOKEN))


def text_units(text: str, digits: int = DIGITS_HOSTED) -> int:
    """A text in the estimator's unit: its UTF-8 bytes, or on a local server (``digits`` ≥ 1)
    more for a dense kind (logs, JSON, listings, numbers, CJK) so that units / 3.5 is not far
    under the real count."""
    if digits <= 0:
        return len(text.encode("utf-8"))
    return _dense_units(text, digits)


def _arguments_units(arguments: Any, digits: int) -> int:
    # At any depth: arguments a provider sent are at most MAX_ARGUMENT_DEPTH deep, but a
    # message built by hand or read from an older log may nest past json's recursion limit.
    size = encoded_size(arguments)
    if digits <= 0:
        return size
    try:
        return text_units(json.dumps(arguments, ensure_ascii=False), digits)
    except (RecursionError, ValueError, TypeError):
        return size


def message_bytes(msg: Message, digits: int = DIGITS_HOSTED) -> int:
    """A message in the estimator's unit (bytes, raised for dense kinds: ``text_units``)."""
    n = len(msg.role) + text_units(msg.content, digits)
    for call in msg.tool_calls:
        n += len(call.name.encode("utf-8")) + _arguments_units(call.arguments, digits)
    if msg.tool_result is not None:
        n += text_units(msg.tool_result.content, digits)
    for r in msg.reasoning:  # sent back with the message, so it fills the window too
        n += text_units(r.text, digits) + len(r.data or "")
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


# A local server renders the request through its chat template, and those tokens count too
# (issue 32, live: 710 estimated, 833 counted on a request of one message; 1,063 and 1,532
# on one with eight calls and their results). Measured with Gemma 3's tokenizer on its
# Hermes-style tools template: a turn's markers ("<start_of_turn>user\n" … "<end_of_turn>\n")
# ~5 tokens, a tool call's ("\n<tool_call>\n{"name": …, "arguments": …}\n</tool_call>") 21, a
# result's ("<tool_response>\n" … "\n</tool_response>" in its own turn) 16, the tools'
# preamble ("# Tools … <tools></tools> … <tool_call>") ~85 (more in Qwen's). Hosted models'
# framing is in their anchors and is not added (their estimate stays bytes / 3.5).
MESSAGE_FRAME_TOKENS, CALL_FRAME_TOKENS, RESULT_FRAME_TOKENS = 6, 21, 16
TOOLS_PREAMBLE_TOKENS = 120


def estimate_tokens(
    messages: Iterable[Message], ratio: float = BYTES_PER_TOKEN, digits: int = DIGITS_HOSTED
) -> int:
    units = frames = 0
    for m in messages:
        units += message_bytes(m, digits)
        if digits > 0:
            frames += RESULT_FRAME_TOKENS if m.tool_result is not None else MESSAGE_FRAME_TOKENS
            frames += CALL_FRAME_TOKENS * len(m.tool_calls)
    return tokens_for_bytes(units, ratio) + frames


def estimate_text(text: str, ratio: float = BYTES_PER_TOKEN, digits: int = DIGITS_HOSTED) -> int:
    return tokens_for_bytes(text_units(text, digits), ratio)


def estimate_request(
    system: str,
    messages: Iterable[Message],
    tools: list[dict[str, Any]],
    ratio: float = BYTES_PER_TOKEN,
    digits: int = DIGITS_HOSTED,
) -> int:
    """The full request: system prompt and tool schemas count against the window too."""
    schema_bytes = encoded_size(tools) if tools else 0
    preamble = TOOLS_PREAMBLE_TOKENS if tools and digits > 0 else 0
    return (
        estimate_tokens(messages, ratio, digits)
        + estimate_text(system, ratio, digits)
        + tokens_for_bytes(schema_bytes, ratio)
        + preamble
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
