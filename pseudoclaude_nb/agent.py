"""The agent of one kernel: which session is current, and how a run is put together.

It owns the session lifecycle (new, resume, continue) and builds each run from the
current settings: resume restores the *conversation*, never the runtime configuration,
so the provider, model, permission mode and memory setting of this run apply. With memory
on, a run gets the memory index in its system prompt and the ``read_memory`` tool, and a
run that ends normally queues the memory update; with memory off, neither the index nor
any note's body is in what the model is sent.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from .agent_memory import MEMORY_WAIT_SECONDS, RunMemory
from .agent_notebook import NOTEBOOK_IMAGES, NotebookActivity
from .agent_session import ActiveSession
from .agent_tools import Relay, RunSurface
from .agent_views import ContextViews
from .agent_window import AgentWindow
from .config import PseudoClaude, RunConfig, load_dotenv_file, run_config
from .context import CompactSettings, ContextManager, ContextStrategy, dry_strategy
from .context.confirm import Ask, Review, text_ask
from .context.layer2 import Plan
from .context.pins import Pins
from .context.undo import Undone
from .conversation import Conversation, Hooks
from .errors import ConfigError, SessionNotFoundError
from .events import Compacted, RunEvent
from .mcp import McpHub
from .memory import MemoryManager
from .messages import Message
from .notebook import NotebookHost
from .prompt import join_sections
from .providers import Provider, provider_for
from .runner import Listener, Notice, Runner, RunSummary
from .session import LoadResult, SessionWriter, load_session, new_session_dir
from .session.catalog import latest_session
from .session.history import HistoryIndex
from .session.paths import resolve_workspace, session_dir
from .tools import Permissions, PythonExecutor

# Re-exported: these lived here before the split, and callers import them from here.
__all__ = ["MEMORY_WAIT_SECONDS", "NOTEBOOK_IMAGES", "ActiveSession", "Agent"]


class Agent(ContextViews, RunSurface, RunMemory, NotebookActivity, AgentWindow):
    """The composition root: sessions and runs here; what a run offers (``RunSurface``), its
    memory (``RunMemory``), its notebook activity (``NotebookActivity``) and what ``%context``
    shows (``ContextViews``) are mixins over the same state."""

    def __init__(
        self,
        settings: PseudoClaude | None = None,
        *,
        notebook_file: str | None = None,
        python_executor: PythonExecutor | None = None,
        ask: Callable[[str], str] | None = None,
        notebook: NotebookHost | None = None,
    ) -> None:
        self.settings = settings or PseudoClaude()
        self.notebook_file = notebook_file
        self.python_executor = python_executor
        self.notebook = notebook
        self.ask = ask
        self.session: ActiveSession | None = None
        self.last_runner: Runner | None = None
        self.last_provider: Provider | None = None
        self._history: HistoryIndex | None = None
        self._memory: MemoryManager | None = None
        self.memory_wait = MEMORY_WAIT_SECONDS
        self._last_memory_index: str | None = None  # what the last run's requests carried
        self._mcp: McpHub | None = None  # MCP servers: up from the first run to close()
        self.pins = Pins()  # the current session's, or held for the session the next run starts
        self.window_source: str | None = None  # where %context's window came from (issue 32)

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
            # Indexing runs off the append path: a background indexer catches up from the
            # committed offsets, and every search catches up first (issue 18).
            self._history = HistoryIndex(ws, background=True)
        return self._history

    # --- sessions ------------------------------------------------------------------------

    def new_session(self) -> None:
        """Close the current session; the next run starts a fresh one."""
        self._close_session()

    def resume(self, session_id: str | None = None) -> LoadResult:
        """Make a stored session current. ``None`` means the latest one."""
        ws = self.workspace
        if session_id is None:
            latest = latest_session(ws)
            if latest is None:
                raise SessionNotFoundError(f"no sessions in {ws} yet; start one with %agent")
            session_id = latest.id
        path = session_dir(ws, session_id)
        if self.session is not None and self.session.dir == path:
            self._close_session()  # resuming the current session reloads it from disk
        # Lock first, then read: no other process can append between the two.
        writer = SessionWriter(path, fsync=self.settings.fsync, redact=self.settings.redact_secrets)
        try:
            loaded = load_session(path)
        except BaseException:
            writer.close()
            raise
        self._close_session()
        active = self._activate(path, writer, loaded.messages)
        active.context.restore(loaded)
        self.pins.attach(writer, loaded.pins)
        if loaded.repaired:
            # Make the log's effective state the replayed one, so later appends land on it.
            # The last usage described what was cut, so the estimate starts afresh.
            active.conversation.replace("resync", loaded.messages)
            active.context.shared.forget_anchor()
        active.previous_model, active.idle_since = loaded.last_model, loaded.last_ts
        return loaded

    def _activate(self, path: Path, writer: SessionWriter, messages: list) -> ActiveSession:
        conversation = Conversation(messages)
        writer.attach(conversation)
        # Right after the writer: each append marks the session for the background indexer,
        # which also catches up now what the log holds beyond the index (a resumed session).
        conversation.add_hooks(self.history.hooks(path))
        self.history.schedule(path)
        context = ContextManager(
            conversation, strategy=self.settings.strategy, session_dir=path, workspace=self.workspace, writer=writer
        )
        self.session = ActiveSession(path, writer, conversation, context)
        return self.session

    def _use_strategy(self, active: ActiveSession, strategy: str) -> ContextManager:
        """The session's context with ``strategy`` current; a switch keeps the whole shared state."""
        active.context.use(strategy)
        return active.context

    def _strategy(self) -> str:
        if self.session is not None:
            return self.session.context.strategy.name
        return self.settings.strategy

    def _context_strategy(self, settings: CompactSettings | None = None) -> ContextStrategy:
        """The current session's strategy, else the configured one over no session (dry)."""
        if self.session is not None:
            return self.session.context.strategy
        return dry_strategy(self.settings.strategy, settings or CompactSettings(), self.workspace)

    def close(self) -> None:
        """The end of this agent: the session closed, the MCP servers stopped."""
        self._close_session()
        if self._mcp is not None:
            self._mcp.close()

    def _close_session(self) -> None:
        if self.session is not None:
            self.session.writer.close()
            self.session = None
            self.pins.detach()
        if self._history is not None:
            self._history.close()  # reopened on demand

    def _ensure_session(self, config: RunConfig) -> ActiveSession:
        if self.session is None:
            path = new_session_dir(self.workspace)
            active = self._activate(
                path, SessionWriter(path, fsync=config.fsync, redact=self.settings.redact_secrets), []
            )
            self.pins.attach(active.writer, [])  # pins set before the session are written into it
        assert self.session is not None
        return self.session

    # --- runs ------------------------------------------------------------------------------

    def compact_settings(self, context_window: int) -> CompactSettings:
        s = self.settings
        return CompactSettings.fitted(
            context_window,
            spill_bytes=s.spill_bytes,
            spill_batch_bytes=s.spill_batch_bytes,
            summary_reserve=s.summary_reserve,
            safety_margin=s.safety_margin,
            recent_tokens=s.recent_tokens,
            breaker_limit=s.breaker_limit,
            reminder_threshold=s.reminder_threshold,
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
        confirm: Ask | None = None,
        **options: object,
    ) -> RunSummary:
        """One ``%agent`` run; ``confirm`` asks the person about replaces when
        ``confirm_compaction`` is on (default: a text prompt through ``self.ask`` or ``input``)."""
        config = self.config(**options)
        env_notices = load_dotenv_file(self.workspace)  # provider variables only (SPEC §19)
        provider = provider_for(config)
        if new:
            self.new_session()
        elif session_id:
            self.resume(session_id)
        active = self._ensure_session(config)
        active.writer.set_model(provider.model)
        context = self._use_strategy(active, config.strategy)
        memory_events: list[RunEvent] = []
        memory_index = self._memory_for_run(config.memory, memory_events)
        relay = Relay()  # this run's events, for tools that report (new_context)
        mcp_problems = self.prepare_mcp()
        tools = self._tools(context.strategy, memory_index, relay)
        system = join_sections(self._sections(context.strategy, memory_index))
        window_notes = self.learn_window(provider)
        window_notes += self.tools_notice(tools.schemas(), provider.context_window, self.settings.compact_tools)
        context.shared.configure(
            self.compact_settings(provider.context_window), system=system, tools=tools.schemas()
        )
        context.shared.start_run()

        def on_window(window: int) -> None:
            self.adopt_window(provider, window)
            context.shared.configure(self.compact_settings(window), system=system, tools=tools.schemas())

        self.last_provider = provider
        permissions = Permissions(config.permission_mode, ask=self.ask)
        permissions.always_allowed |= {t.name for t in tools if getattr(t, "preapproved", False)}
        runner = Runner(
            conversation=active.conversation,
            provider=provider,
            tools=tools,
            permissions=permissions,
            system_prompt=system,
            writer=active.writer,
            context=context,
            max_steps=config.max_steps,
            strict=os.environ.get("PSEUDOCLAUDE_STRICT") == "1",
            listeners=listeners,
            max_tokens=config.agent_output_tokens,
            review=self._review(config, confirm),
            on_window=on_window,
        )
        relay.target = runner.emit
        self.last_runner = runner
        self._last_memory_index = memory_index
        block = self.notebook_block(active) if config.notebook else None
        if block is not None and (block.total or block.skipped):
            runner.emit(Notice(block.summary()))
        for event in memory_events:
            runner.emit(event)
        for text in window_notes:
            runner.emit(Notice(text))
        for text in env_notices + mcp_problems:
            runner.emit(Notice(text, "warning"))
        if not config.memory:
            self._withhold_memory(active, runner)
        if config.provider == "auto" and provider.name == "offline":
            runner.emit(
                Notice(
                    "no ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL is set: no model will answer. "
                    "The offline explainer explains the newest error in the cells you ran, and nothing "
                    "else; set a key for a model, or run %agent --provider demo for the offline tour."
                )
            )
        prompt = self._resume_notices(active, provider.model, config, runner) + prompt
        first = self._first_message(prompt, block, active)
        self.history.on_notice = lambda text: runner.emit(Notice(text, "warning"))
        new_messages: list[Message] = []  # what this run appended, whatever replaces happen
        collect = Hooks(on_append=new_messages.append)
        active.conversation.add_hooks(collect)
        try:
            summary = runner.run(first)
        finally:
            active.conversation.remove_hooks(collect)
            active.idle_since = time.time()
            # The run's last appends into the index before the next cell (once per run, not per
            # append), and any problem the background indexer met said during the run.
            self.history.flush()
            self.history.on_notice = None
            # The listing and resume --last then read a current sidecar (no catch-up).
            active.writer.settle_meta()
            for text in active.writer.take_notices():
                runner.emit(Notice(text, "warning"))
        if summary.status == "done" and config.memory:
            self._update_memory(new_messages, provider, active)
        return summary

    def _review(self, config: RunConfig, confirm: Ask | None) -> Review | None:
        """This run's say over replaces (``confirm_compaction``): ``confirm``, else a text prompt."""
        if not config.confirm_compaction:
            return None
        return Review(confirm or text_ask(self.ask), config.confirm_default)

    def compact(self, *, layer1_only: bool = False, listeners: Iterable[Listener] = ()) -> Compacted | int:
        """``%compact``: Layer 2 now (manual), or with ``layer1_only`` the spill pass.

        Its events go to ``listeners`` only: an earlier run's gauge and renderer stay as they ended.
        """
        if self.session is None:
            raise ConfigError("no current session to compact; run %agent or %sessions resume first")
        self._prepared_context()
        targets = list(listeners)

        def emit(event: RunEvent) -> None:
            for listener in targets:
                listener(event)

        if layer1_only:
            return self.session.context.spiller.spill_all(emit)
        return self.session.context.compact(self.provider_for_context(), "manual", emit)

    def compact_preview(self) -> Plan:
        """``%compact --preview``: what Layer 2 would do now, summary included; nothing is written."""
        if self.session is None:
            raise ConfigError("no current session to compact; run %agent or %sessions resume first")
        self._prepared_context()
        return self.session.context.preview(self.provider_for_context())

    def compact_apply(self, text: str | None = None) -> Compacted:
        """``%compact --apply``: commit the previewed summary (no second model request), or
        ``text`` in its place (``--edit``)."""
        if self.session is None:
            raise ConfigError("no current session to compact; run %agent or %sessions resume first")
        self._prepared_context()
        return self.session.context.apply(text=text)

    def compact_undo(self) -> Undone:
        """``%compact --undo``: restore the state before the last compaction or rollover commit."""
        if self.session is None:
            raise ConfigError("no current session; run %agent or %sessions resume first")
        self._prepared_context()
        return self.session.context.undo()

    def _resume_notices(self, active: ActiveSession, model: str, config: RunConfig, runner: Runner) -> str:
        """Say once that the model changed; ask the model to re-check after a long idle."""
        prefix = ""
        if active.previous_model and active.previous_model != model:
            text = f"this session previously used model {active.previous_model}; this run uses model {model}"
            runner.emit(Notice(text))
            active.writer.note(text)
        if active.idle_since and time.time() - active.idle_since > config.stale_hours * 3600:
            hours = (time.time() - active.idle_since) / 3600
            text = (
                f"This session was idle for {hours:.0f} hours. Files and external state may "
                "have changed since: re-check them before relying on earlier observations."
            )
            runner.emit(Notice(text))
            active.writer.note(text)
            prefix = f"[host note] {text}\n\n"
        active.previous_model = None
        return prefix

