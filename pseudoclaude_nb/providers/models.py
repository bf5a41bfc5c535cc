"""Default models and known context windows of the wire providers.

A small table matched by the longest model-name prefix, so dated snapshots and
``-latest`` aliases find their family. An unknown model gets the provider's default
window; ``--context-window`` (``PseudoClaude.context_window``) overrides both. The table
must never guess high: a window larger than the real one means compaction comes too
late and the provider refuses the prompt.
"""

from __future__ import annotations

from typing import Literal

WireProvider = Literal["anthropic", "openai"]

DEFAULT_MODELS: dict[WireProvider, str] = {
    # The current Sonnet (Nov 2026): the speed/intelligence middle of Anthropic's lineup.
    "anthropic": "claude-sonnet-5-5",
    "openai": "gpt-5.5",
}

DEFAULT_WINDOWS: dict[WireProvider, int] = {
    "anthropic": 200_000,
    "openai": 128_000,
}

KNOWN_WINDOWS: dict[WireProvider, dict[str, int]] = {
    "anthropic": {
        # The 5.x generation has a native 1M window (no beta header needed).
        "claude-fable-5": 1_000_000,
        "claude-opus-5": 1_000_000,
        "claude-sonnet-5": 1_000_000,
        "claude-haiku-5": 1_000_000,
        # 4.x: 200K unless the 1M beta is requested, which this package does not do.
        "claude-opus-4": 200_000,
        "claude-sonnet-4": 200_000,
        "claude-haiku-4": 200_000,
        "claude-3": 200_000,
    },
    "openai": {
        "gpt-5.5": 1_050_000,
        "gpt-5.4": 1_050_000,
        # gpt-5 .. 5.2: the 400K window includes 128K of output; prompts stop at 272K.
        "gpt-5": 272_000,
        "gpt-4.1": 1_047_576,
        "gpt-4o": 128_000,
        "o3": 200_000,
        "o4-mini": 200_000,
    },
}


def default_model(provider: WireProvider) -> str:
    return DEFAULT_MODELS[provider]


def context_window_for(provider: WireProvider, model: str) -> int:
    """The window of ``model``: the longest matching known prefix, else the provider default."""
    table = KNOWN_WINDOWS[provider]
    name = model.lower().rsplit("/", 1)[-1]  # "openai/gpt-4o" behind a router is still gpt-4o
    matches = [prefix for prefix in table if name.startswith(prefix)]
    if not matches:
        return DEFAULT_WINDOWS[provider]
    return table[max(matches, key=len)]
