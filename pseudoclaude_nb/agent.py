"""The agent of one kernel: which session is current, and how a run is put together.

It owns the session lifecycle (new, resume, continue) and builds each run from the
current settings: resume restores the *conversation*, never the runtime configuration,
so the provider, model, permission mode and memory setting of this run apply.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from .compact.manage import CompactSettings, ContextManager
from .compact.manifest import manifest
from .config import PseudoClaude, RunConfig, load_dotenv_file, run_config
from .conversation import Conversation
from .errors import ConfigError, SessionNotFoundError, ToolError
from .events import Compacted
from .prompt import join_sections, system_sections
from .providers import Provider, make_provider
from .rollover.handoff import GUIDANCE, Intent
from .rollover.manage import RolloverManager, RolloverSettings
from .runner import Listener, Notice, Runner, RunSummary
from .session import LoadResult, SessionWriter, list_sessions, load_session, new_session_dir
from .session.history import HistoryIndex
from .session.paths import resolve_workspace, session_dir
from .tools import Permissions, ToolRegistry, build_tools
from .tools.rollover import new_context_tool, search_history_tool


@dataclass
class ActiveSession:
    dir: Path
    writer: SessionWriter
    conversation: Conversation
    context: ContextManager
    previous_model: str | None = None  # from a resume; said once, by the next run
    idle_since: float | None = None  # last activity: a resume's log, or the last run

    @property
    def id(self) -> str:
        return self.dir.name


class Agent:
    def __init__(
        self,
        settings: PseudoClaude | None = None,
        *,
        notebook_file: str | None = None,
        python_executor: Callable[[str], str] | None = None,
        ask: Callable[[str], str] | None = None,
    ) -> None:
        self.settings = settings or PseudoClaude()
        self.notebook_file = notebook_file
        self.python_executor = python_executor
        self.ask = ask
        self.session: ActiveSession | None = None
        self.last_runner: Runner | None = None
        self.last_provider: Provider | None = None
        self._history: HistoryIndex | None = None

    @property
    def workspace(self) -> Path:
        return resolve_workspace(self.settings.workspace or None, notebook_file=self.notebook_file)

    @property
    def history(self) -> HistoryIndex:
        """The full-history index of the current workspace (``.pseudoclaude/history.sqlite``)."""
        ws = self.workspace
        if self._history is None or self._history.workspace != ws:
            if self._history is not None:
                self._history.close()
            self._history = HistoryIndex(ws)
        return self._history

    # --- sessions ------------------------------------------------------------------------

    def new_session(self) -> None:
        """Close the current session; the next run starts a fresh one."""
        self.close()

    def resume(self, session_id: str | None = None) -> LoadResult:
        """Make a stored session current. ``None`` means the latest one."""
        ws = self.workspace
        if session_id is None:
            sessions = list_sessions(ws)
            if not sessions:
                raise SessionNotFoundError(f"no sessions in {ws} yet; start one with %agent")
            session_id = sessions[0].id
        path = session_dir(ws, session_id)
        if self.session is not None and self.session.dir == path:
            self.close()  # resuming the current session reloads it from disk
        # Lock first, then read: no other process can append between the two.
        writer = SessionWriter(path, fsync=self.settings.fsync, redact=self.settings.redact_secrets)
        try:
            loaded = load_session(path)
        except BaseException:
            writer.close()
            raise
        self.close()
        active = self._activate(path, writer, loaded.messages)
        active.context.restore(loaded)
        if loaded.repaired:
            # Make the log's effective state the replayed one, so later appends land on it.
            # The last usage described what was cut, so the estimate starts afresh.
            active.conversation.replace("resync", loaded.messages)
            active.context.anchor = None
        active.previous_model, active.idle_since = loaded.last_model, loaded.last_ts
        return loaded

    def _activate(self, path: Path, writer: SessionWriter, messages: list) -> ActiveSession:
        conversation = Conversation(messages)
        writer.attach(conversation)
        # Right after the writer: each append is in the index when the append returns.
        conversation.add_hooks(self.history.hooks(path))
        kind = RolloverManager if self.settings.strategy == "rollover" else ContextManager
        context = kind(conversation, session_dir=path, workspace=self.workspace, writer=writer)
        self.session = ActiveSession(path, writer, conversation, context)
        return self.session

    def _use_strategy(self, active: ActiveSession, strategy: str) -> ContextManager:
        """The session's context manager for ``strategy``; a switch keeps anchor, ledger and breaker."""
        kind = RolloverManager if strategy == "rollover" else ContextManager
        old = active.context
        if type(old) is kind:
            return old
        new = kind(
            active.conversation,
            old.settings,
            session_dir=active.dir,
            workspace=self.workspace,
            writer=active.writer,
        )
        new.anchor, new.ledger, new.breaker = old.anchor, old.ledger, old.breaker
        new.compactions, new.last_compact = old.compactions, old.last_compact
        active.context = new
        return new

    def _strategy(self) -> str:
        if self.session is not None:
            return "rollover" if isinstance(self.session.context, RolloverManager) else "compact"
        return self.settings.strategy

    def close(self) -> None:
        if self.session is not None:
            self.session.writer.close()
            self.session = None
        if self._history is not None:
            self._history.close()  # reopened on demand

    def _ensure_session(self, config: RunConfig) -> ActiveSession:
        if self.session is None:
            path = new_session_dir(self.workspace)
            self._activate(
                path, SessionWriter(path, fsync=config.fsync, redact=self.settings.redact_secrets), []
            )
        assert self.session is not None
        return self.session

    # --- runs ------------------------------------------------------------------------------

    def compact_settings(self, context_window: int) -> CompactSettings:
        s = self.settings
        return CompactSettings(
            context_window=context_window,
            spill_bytes=s.spill_bytes,
            spill_batch_bytes=s.spill_batch_bytes,
            summary_reserve=s.summary_reserve,
            safety_margin=s.safety_margin,
            recent_tokens=s.recent_tokens,
            breaker_limit=s.breaker_limit,
        )

    def config(self, **options: object) -> RunConfig:
        return run_config(self.settings).with_options(**options)

    def run(
        self,
        prompt: str,
        *,
        new: bool = False,
        session_id: str | None = None,
        listeners: Iterable[Listener] = (),
        **options: object,
    ) -> RunSummary:
        config = self.config(**options)
        load_dotenv_file(self.workspace)
        provider = make_provider(
            config.provider, model=config.model, context_window=config.context_window, script=config.script
        )
        if new:
            self.new_session()
        elif session_id:
            self.resume(session_id)
        active = self._ensure_session(config)
        active.writer.set_model(provider.model)
        context = self._use_strategy(active, config.strategy)
        tools = self._tools(config.strategy)
        system = join_sections(self._sections(config.strategy))
        context.configure(
            self.compact_settings(provider.context_window), system=system, tools=tools.schemas()
        )
        self.last_provider = provider
        runner = Runner(
            conversation=active.conversation,
            provider=provider,
            tools=tools,
            permissions=Permissions(config.permission_mode, ask=self.ask),
            system_prompt=system,
            writer=active.writer,
            context=context,
            max_steps=config.max_steps,
            strict=os.environ.get("PSEUDOCLAUDE_STRICT") == "1",
            listeners=listeners,
        )
        self.last_runner = runner
        if config.provider == "auto" and provider.name == "demo":
            runner.emit(
                Notice(
                    "no ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL is set, so this run uses the "
                    "offline demo provider (a fixed script). Set a key, or pass --provider."
                )
            )
        prompt = self._resume_notices(active, provider.model, config, runner) + prompt
        self.history.on_notice = lambda text: runner.emit(Notice(text, "warning"))
        try:
            return runner.run(prompt)
        finally:
            active.idle_since = time.time()
            self.history.on_notice = None

    # --- what a run offers: tools and system prompt, by strategy ----------------------------------

    def _tools(self, strategy: str) -> ToolRegistry:
        tools = build_tools(self.workspace, python_executor=self.python_executor)
        if strategy == "rollover":
            tools.add(new_context_tool(self.workspace, self._declare_rollover))
            tools.add(search_history_tool(self.history, lambda: self.session.id if self.session else None))
        return tools

    def _sections(self, strategy: str) -> list[tuple[str, str]]:
        sections = system_sections(self.workspace)
        if strategy == "rollover":
            sections.append(("rollover", GUIDANCE))
        return sections

    def _declare_rollover(self, intent: Intent) -> str:
        context = self.session.context if self.session is not None else None
        if not isinstance(context, RolloverManager):
            raise ToolError("new_context works only with --strategy rollover; keep working in this window")
        return context.declare(intent)

    # --- context: %context and %compact ---------------------------------------------------------

    def provider_for_context(self) -> Provider:
        """The provider of the last run (a scripted one keeps its place), else a new one."""
        if self.last_provider is not None:
            return self.last_provider
        c = self.config()
        return make_provider(c.provider, model=c.model, context_window=c.context_window, script=c.script)

    def _context_window(self) -> int:
        if self.settings.context_window:
            return self.settings.context_window
        try:
            return self.provider_for_context().context_window
        except ConfigError:
            return CompactSettings().context_window

    def _prepared_context(self) -> tuple[list[tuple[str, str]], list[dict], CompactSettings]:
        strategy = self._strategy()
        sections = self._sections(strategy)
        tools = self._tools(strategy).schemas()
        settings = self.compact_settings(self._context_window())
        if strategy == "rollover":
            settings = RolloverSettings.from_compact(settings)
        if self.session is not None:
            self.session.context.configure(settings, system=join_sections(sections), tools=tools)
        return sections, tools, settings

    def context_manifest(self) -> dict:
        """What the next request would contain, part by part (``%context``)."""
        sections, tools, settings = self._prepared_context()
        extra: dict = {"strategy": self._strategy(), "session_id": None}
        if isinstance(settings, RolloverSettings):
            # The gauge and %context show these instead of the Layer 2 line.
            extra["rollover_limits"] = settings.limits
        if self.session is None:
            return manifest(
                sections=sections,
                messages=[],
                tools=tools,
                context_window=settings.context_window,
                threshold=settings.threshold,
                extra=extra,
            )
        ctx = self.session.context
        state = ctx.state()
        extra.update(
            session_id=self.session.id,
            breaker="open" if ctx.breaker.open else "closed",
            breaker_failures=ctx.breaker.failures,
            spills=ctx.ledger.spilled,
            compactions=ctx.compactions,
        )
        if isinstance(ctx, RolloverManager):
            extra.update(rollovers=ctx.rollovers, rollover_phase=state.phase)
        return manifest(
            sections=sections,
            messages=self.session.conversation.messages(),
            tools=tools,
            context_window=settings.context_window,
            threshold=settings.threshold,
            estimated_tokens=state.estimated_tokens,
            anchor_tokens=state.anchor_tokens,
            extra=extra,
        )

    def last_manifest(self) -> dict | None:
        """The manifest of the last request actually sent (``%context --last``)."""
        runner = self.last_runner
        if runner is None or runner.last_request is None:
            return None
        request = runner.last_request
        settings = self.compact_settings(runner.provider.context_window)
        return manifest(
            sections=[("system prompt as sent", request.system)],
            messages=request.messages,
            tools=request.tools,
            context_window=settings.context_window,
            threshold=settings.threshold,
            extra={"provider": runner.provider.name, "model": runner.provider.model},
        )

    def compact(self, *, layer1_only: bool = False) -> Compacted | int:
        """``%compact``: Layer 2 now (manual), or with ``layer1_only`` the spill pass."""
        if self.session is None:
            raise ConfigError("no current session to compact; run %agent or %sessions resume first")
        self._prepared_context()
        if layer1_only:
            return self.session.context.spill_all()
        return self.session.context.compact(self.provider_for_context(), trigger="manual")

    def _resume_notices(self, active: ActiveSession, model: str, config: RunConfig, runner: Runner) -> str:
        """Say once that the model changed; ask the model to re-check after a long idle."""
        prefix = ""
        if active.previous_model and active.previous_model != model:
            text = f"this session previously used model {active.previous_model}; this run uses model {model}"
            runner.emit(Notice(text))
            active.writer.log_note(text)
        if active.idle_since and time.time() - active.idle_since > config.stale_hours * 3600:
            hours = (time.time() - active.idle_since) / 3600
            text = (
                f"This session was idle for {hours:.0f} hours. Files and external state may "
                "have changed since: re-check them before relying on earlier observations."
            )
            runner.emit(Notice(text))
            active.writer.log_note(text)
            prefix = f"[host note] {text}\n\n"
        active.previous_model = None
        return prefix
