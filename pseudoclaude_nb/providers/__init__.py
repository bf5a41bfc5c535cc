"""Providers: one file per wire protocol, chosen by name.

The wire providers are imported only when asked for: the SDK costs import time that
the offline providers (offline, demo, scripted) do not need; and the scripted one (its
script models) only when a script is played, not on a wire run's way to its first request.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .base import Provider, Request, Response, StreamEvent

if TYPE_CHECKING:
    from ..config import RunConfig
    from .openai_compat import OpenAIProvider
    from .scripted import ScriptedProvider

# Seconds between streamed text chunks of the demo: enough to watch it stream.
DEMO_PACE = 0.004


def auto_provider(environ: dict[str, str] | None = None) -> str:
    """The provider a user most likely means: the one whose key (or endpoint) is set.

    Anthropic first, then any OpenAI-compatible endpoint; with neither, the offline
    explainer: it explains the notebook's last error without a model and says so, and
    never plays the demo's script in answer to a question it did not ask. The variables are
    the person's environment's, else the workspace ``.env``'s (``envtrust.lookup``).
    """
    from ..envtrust import lookup

    get = lookup if environ is None else environ.get
    if get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if get("OPENAI_API_KEY") or get("OPENAI_BASE_URL"):
        return "openai"
    return "offline"


def make_provider(
    name: str,
    *,
    model: str = "",
    context_window: int = 0,
    script: str = "",
    max_output_tokens: int = 0,
    thinking_budget: int = 0,
    reasoning_effort: str = "",
    send_images: str = "auto",
    strategy: str = "compact",
    cache_ttl: str = "5m",
    openai_api: str = "auto",
    openai_server_state: bool = False,
    **_: Any,
) -> Provider:
    """Build the provider a run asked for; errors say which option or variable to set.

    ``strategy`` matters to the demo only: its fixed script plays the strategy's story
    (a summary under compact, a handoff to a fresh window under rollover, the emulated
    server compaction under api); under a strategy of your own it plays compact's.
    """
    if name == "auto":
        name = auto_provider()
    if name == "demo":
        from .demo import DemoProvider
        from .demo_script import STRATEGIES

        pace = float(os.environ.get("PSEUDOCLAUDE_DEMO_PACE", DEMO_PACE))
        return DemoProvider(
            strategy if strategy in STRATEGIES else "compact",
            model=model or None,
            context_window=context_window or None,
            pace=pace,
        )
    if name == "offline":
        from .offline import OfflineExplainer

        return OfflineExplainer(context_window=context_window or None)
    if name == "scripted":
        if not script:
            raise ConfigError(
                "the scripted provider needs a script: pass --script PATH "
                "(or %config PseudoClaude.script = 'PATH')"
            )
        from .scripted import ScriptedProvider

        return ScriptedProvider(script, model=model or None, context_window=context_window or None)
    if name == "anthropic":
        from .anthropic import AnthropicProvider

        return AnthropicProvider(
            model=model or None,
            context_window=context_window or None,
            max_output_tokens=max_output_tokens or None,
            thinking_budget=thinking_budget,
            send_images=send_images,
            cache_ttl=cache_ttl,
        )
    if name == "openai":
        from .openai_compat import OpenAIProvider

        if thinking_budget:
            # Issue 32: it was ignored silently. A budget is Anthropic's extended thinking.
            raise ConfigError(
                f"--thinking {thinking_budget} is Anthropic's extended thinking; the OpenAI-compatible "
                "provider has no thinking budget. For a reasoning model use --effort LEVEL "
                "(PseudoClaude.reasoning_effort); otherwise leave --thinking off "
                "(%config PseudoClaude.thinking_budget = 0)"
            )

        chat = OpenAIProvider(
            model=model or None,
            context_window=context_window or None,
            max_output_tokens=max_output_tokens or None,
            reasoning_effort=reasoning_effort,
            send_images=send_images,
        )
        return _openai_api(chat, openai_api, openai_server_state)
    raise ConfigError(
        f"unknown provider {name!r}{_did_you_mean(name)}; choose one of: anthropic, openai, offline, demo, "
        "scripted, or auto (the one whose key is set)"
    )


def _openai_api(chat: OpenAIProvider, setting: str, server_state: bool) -> Provider:
    """Issue 43: the Responses API (``openai_api``; ``auto`` is Responses on api.openai.com and
    chat completions elsewhere), with server state when asked; chat completions otherwise."""
    from .openai_compat import api_for

    api = api_for(setting, chat)
    if api == "responses":
        # Only a Responses run imports its provider (items, stream reader, chains).
        from .openai_responses import ResponsesProvider

        return ResponsesProvider(chat, server_state=server_state)
    if server_state:
        raise ConfigError(
            f"openai_server_state keeps the conversation on the server with the Responses API, and "
            f"this run speaks chat completions to {chat.base_url} (openai_api is {setting!r}): set "
            "%config PseudoClaude.openai_api = 'responses' for a server that has it, or "
            "%config PseudoClaude.openai_server_state = False"
        )
    return chat


def _did_you_mean(name: str) -> str:
    """`` (did you mean 'openai'?)`` for a provider name one slip away from a real one, else ''."""
    import difflib

    from ..config import PROVIDERS

    close = difflib.get_close_matches(name.lower(), PROVIDERS, n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def provider_for(config: RunConfig) -> Provider:
    """The provider a run's settings ask for.

    The one place settings become a provider: a run and ``%context``/``%compact`` before any
    run get the same model, output cap and options (before, the views built theirs from
    three of the settings and a manual summary ignored ``max_output_tokens``).
    """
    return make_provider(
        config.provider,
        model=config.model,
        context_window=config.context_window,
        script=config.script,
        max_output_tokens=config.max_output_tokens,
        thinking_budget=config.thinking_budget,
        reasoning_effort=config.reasoning_effort,
        send_images=config.send_images,
        strategy=config.strategy,
        cache_ttl=config.cache_ttl,
        openai_api=config.openai_api,
        openai_server_state=config.openai_server_state,
    )


__all__ = [
    "DEMO_PACE",
    "Provider",
    "Request",
    "Response",
    "ScriptedProvider",
    "StreamEvent",
    "auto_provider",
    "make_provider",
    "provider_for",
]


def __getattr__(name: str) -> Any:
    if name == "ScriptedProvider":  # imported when first asked for (see the module docstring)
        from .scripted import ScriptedProvider

        return ScriptedProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
