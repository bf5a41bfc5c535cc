"""The window a run works in, when the server knows it better than the model table (issue 32).

An OpenAI-compatible server other than OpenAI's own is asked once per base URL and model
(``providers.window``: llama.cpp, vLLM, Ollama, LM Studio); the answer is cached under
``$PSEUDOCLAUDE_HOME``. A context-length error that names a smaller window is adopted at
once and cached the same way. ``--context-window`` always wins. A server whose chat
template cannot show tools is refused before the run: a tool-less agent only pretends.
"""

from __future__ import annotations

from typing import Any

from ..context.estimate import DIGITS_HOSTED, DIGITS_LOCAL, estimate_request
from ..errors import ConfigError
from ..providers.base import LearnsWindow, Provider
from ..providers.window import Learned, remember
from ..tools.compact_set import TOOLS_SHARE_NOTICE


class AgentWindow:
    """One part of the agent: the windows it learned and the notices it said once about them."""

    _windows_said: set[tuple[str, str, int]]

    def learn_window(self, provider: Provider) -> list[str]:
        """Ask ``provider``'s server for its window (cached) and adopt it; notices to show."""
        if not isinstance(provider, LearnsWindow):
            return []
        learned = provider.learn_window()
        if learned is None:
            return []
        if learned.supports_tools is False:
            raise ConfigError(
                f"the server at {provider.base_url} says its chat template cannot show tools "
                "(llama.cpp /props: chat_template_caps.supports_tools is false), so the model would "
                "never see read_file, bash and the rest. Restart llama-server with --jinja and a "
                'tool-capable template (--chat-template-file FILE); see the README, "Run against a '
                'local model"'
            )
        said = getattr(self, "_windows_said", None)
        if said is None:
            said = self._windows_said = set()
        key = (provider.base_url, provider.model, provider.context_window)
        if not learned.window or key in said:
            return []
        said.add(key)
        return [f"context window: {provider.context_window:,} tokens ({provider.window_source})"]

    def token_profile(self, provider: Provider) -> int:
        """Digits a token holds on ``provider``'s server, for the estimate (issue 32): one on an
        OpenAI-compatible server other than OpenAI's own — it serves open-weights models, and
        most of their tokenizers (Gemma, Llama 2, Mistral, Qwen) split every digit (a server
        log was 48 % over bytes/3.5 on Gemma 3) — else ``DIGITS_HOSTED`` (bytes / 3.5)."""
        local = isinstance(provider, LearnsWindow) and not provider.is_openai
        return DIGITS_LOCAL if local else DIGITS_HOSTED

    def adopt_window(self, provider: Provider, window: int) -> None:
        """The window a context-length error named: the provider's from now on, and cached."""
        learned = Learned(window, "the server's context-length error")
        if isinstance(provider, LearnsWindow):
            provider.adopt_window(learned)
            remember(provider.base_url, provider.model, learned)
        else:
            provider.context_window = window

    def tools_notice(self, schemas: list[dict[str, Any]], window: int, compact_on: bool) -> list[str]:
        """Say once per window size when the tool schemas take a large share of the window."""
        tokens = estimate_request("", [], schemas)
        said = getattr(self, "_windows_said", None)
        if said is None:
            said = self._windows_said = set()
        key = ("tools", str(compact_on), window)
        if compact_on or window <= 0 or tokens <= window * TOOLS_SHARE_NOTICE or key in said:
            return []
        said.add(key)
        return [
            f"the tool schemas are ~{tokens:,} tokens, {tokens / window:.0%} of the {window:,}-token "
            "window; %config PseudoClaude.compact_tools = True offers a smaller set (file and shell "
            "tools, short descriptions)"
        ]
