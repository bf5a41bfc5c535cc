"""What the wire providers know of each model: window, output cap and what it accepts.

A small table matched by the longest model-name prefix, so dated snapshots and
``-latest`` aliases find their family, and ``openai/gpt-4o`` behind a router is still
gpt-4o. An unknown model gets the provider's defaults; ``--context-window``
(``PseudoClaude.context_window``) and ``PseudoClaude.max_output_tokens`` override the
window and the output cap. The table must never guess high: a window larger than the real
one means compaction comes too late, an output cap larger than the real one means every
request is refused ("max_tokens: 20000 > 16384").

Every request's output cap is clamped to the model's by the providers when they build
the wire body (``clamp_output``), whatever its caller asked for — so a summary that asks
for ``summary_reserve`` tokens gets ``min(summary_reserve, cap)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

WireProvider = Literal["anthropic", "openai"]
# How a model thinks when asked to: Anthropic's manual budget ("enabled" + budget_tokens),
# Anthropic's adaptive thinking, OpenAI-style ``reasoning_effort``; None: it cannot.
Thinking = Literal["budget", "adaptive", "effort"] | None


@dataclass(frozen=True)
class ModelInfo:
    window: int  # context window, tokens
    output: int  # the largest max_tokens the API accepts
    images: bool = True
    thinking: Thinking = None
    # The output cap goes out as max_completion_tokens (OpenAI's reasoning models refuse
    # max_tokens; OpenAI and Azure v1 accept it for every model of theirs). Other servers
    # may not know it, so unknown models get max_tokens.
    completion_tokens: bool = False
    known: bool = True


DEFAULT_MODELS: dict[WireProvider, str] = {
    # The current Sonnet (Nov 2026): the speed/intelligence middle of Anthropic's lineup.
    "anthropic": "claude-sonnet-5-5",
    "openai": "gpt-5.5",
}

# An unknown model: the provider's usual window, and an output cap every current model of
# that protocol accepts (the agent asks for 8,192 by default).
DEFAULTS: dict[WireProvider, ModelInfo] = {
    "anthropic": ModelInfo(200_000, 8_192, known=False),
    "openai": ModelInfo(128_000, 8_192, known=False),
}

KNOWN: dict[WireProvider, dict[str, ModelInfo]] = {
    "anthropic": {
        # The 5.x generation: a native 1M window, adaptive thinking.
        "claude-fable-5": ModelInfo(1_000_000, 64_000, thinking="adaptive"),
        "claude-mythos-5": ModelInfo(1_000_000, 64_000, thinking="adaptive"),
        "claude-opus-5": ModelInfo(1_000_000, 64_000, thinking="adaptive"),
        "claude-sonnet-5": ModelInfo(1_000_000, 64_000, thinking="adaptive"),
        "claude-haiku-5": ModelInfo(1_000_000, 64_000, thinking="adaptive"),
        # 4.x: 200K unless the 1M beta is requested, which this package does not do.
        "claude-opus-4-6": ModelInfo(200_000, 64_000, thinking="adaptive"),
        "claude-opus-4-7": ModelInfo(200_000, 64_000, thinking="adaptive"),
        "claude-opus-4-8": ModelInfo(200_000, 64_000, thinking="adaptive"),
        "claude-sonnet-4-6": ModelInfo(200_000, 64_000, thinking="adaptive"),
        "claude-opus-4-5": ModelInfo(200_000, 64_000, thinking="budget"),
        "claude-opus-4": ModelInfo(200_000, 32_000, thinking="budget"),
        "claude-sonnet-4": ModelInfo(200_000, 64_000, thinking="budget"),
        "claude-haiku-4": ModelInfo(200_000, 64_000, thinking="budget"),
        "claude-3-7-sonnet": ModelInfo(200_000, 64_000, thinking="budget"),
        # Output caps seen in the API's own errors (FIELD-NOTES): 3.5 8,192; 3 Haiku/Opus 4,096.
        "claude-3-5": ModelInfo(200_000, 8_192),
        "claude-3": ModelInfo(200_000, 4_096),
    },
    "openai": {
        "gpt-5.5": ModelInfo(1_050_000, 128_000, thinking="effort", completion_tokens=True),
        "gpt-5.4": ModelInfo(1_050_000, 128_000, thinking="effort", completion_tokens=True),
        # gpt-5 .. 5.2: the 400K window includes 128K of output; prompts stop at 272K.
        "gpt-5": ModelInfo(272_000, 128_000, thinking="effort", completion_tokens=True),
        "gpt-4.1": ModelInfo(1_047_576, 32_768, completion_tokens=True),
        # 16,384 completion tokens at most (FIELD-NOTES: seen in the API's errors).
        "gpt-4o": ModelInfo(128_000, 16_384, completion_tokens=True),
        "o1": ModelInfo(200_000, 100_000, thinking="effort", completion_tokens=True),
        "o3": ModelInfo(200_000, 100_000, thinking="effort", completion_tokens=True),
        "o4-mini": ModelInfo(200_000, 100_000, thinking="effort", completion_tokens=True),
        # DeepSeek: thinking mode returns reasoning_content, which a tool loop must pass back.
        "deepseek-chat": ModelInfo(128_000, 8_192, images=False),
        "deepseek-reasoner": ModelInfo(128_000, 64_000, images=False),
    },
}


def default_model(provider: WireProvider) -> str:
    return DEFAULT_MODELS[provider]


def model_info(provider: WireProvider, model: str) -> ModelInfo:
    """The entry of ``model``: the longest matching known prefix, else the provider's defaults."""
    table = KNOWN[provider]
    name = model.lower().rsplit("/", 1)[-1]  # "openai/gpt-4o" behind a router is still gpt-4o
    matches = [prefix for prefix in table if name.startswith(prefix)]
    if not matches:
        return DEFAULTS[provider]
    return table[max(matches, key=len)]


def context_window_for(provider: WireProvider, model: str) -> int:
    return model_info(provider, model).window


def output_cap_for(provider: WireProvider, model: str) -> int:
    return model_info(provider, model).output


def clamp_output(asked: int, cap: int) -> int:
    """The output cap that goes on the wire: what was asked, never more than the model takes."""
    return max(1, min(asked, cap)) if cap > 0 else max(1, asked)
