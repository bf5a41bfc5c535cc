"""Settings: one traitlets ``Configurable`` (``%config PseudoClaude.<name> = …``).

traitlets is IPython's configuration library but not IPython itself, so the core can
read these settings as a plain object; ``ipython_config.py`` works too. Per-run options
of ``%agent`` override them for one run only and are never stored in a session.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from traitlets import Bool, CaselessStrEnum, Dict, Float, Int, List, TraitError, Unicode, observe, validate
from traitlets.config import Configurable

PROVIDERS = ("auto", "anthropic", "openai", "offline", "demo", "scripted")
# The built-in strategies (api: the provider's own compaction, issue 31); the setting also
# takes MODULE:CLASS and installed strategies (``context.names``).
STRATEGIES = ("compact", "rollover", "api")
MODES = ("read-only", "ask", "auto")
MEMORY_POLICIES = ("explicit", "auto", "off")


class PseudoClaude(Configurable):
    provider = CaselessStrEnum(
        PROVIDERS,
        default_value="auto",
        help="Model provider; auto: anthropic if ANTHROPIC_API_KEY is set, else openai if "
        "OPENAI_API_KEY or OPENAI_BASE_URL is set, else offline (explains the notebook's last "
        "error without a model). demo plays the quickstart's fixed script.",
    ).tag(config=True)
    model = Unicode("", help="Model name; empty means the provider's default.").tag(config=True)
    context_window = Int(0, help="Context window in tokens; 0 means the provider's.").tag(config=True)
    workspace = Unicode("", help="Workspace folder; empty means the notebook's folder.").tag(config=True)
    permission_mode = CaselessStrEnum(MODES, default_value="ask", help="Tool permissions.").tag(config=True)
    strategy = Unicode(
        "compact",
        help="Context strategy: compact, rollover, api, MODULE:CLASS (your own: a "
        "pseudoclaude_nb.strategies.Strategy subclass; MODULE may be a file in the notebook's "
        "folder) or an installed strategy's name (entry points pseudoclaude_nb.strategies).",
    ).tag(config=True)
    memory_policy = CaselessStrEnum(MEMORY_POLICIES, default_value="explicit").tag(config=True)
    script = Unicode("", help="Script file for the scripted provider.").tag(config=True)
    fsync = Bool(True, help="fsync every log write (crash safety).").tag(config=True)
    redact_secrets = Bool(True, help="Redact known secret patterns on disk.").tag(config=True)
    redact_patterns = List(
        Unicode(),
        help="More secrets to redact: regular expressions; each match is written as [REDACTED:custom].",
    ).tag(config=True)

    @validate("strategy")
    def _check_strategy(self, proposal: dict) -> str:
        from .context.names import normalized  # light: nothing of the strategy is imported here

        try:
            return normalized(str(proposal["value"]))
        except ValueError as exc:
            raise TraitError(f"PseudoClaude.strategy: {exc}") from None

    @validate("redact_patterns")
    def _check_redact_patterns(self, proposal: dict) -> list[str]:
        from .redact import set_extra_patterns

        try:
            set_extra_patterns(proposal["value"])  # every Redactor sees them from now on
        except ValueError as exc:
            raise refused(
                "redact_patterns", str(exc), "the patterns in force stay the previous ones"
            ) from None
        return proposal["value"]

    @observe("redact_patterns")
    def _apply_redact_patterns(self, change: dict) -> None:
        from .redact import set_extra_patterns

        set_extra_patterns(change["new"])

    max_steps = Int(50, help="Model requests per %agent run at most.").tag(config=True)
    spill_bytes = Int(50_000, help="Layer 1: spill a tool result above this size.").tag(config=True)
    spill_batch_bytes = Int(200_000, help="Layer 1: cap on one step's results.").tag(config=True)
    summary_reserve = Int(20_000, help="Layer 2: tokens kept for the summary.").tag(config=True)
    safety_margin = Int(13_000, help="Layer 2: extra headroom below the window.").tag(config=True)
    recent_tokens = Int(20_000, help="Layer 2: recent tail kept verbatim.").tag(config=True)
    breaker_limit = Int(3, help="Layer 2: consecutive failures that open the breaker.").tag(config=True)
    reminder_threshold = Int(
        15_000,
        min=0,
        help="Rollover: remind the model this many tokens before the base limit (at most 60 % of "
        "the base limit, so a small window is not reminded before any work).",
    ).tag(config=True)
    stale_hours = Int(6, help="Idle hours after which a resumed session gets a re-check note.").tag(
        config=True
    )
    # Steering (issue 29): the person's say over a replace at the moment it happens.
    confirm_compaction = Bool(
        False,
        help="Pause a run before a Layer 2 replace or a rollover commit: approve, edit or reject it.",
    ).tag(config=True)
    confirm_default = CaselessStrEnum(
        ["approve", "reject"],
        "approve",
        help="What confirm_compaction does when nobody can answer (a kernel without stdin).",
    ).tag(config=True)
    # Output caps and thinking (issue 15): every request's cap is clamped to the model's.
    max_output_tokens = Int(
        0, help="The model's output cap in tokens; 0 means the provider's table (or its default)."
    ).tag(config=True)
    agent_output_tokens = Int(8192, help="Output tokens an agent request asks for (clamped).").tag(
        config=True
    )
    thinking_budget = Int(0, help="Anthropic extended thinking: tokens per request (>= 1024); 0 is off.").tag(
        config=True
    )
    reasoning_effort = Unicode(
        "",
        help="OpenAI-compatible reasoning models: reasoning_effort (e.g. low, medium, high); empty: unset.",
    ).tag(config=True)
    send_images = CaselessStrEnum(
        ["auto", "always", "never"],
        "auto",
        help="Images to the model: auto (models the table knows take none get a text note), always, never.",
    ).tag(config=True)
    # MCP servers (README "MCP servers"): merged over $PSEUDOCLAUDE_HOME/mcp.json and .mcp.json.
    mcp_servers = Dict(
        {}, help='MCP servers, as in .mcp.json\'s "mcpServers": {NAME: {"command", "args", "env"}}.'
    ).tag(config=True)
    mcp_timeout = Float(120.0, help="Seconds an MCP tool call may take before it is cancelled.").tag(
        config=True
    )
    mcp_start_timeout = Float(30.0, help="Seconds MCP servers may take to start.").tag(config=True)
    notebook_context = Bool(
        True, help="Begin each run's user message with the cells run since the previous run."
    ).tag(config=True)
    notebook_context_bytes = Int(8_000, help="Budget of that notebook activity block, in bytes.").tag(
        config=True
    )
    notebook_document = Bool(
        True,
        help="Join the open notebook's shared document (JupyterLab or Notebook 7 with jupyter-collaboration) "
        "so the agent can read, insert, edit and run its cells; False: it reads the saved file only.",
    ).tag(config=True)
    # issue 31: prices per model, over the shipped table (pseudoclaude_nb/prices.json).
    prices = Dict(
        {},
        help="Model prices in US dollars per million tokens, over the shipped table: "
        '{MODEL: {"input": …, "output": …, "cache_write": …, "cache_write_1h": …, "cache_read": …}} '
        '(optional "long_context": {"above": PROMPT_TOKENS, …rates}).',
    ).tag(config=True)

    @validate("prices")
    def _check_prices(self, proposal: dict) -> dict:
        from .cost import set_overrides

        try:
            set_overrides(proposal["value"])  # every pricing sees them from now on
        except ValueError as exc:
            raise refused("prices", str(exc), "the prices in force stay the previous ones") from None
        return proposal["value"]

    # issue 31, --strategy api: Anthropic context editing on top of server-side compaction.
    api_clear_tool_results = Int(
        0,
        min=0,
        help="--strategy api: ask the provider to clear old tool results from this many input "
        "tokens on (Anthropic context editing, keeping the 3 newest tool uses); 0 is off.",
    ).tag(config=True)
    compact_tools = Bool(
        False,
        help="Offer a compact tool set (file and shell tools, short descriptions) for small windows.",
    ).tag(config=True)
    # issue 43: the providers' own state (docs/providers-native.md).
    openai_api = CaselessStrEnum(
        ["auto", "responses", "chat"],
        "auto",
        help="OpenAI wire API: responses (the Responses API) or chat (chat completions); auto: "
        "responses for api.openai.com, chat for any other base URL.",
    ).tag(config=True)
    openai_server_state = Bool(
        False,
        help="Responses API: store each response on OpenAI's side and send only the new items "
        "with previous_response_id (store: true).",
    ).tag(config=True)
    cache_ttl = CaselessStrEnum(
        ["5m", "1h"], "5m", help="Anthropic prompt cache lifetime of every breakpoint: 5m or 1h."
    ).tag(config=True)
    cache_guard = Float(
        None,
        allow_none=True,
        min=0.0,
        help="Ask before a request whose expected cache write costs more than this many US dollars; "
        "None: off.",
    ).tag(config=True)
    # issue 41: every request carries the pins and compaction cannot shrink them.
    pins_max_share = Float(
        0.25,
        help="The share of the context window the pins may take together (above 0, at most 1); "
        "a pin past it is refused.",
    ).tag(config=True)

    @validate("pins_max_share")
    def _check_pins_max_share(self, proposal: dict) -> float:
        value = proposal["value"]
        if not (math.isfinite(value) and 0 < value <= 1):
            raise refused(
                "pins_max_share",
                f"{value!r} refused: the pins' share of the window is above 0 and at most 1 (e.g. 0.25)",
                # traitlets has set the new value already while it validates; the one in force:
                f"the value in force stays {getattr(self, '_pins_share_in_force', 0.25)!r}",
            )
        return float(value)

    @observe("pins_max_share")
    def _pins_share_kept(self, change: dict) -> None:
        self._pins_share_in_force = change["new"]


def refused(name: str, why: str, kept: str) -> TraitError:
    """A setting refused (SPEC §20), said here: IPython's ``%config`` catches a validator's
    exception and only logs it (``logging.error``), and traitlets keeps the previous value. The
    line names the setting, says "refused" and what stays in force; the error is returned to raise."""
    text = why if why.startswith(f"PseudoClaude.{name}") else f"PseudoClaude.{name}: {why}"
    text = text if "refused" in text else f"{text} (refused)"
    print(f"%config {text}; {kept}", file=sys.stderr)
    return TraitError(text)


@dataclass(frozen=True)
class RunConfig:
    """The settings one run actually uses: ``PseudoClaude`` plus that run's options."""

    provider: str
    model: str
    context_window: int
    permission_mode: str
    strategy: str
    script: str
    max_steps: int
    fsync: bool
    stale_hours: int
    memory: bool = True
    quiet: bool = False
    max_output_tokens: int = 0
    agent_output_tokens: int = 8192
    thinking_budget: int = 0
    reasoning_effort: str = ""
    notebook: bool = True  # the notebook activity block (%agent --no-notebook)
    send_images: str = "auto"  # issue-14
    confirm_compaction: bool = False  # issue 29: pause before a replace (%agent --confirm-compaction)
    confirm_default: str = "approve"
    # issue 43: the providers' own state
    openai_api: str = "auto"
    openai_server_state: bool = False
    cache_ttl: str = "5m"
    cache_guard: float | None = None

    def with_options(self, **options: Any) -> RunConfig:
        return replace(self, **{k: v for k, v in options.items() if v is not None})


def run_config(settings: PseudoClaude) -> RunConfig:
    return RunConfig(
        provider=settings.provider,
        model=settings.model,
        context_window=settings.context_window,
        permission_mode=settings.permission_mode,
        strategy=settings.strategy,
        script=settings.script,
        max_steps=settings.max_steps,
        fsync=settings.fsync,
        stale_hours=settings.stale_hours,
        memory=settings.memory_policy != "off",
        max_output_tokens=settings.max_output_tokens,
        agent_output_tokens=settings.agent_output_tokens,
        thinking_budget=settings.thinking_budget,
        reasoning_effort=settings.reasoning_effort,
        notebook=settings.notebook_context,
        send_images=settings.send_images,
        confirm_compaction=settings.confirm_compaction,
        confirm_default=settings.confirm_default,
        openai_api=settings.openai_api,
        openai_server_state=settings.openai_server_state,
        cache_ttl=settings.cache_ttl,
        cache_guard=settings.cache_guard,
    )


def load_dotenv_file(workspace: Path) -> list[str]:
    """Read ``<workspace>/.env`` for the provider variables only; returns one-line notices.

    Workspace trust (SPEC §19, §20, ``envtrust``): the values go to the package's providers
    only, never into ``os.environ``; nothing the environment sets is overridden, and no value
    is ever echoed.
    """
    from .envtrust import load_workspace_env

    return load_workspace_env(workspace)
