"""Providers: one file per wire protocol, chosen by name."""

from __future__ import annotations

import os
from typing import Any

from ..errors import ConfigError
from .base import Provider, Request, Response, StreamEvent
from .scripted import ScriptedProvider

# Seconds between streamed text chunks of the demo: enough to watch it stream.
DEMO_PACE = 0.004


def make_provider(
    name: str,
    *,
    model: str = "",
    context_window: int = 0,
    script: str = "",
    **_: Any,
) -> Provider:
    """Build the provider a run asked for; errors say which option or variable to set."""
    if name == "demo":
        from .demo_script import build_demo_script

        pace = float(os.environ.get("PSEUDOCLAUDE_DEMO_PACE", DEMO_PACE))
        return ScriptedProvider(
            build_demo_script(),
            name="demo",
            model=model or None,
            context_window=context_window or None,
            pace=pace,
        )
    if name == "scripted":
        if not script:
            raise ConfigError(
                "the scripted provider needs a script: pass --script PATH "
                "(or %config PseudoClaude.script = 'PATH')"
            )
        return ScriptedProvider(script, model=model or None, context_window=context_window or None)
    raise ConfigError(f"unknown provider {name!r}; choose one of: demo, scripted")


__all__ = ["Provider", "Request", "Response", "ScriptedProvider", "StreamEvent", "make_provider"]
