"""The agent of one kernel: which session is current, and how a run is put together.

``Agent`` is the composition root, and its parts are explicit members, each with one job:
``surface`` (``RunSurface``: tools, system sections, MCP servers), ``run_memory``
(``RunMemory``: the memory index and update), ``activity`` (``NotebookActivity``: the cells
a run reports), ``windows`` (``AgentWindow``: learned windows) and ``pins``. It owns the
session lifecycle (new, resume, continue). A run is three steps: ``plan_run`` decides
everything from the current settings into a frozen ``RunPlan``, the ``Runner`` plays it,
and a run that ended normally queues the memory update. ``%context`` shows a *dry* plan
and never configures the live session. Resume restores the *conversation*, never the
runtime configuration, so the provider, model, permission mode and memory setting of this
run apply. With memory off, neither the index nor any note's body is in what the model is sent.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import PseudoClaude, RunConfig, load_dotenv_file, run_config
from ..context import edited
from ..context.confirm import Ask, Review, text_ask
from ..context.host import ContextHost
from ..context.pins import Pins, pins_notice
from ..context.registry import check_provider, load_strategy
from ..context.settings import CompactSettings
from ..conversation import Conversation, Hooks
from ..envtrust import workspace_endpoint
from ..errors import ConfigError, PseudoClaudeError
from ..events import RunEvent
from ..history import HistoryIndex
from ..hooks import RunEvents, RunHooks
from ..memory import MemoryManager
from ..messages import Message
from ..notebook import ActivityBlock, NotebookHost
from ..providers import Provider, provider_for
from ..providers.base import GivesTour, HasEndpoint, LearnsWindow
from ..runner import Listener, Notice, Runner, RunSummary
from ..session import SessionWriter, new_session_dir
from ..session.entries import NoteEntry
from ..strategies import Strategy
from ..tools import Permissions, PythonExecutor
from ..workspace import resolve_workspace, session_dir
from .memory import RunMemory
from .notebook import NotebookActivity
from .plan import RunPlan, plan_run
from .session import ActiveSession
from .surface import RunSurface
from .window import AgentWindow

if TYPE_CHECKING:
    from ..cache_guard import CacheGuard
    from ..context.manifest import Manifest
    from ..context.plan import Preview
    from ..context.undo import Undone
    from ..mcp.hub import McpHub
    from ..session import LoadResult


class Agent:
    """The composition root: sessions and runs here, the rest in its parts."""

    def __init__(
        self,
        settings: PseudoClaude | None = None,
        *,
        notebook_file: str | None = None,
        python_executor: PythonExecutor | None = None,
        ask: Callable[[str], str] | None = None,
        notebook: NotebookHost | None = None,
        providers: Callable[[RunConfig], Provider] = provider_for,
        strategies: Callable[[str, Path | None], Strategy] = load_strategy,
    ) -> None:
        self.settings = settings or PseudoClaude()
        # Makes each run's provider from its settings; the strategy lab and the bench pass one
        # that hands every run the same scripted model, which keeps its place in the task.
        self.providers = providers
        # Makes the strategy a setting names (``registry.load_strategy``: a MODULE:CLASS from the
        # workspace); the strategy lab passes one that loads the person's file from their folder,
        # not from the temporary workspace each arm plays in (issue 46).
        self.strategies = strategies
        self.notebook_file = notebook_file
        self.notebook = notebook
        self.session: ActiveSession | None = None
        self.last_runner: Runner | None = None
        self.last_provider: Provider | None = None
        self._history: HistoryIndex | None = None
        self._last_memory_index: str | None = None  # what the last run's requests carried
        self.pins = Pins()  # the current session's, or held for the session the next run starts
        self.window_source: str | None = None  # where %context's window came from (issue 32)
        # The parts (the workspace and the history index are read when used: both follow %config).
        self.run_memory = RunMemory(self.settings, lambda: self.workspace)
        self.activity = NotebookActivity(self.settings, notebook)
        self.windows = AgentWindow()
        self.surface = RunSurface(
            self.settings,
            workspace=lambda: self.workspace,
            history=lambda: self.history,
            memory=self.run_memory,
            pins=self.pins,
            notebook=notebook,
            python_executor=python_executor,
            ask=ask,
            stamp=self._cell_stamp,
        )

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

    # --- what the magics read and set of the parts -----------------------------------------

    @property
    def memory(self) -> MemoryManager:
        """The project memory of the current workspace and the user memory (``%memory``)."""
        return self.run_memory.memory

    def pending_memory(self) -> MemoryManager | None:
        """The memory whose update the last run started and is still running (the run's output
        says what it did), else ``None``."""
        return self.run_memory.pending()

    @property
    def memory_wait(self) -> float:
        """How long a run waits for the previous run's memory update."""
        return self.run_memory.wait

    @memory_wait.setter
    def memory_wait(self, seconds: float) -> None:
        self.run_memory.wait = seconds

    @property
    def ask(self) -> Callable[[str], str] | None:
        """How the agent asks the person (permissions, MCP approvals, confirmations); ``None``: input."""
        return self.surface.ask

    @ask.setter
    def ask(self, ask: Callable[[str], str] | None) -> None:
        self.surface.ask = ask

    @property
    def skip_counts(self) -> frozenset[int]:
        """Execution counts the next run's block leaves out (``%agent --skip-cells``)."""
        return self.activity.skip_counts

    @skip_counts.setter
    def skip_counts(self, counts: frozenset[int]) -> None:
        self.activity.skip_counts = counts

    @property
    def mcp(self) -> McpHub:
        """The kernel's MCP servers (``%mcp``); nothing runs until a run or ``%mcp`` starts them."""
        return self.surface.mcp

    def prepare_mcp(self, *, start: bool = True) -> list[str]:
        return self.surface.prepare_mcp(start=start)

    def describe_tools(self) -> str:
        """``%agent --tools`` as text: every tool the next run offers, the user's own marked."""
        return self.surface.describe_tools(self._context_strategy())

    def tool_listing(self) -> tuple[str, list[tuple[str, str, str]], list[str]]:
        return self.surface.tool_listing(self._context_strategy())

    def notebook_block(self, active: ActiveSession | None = None) -> ActivityBlock | None:
        """The cells the next run of ``active`` (default: the current session) would report."""
        return self.activity.block(active if active is not None else self.session)

    # --- sessions ------------------------------------------------------------------------

    def new_session(self) -> None:
        """Close the current session; the next run starts a fresh one."""
        self._close_session()

    def resume(self, session_id: str | None = None) -> LoadResult:
        """Make a stored session current. ``None`` means the latest one."""
        # The catalog and the loader read a stored session: a new session's run needs neither.
        from ..session.catalog import session_id_or_latest
        from ..session.loader import load_session

        ws = self.workspace
        session_id = session_id_or_latest(ws, session_id)
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
            active.context.forget_anchor()
        active.previous_model, active.idle_since = loaded.last_model, loaded.last_ts
        return loaded

    def _activate(self, path: Path, writer: SessionWriter, messages: list) -> ActiveSession:
        conversation = Conversation(messages)
        writer.attach(conversation)
        # Right after the writer: each append marks the session for the background indexer,
        # which also catches up now what the log holds beyond the index (a resumed session).
        conversation.add_hooks(self.history.hooks(path))
        self.history.schedule(path)
        try:
            strategy = self.strategies(self.settings.strategy, self.workspace)
        except ConfigError:
            # A strategy that does not load: the session opens under compact, and the next run
            # says why before its first request (``run`` loads it again).
            strategy = load_strategy("compact")
        context = ContextHost(
            conversation,
            strategy=strategy,
            session_dir=path,
            workspace=self.workspace,
            writer=writer,
            pins=self.pins.texts,
            key=self.settings.strategy,
        )
        self.session = ActiveSession(path, writer, conversation, context)
        return self.session

    def _cell_stamp(self) -> dict[str, Any]:
        """What a cell the agent changes carries in ``metadata.pseudoclaude``: the session and the
        step (the request number ``%sessions show`` and ``%context --at`` use)."""
        if self.session is None:
            return {}
        from ..session.timeline import build_timeline

        try:
            step = len(build_timeline(self.session.dir).usage_curve)
        except PseudoClaudeError:
            step = None
        return {"session": self.session.id, "step": step}

    def close(self) -> None:
        """The end of this agent: the session closed, the MCP servers stopped."""
        self._close_session()
        self.surface.close()

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
            clear_tool_results=s.api_clear_tool_results,
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
        """One ``%agent`` run: plan, play, then the memory update. ``confirm`` asks the person
        about replaces when ``confirm_compaction`` is on (default: a text prompt through ``ask``)."""
        config = self.config(**options)
        warnings = load_dotenv_file(self.workspace)  # provider variables only (SPEC §19)
        provider = self.providers(config)
        config, chosen = _memory_for(config, provider)
        warnings = [*warnings, *chosen]
        # The strategy, and whether this provider can serve it: before any session or request.
        strategy = self.strategies(config.strategy, self.workspace)
        check_provider(strategy, provider)
        if new:
            self.new_session()
        elif session_id:
            self.resume(session_id)
        active = self._ensure_session(config)
        active.writer.set_model(provider.model)
        active.context.use(strategy, config.strategy)  # a switch keeps the whole shared state
        hooks = RunEvents(listeners)  # before the tools: those that report (new_context) get them
        plan = plan_run(self, config, provider, active=active, emit=hooks.on_event, warnings=warnings)
        runner = self._runner(plan, active, hooks, confirm)
        for event in plan.notices:
            runner.emit(event)
        first = self._first_message(plan, active, runner, prompt)
        summary, new_messages = self._play(runner, active, first)
        if summary.status == "done" and config.memory:
            self.run_memory.update(new_messages, provider, active)
        return summary

    def _runner(self, plan: RunPlan, active: ActiveSession, hooks: RunHooks, confirm: Ask | None) -> Runner:
        """The plan applied to the session's context, and the runner that plays it."""
        context, config = active.context, plan.config
        provider = plan.provider
        assert provider is not None  # a run's plan always has one
        context.configure(plan.settings, system=plan.system, tools=plan.schemas())
        context.start_run(self.windows.token_profile(provider))  # issue 32: before the first estimate

        def on_window(window: int) -> None:
            self.windows.adopt_window(provider, window)
            context.configure(self.compact_settings(window), system=plan.system, tools=plan.schemas())
            # issue 41: a window learned from an error may be smaller than the pins in force
            said = pins_notice(self.pins.texts(), window, self.settings.pins_max_share, "the server's error")
            if said is not None:
                runner.emit(Notice(said, "warning"))

        self.last_provider = provider
        tour = provider.tour if isinstance(provider, GivesTour) else None  # the demo's one question
        permissions = Permissions(config.permission_mode, ask=self.ask, tour=tour)
        permissions.always_allowed |= {t.name for t in plan.tools if getattr(t, "preapproved", False)}
        runner = Runner(
            conversation=active.conversation,
            provider=provider,
            tools=plan.tools,
            permissions=permissions,
            system_prompt=plan.system,
            writer=active.writer,
            context=context,
            max_steps=config.max_steps,
            strict=os.environ.get("PSEUDOCLAUDE_STRICT") == "1",
            hooks=hooks,
            max_tokens=config.agent_output_tokens,
            review=self._review(config, confirm),
            on_window=on_window,
            cache_guard=self._cache_guard(config, active, provider),
        )
        self.last_runner = runner
        self._last_memory_index = plan.memory_index
        return runner

    def _first_message(self, plan: RunPlan, active: ActiveSession, runner: Runner, prompt: str) -> Message:
        """What the session must hear before the prompt (memory withheld, a model change, a long
        idle), then the run's first message: the notebook block and the prompt."""
        if not plan.config.memory:
            withheld = self.run_memory.withhold(active)
            if withheld is not None:
                runner.emit(withheld)
        prompt = self._resume_notices(active, runner.provider.model, plan.config, runner) + prompt
        return self.activity.first_message(prompt, plan.block, active)

    def _play(
        self, runner: Runner, active: ActiveSession, first: Message
    ) -> tuple[RunSummary, list[Message]]:
        """The run itself; what it appended (whatever replaces happen), and the log settled after."""
        new_messages: list[Message] = []
        collect = Hooks(on_append=new_messages.append)
        active.conversation.add_hooks(collect)
        try:
            summary = runner.run(first)
        finally:
            active.conversation.remove_hooks(collect)
            active.idle_since = time.time()
            # The run's last appends reach the index in the background once the cell is over
            # (every search catches up first): the catch-up's commit grew with the index and
            # was most of what a run's steps grew by at 10,000 messages (issue 34). The file
            # is opened, so what is wrong with it is said in this run.
            self.history.ready()
            # The listing and resume --last then read a current sidecar (no catch-up).
            active.writer.settle_meta()
            # What the index and the writer could not keep, said in the run that met it (the
            # background indexer's, in the first run or magic after it met them).
            for text in self.history.take_notices() + active.writer.take_notices():
                runner.emit(Notice(text, "warning"))
        return summary, new_messages

    def _cache_guard(self, config: RunConfig, active: ActiveSession, provider: Provider) -> CacheGuard | None:
        """Issue 43: this run's cache guard (``cache_guard``, None: off)."""
        if config.cache_guard is None:
            return None
        from ..cache_guard import CacheGuard

        return CacheGuard(
            config.cache_guard,
            state=active.context.shared,
            log=active.writer.path,
            session=active.id,
            model=provider.model,
            ttl=config.cache_ttl,
            ask=self.ask,
        )

    def _review(self, config: RunConfig, confirm: Ask | None) -> Review | None:
        """This run's say over replaces (``confirm_compaction``): ``confirm``, else a text prompt."""
        if not config.confirm_compaction:
            return None
        return Review(confirm or text_ask(self.ask), config.confirm_default)

    def compact(self, *, layer1_only: bool = False, listeners: Iterable[Listener] = ()) -> object | None:
        """``%compact``: the strategy's answer to the person's request (the built-ins: Layer 2
        now), or with ``layer1_only`` the spill pass (a count). None: the strategy keeps the context.

        Its events go to ``listeners`` only: an earlier run's gauge and renderer stay as they ended.
        """
        if self.session is None:
            raise ConfigError("no current session to compact; run %agent or %sessions resume first")
        self._prepared_session()
        targets = list(listeners)

        def emit(event: RunEvent) -> None:
            for listener in targets:
                listener(event)

        if layer1_only:
            return self.session.context.spill_all(emit)
        return self.session.context.compact(self.provider_for_context(), emit)

    def compact_preview(self) -> Preview | None:
        """``%compact --preview``: what the strategy would do now (a summary included); nothing is
        written. None: it would keep the context as it is."""
        if self.session is None:
            raise ConfigError("no current session to compact; run %agent or %sessions resume first")
        self._prepared_session()
        return self.session.context.preview(self.provider_for_context())

    def compact_apply(self, text: str | None = None, *, path: str | None = None) -> object:
        """``%compact --apply``: commit the previewed summary (no second model request), or
        ``text`` in its place, or the text of the file at ``path`` (``--edit``: read within
        bounds, ``context.edited``)."""
        if self.session is None:
            raise ConfigError("no current session to compact; run %agent or %sessions resume first")
        context = self._prepared_session().context
        if path is not None:
            text = edited.read_summary(path, context.settings.summary_reserve)
            edited.check_fits(path, text, context.pending_preview())
        return context.apply_preview(text=text)

    def compact_undo(self) -> Undone:
        """``%compact --undo``: restore the state before the last compaction or rollover commit."""
        return self._prepared_session().context.undo()

    # --- what %context shows ---------------------------------------------------------------

    def _strategy(self) -> str:
        """The strategy setting of the current session (its last run's), else the configured one."""
        if self.session is not None:
            return self.session.context.key
        return self.settings.strategy

    def _context_strategy(self) -> Strategy:
        """The current session's strategy, else the configured one (loaded: its tools are listed)."""
        if self.session is not None:
            return self.session.context.strategy
        return self.strategies(self.settings.strategy, self.workspace)

    def provider_for_context(self) -> Provider:
        """The provider of the last run (a scripted one keeps its place), else a new one."""
        if self.last_provider is not None:
            return self.last_provider
        return self.providers(self.config(strategy=self._strategy()))

    def pin(self, text: str) -> int:
        """``%context pin``: pin ``text``, refused past ``pins_max_share`` of the next run's window
        (issue 41) as far as it is known without asking a server; the pin's number."""
        config = self.config(strategy=self._strategy())
        window = config.context_window
        if not window:
            try:
                window = self.provider_for_context().context_window  # a learned window is kept by it
            except ConfigError:
                window = CompactSettings().context_window
        return self.pins.add(text, window=window, share=self.settings.pins_max_share)

    def dry_plan(self) -> RunPlan:
        """The plan of the next run, made without touching the session (``%context``)."""
        config = self.config(strategy=self._strategy())
        load_dotenv_file(self.workspace)  # as a run reads it; only this package's providers see it
        try:
            provider = self.provider_for_context()
        except ConfigError:
            provider = None
        self.window_source = "--context-window" if config.context_window else None
        if isinstance(provider, LearnsWindow) and not config.context_window:
            provider.learn_window()  # asked once per server and model, then cached (issue 32)
            self.window_source = provider.window_source
        if provider is not None:
            config, _ = _memory_for(config, provider)  # %context shows what the run would send
        return plan_run(self, config, provider, active=self.session, emit=_ignore, dry=True)

    def _prepared_session(self) -> ActiveSession:
        """The current session's context configured as the next run would (``%compact`` acts on it)."""
        if self.session is None:
            raise ConfigError("no current session; run %agent or %sessions resume first")
        plan = self.dry_plan()
        self.session.context.configure(plan.settings, system=plan.system, tools=plan.schemas())
        return self.session

    def next_manifest(self) -> Manifest:
        """What the next request would contain, part by part (``%context``)."""
        from . import views  # %context's: its manifest and the cache outlook are no run's

        return views.next_request(
            self.dry_plan(),
            active=self.session,
            settings=self.settings,
            window_source=self.window_source,
            last_runner=self.last_runner,
        )

    def next_head_tokens(self) -> dict[str, int]:
        """The next request's parts besides its messages, in tokens (``views.next_head``)."""
        from . import views  # as in next_manifest

        return views.next_head(self.dry_plan())

    def sent_manifest(self) -> Manifest | None:
        """The manifest of the last request actually sent (``%context --last``)."""
        runner = self.last_runner
        if runner is None:
            return None
        settings = self.compact_settings(runner.provider.context_window)
        from . import views  # as in next_manifest

        return views.last_request(runner, self._last_memory_index, settings)

    def context_manifest(self) -> dict[str, Any]:
        """``next_manifest`` as JSON data (``%context --json``)."""
        return self.next_manifest().as_dict()

    def last_manifest(self) -> dict[str, Any] | None:
        """``sent_manifest`` as JSON data (``%context --json --last``)."""
        sent = self.sent_manifest()
        return sent.as_dict() if sent is not None else None

    def _resume_notices(self, active: ActiveSession, model: str, config: RunConfig, runner: Runner) -> str:
        """Say once that the model changed; ask the model to re-check after a long idle."""
        prefix = ""
        if active.previous_model and active.previous_model != model:
            text = f"this session previously used model {active.previous_model}; this run uses model {model}"
            runner.emit(Notice(text))
            active.record.record(NoteEntry.new(text))
        if active.idle_since and time.time() - active.idle_since > config.stale_hours * 3600:
            hours = (time.time() - active.idle_since) / 3600
            text = (
                f"This session was idle for {hours:.0f} hours. Files and external state may "
                "have changed since: re-check them before relying on earlier observations."
            )
            runner.emit(Notice(text))
            active.record.record(NoteEntry.new(text))
            prefix = f"[host note] {text}\n\n"
        active.previous_model = None
        return prefix


def _ignore(event: RunEvent) -> None:
    """A dry plan's tools say nothing: they are only listed."""


def _memory_for(config: RunConfig, provider: Provider) -> tuple[RunConfig, list[str]]:
    """``config`` with memory off when ``provider`` sends to a host a workspace's ``.env`` chose
    (the person's memory is not that host's to read or write), and the warning that says so."""
    chosen = workspace_endpoint(
        provider.name, provider.base_url if isinstance(provider, HasEndpoint) else None
    )
    if chosen is None or not config.memory:
        return config, []
    return config.with_options(memory=False), [chosen]
