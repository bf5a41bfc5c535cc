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
from dataclasses import dataclass
from pathlib import Path

from .agent_views import ContextViews
from .config import PseudoClaude, RunConfig, load_dotenv_file, run_config
from .context import CompactSettings, ContextManager, Emit
from .conversation import Conversation, Hooks
from .errors import ConfigError, SessionNotFoundError, ToolError
from .events import Compacted, MemoryUpdated, RunEvent
from .mcp import McpHub, load_config
from .memory import MemoryManager, user_memory_dir
from .messages import ImagePart, Message, NotebookMark
from .notebook import ActivityBlock, NotebookHost, cells_for_run, render_activity
from .prompt import join_sections, system_sections, with_memory
from .providers import Provider, provider_for
from .redact import Redactor
from .rollover.handoff import GUIDANCE, Intent
from .runner import Listener, Notice, Runner, RunSummary
from .session import LoadResult, SessionWriter, images, list_sessions, load_session, new_session_dir
from .session.history import HistoryIndex
from .session.paths import resolve_workspace, session_dir
from .tools import MemoryReader, Permissions, ToolRegistry, build_tools
from .tools.memory import withhold_bodies
from .tools.notebook import notebook_tools
from .tools.rollover import new_context_tool, search_history_tool
from .tools.user import user_tools

# How long a run waits for the previous run's memory update before going on without it.
MEMORY_WAIT_SECONDS = 15.0
# issue-14: images of notebook cells the first message of a run shows the model, newest last.
NOTEBOOK_IMAGES = 4


@dataclass
class ActiveSession:
    dir: Path
    writer: SessionWriter
    conversation: Conversation
    context: ContextManager
    previous_model: str | None = None  # from a resume; said once, by the next run
    idle_since: float | None = None  # last activity: a resume's log, or the last run
    notebook_seen: int | None = None  # the last cell reported to this session (None: none yet)

    @property
    def id(self) -> str:
        return self.dir.name


class Agent(ContextViews):
    def __init__(
        self,
        settings: PseudoClaude | None = None,
        *,
        notebook_file: str | None = None,
        python_executor: Callable[[str], str] | None = None,
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

    @property
    def memory(self) -> MemoryManager:
        """The project memory of the current workspace and the user memory (``%memory``)."""
        ws, user = self.workspace, user_memory_dir()
        if self._memory is None or self._memory.workspace != ws or self._memory.user.root != user:
            self._memory = MemoryManager(ws, user)
        return self._memory

    # --- sessions ------------------------------------------------------------------------

    def new_session(self) -> None:
        """Close the current session; the next run starts a fresh one."""
        self._close_session()

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

    def close(self) -> None:
        """The end of this agent: the session closed, the MCP servers stopped."""
        self._close_session()
        if self._mcp is not None:
            self._mcp.close()

    def _close_session(self) -> None:
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
        **options: object,
    ) -> RunSummary:
        config = self.config(**options)
        load_dotenv_file(self.workspace)
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
        relay = _Relay()  # this run's events, for tools that report (new_context)
        mcp_problems = self.prepare_mcp()
        tools = self._tools(config.strategy, memory_index, relay)
        system = join_sections(self._sections(config.strategy, memory_index))
        context.configure(
            self.compact_settings(provider.context_window), system=system, tools=tools.schemas()
        )
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
        )
        relay.target = runner.emit
        self.last_runner = runner
        self._last_memory_index = memory_index
        block = self.notebook_block(active) if config.notebook else None
        if block is not None and block.total:
            runner.emit(Notice(block.summary()))
        for event in memory_events:
            runner.emit(event)
        for text in mcp_problems:
            runner.emit(Notice(text, "warning"))
        if not config.memory:
            self._withhold_memory(active, runner)
        if config.provider == "auto" and provider.name == "demo":
            runner.emit(
                Notice(
                    "no ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL is set, so this run uses the "
                    "offline demo provider (a fixed script). Set a key, or pass --provider."
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
        if summary.status == "done" and config.memory:
            self._update_memory(new_messages, provider, active)
        return summary

    # --- the notebook: the activity block that begins a run's user message ----------------------

    def notebook_block(self, active: ActiveSession | None = None) -> ActivityBlock | None:
        """The cells the next run of ``active`` (default: the current session) would report.

        Redacted here, before anything sends or writes it: a key typed into a cell is not
        the model's business, and the request is not redacted elsewhere.
        """
        if self.notebook is None:
            return None
        active = active if active is not None else self.session
        seen = active.notebook_seen if active is not None else None
        records = self.notebook.cells.records()
        cells = cells_for_run(records, seen)
        block = render_activity(cells, budget_bytes=max(self.settings.notebook_context_bytes, 500))
        if block.text and self.settings.redact_secrets:
            block = ActivityBlock(Redactor().text(block.text), block.shown, block.total, block.last_seq)
        return block

    def _first_message(self, prompt: str, block: ActivityBlock | None, active: ActiveSession) -> Message:
        if block is None:
            return Message(role="user", content=prompt)
        pictures = self._cell_images(block, active)
        active.notebook_seen = max(block.last_seq, self.notebook.cells.last_seq if self.notebook else 0)
        if not block.text:
            return Message(role="user", content=prompt)
        return Message(
            role="user",
            content=f"{block.text}\n\n{prompt}",
            notebook=NotebookMark(chars=len(block.text), cells=block.shown),
            parts=tuple(pictures),
        )

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
            return self.session.context.spill_all(emit)
        return self.session.context.compact(self.provider_for_context(), "manual", emit)
    def _cell_images(self, block: ActivityBlock, active: ActiveSession) -> list[ImagePart]:
        """The images the block's cells displayed (the newest few), stored in the session (issue-14)."""
        if self.notebook is None or not block.shown:
            return []
        cells = cells_for_run(self.notebook.cells.records(), active.notebook_seen)[-block.shown :]
        raw = [picture for cell in cells for picture in cell.images][-NOTEBOOK_IMAGES:]
        parts = []
        for data, media_type in raw:
            try:
                parts.append(images.store(active.writer.dir, data, media_type))
            except (images.ImageError, OSError):
                continue  # the block's text already names the image; it just is not sent
        return parts

    # --- memory: the index for a run, bodies withheld, the update after it ------------------------

    def _memory_index(self, enabled: bool) -> str | None:
        """The index for the next request (after any pending update), or ``None``."""
        if not enabled:
            return None
        self.memory.wait(self.memory_wait)
        try:
            return self.memory.prompt_index()
        except OSError:
            return None  # said by _memory_for_run; %context only describes

    def _memory_for_run(self, enabled: bool, events: list[RunEvent]) -> str | None:
        """The index for this run; what earlier updates did, and any problem, as events."""
        if not enabled:
            return None
        if not self.memory.wait(self.memory_wait):
            events.append(
                Notice(
                    "the memory update of the previous run is still running; this run sees memory "
                    "as it was before it",
                    "warning",
                )
            )
        for report in self.memory.take_reports():
            events.append(
                MemoryUpdated(tuple(report.changes), tuple(report.ignored), report.error, report.session_id)
            )
            events.append(Notice(report.summary(), "warning" if report.error or report.ignored else "info"))
        try:
            index = self.memory.prompt_index()
        except OSError as exc:
            events.append(Notice(f"memory left out of this run: {exc}; check %memory show", "warning"))
            index = None
        events.extend(Notice(text, "warning") for text in self.memory.take_notices())
        return index

    def _withhold_memory(self, active: ActiveSession, runner: Runner) -> None:
        """Memory is off: notes read in earlier runs leave the conversation (an ``edit`` replace)."""
        messages, count = withhold_bodies(active.conversation.messages())
        if count:
            active.conversation.replace("edit", messages)
            active.context.forget_anchor()  # the last usage measured the bodies
            runner.emit(
                Notice(f"memory is off: {count} memory note(s) read earlier are withheld from this run")
            )

    def _update_memory(self, messages: list[Message], provider: Provider, active: ActiveSession) -> None:
        if not _plays_memory(provider):
            return
        writer = active.writer
        self.memory.update_async(
            messages,
            provider=provider,
            policy=self.settings.memory_policy,
            session_id=active.id,
            note=lambda text, level: writer.note(text, level),
        )

    # --- what a run offers: tools and system prompt, by strategy ----------------------------------

    def _tools(self, strategy: str, memory_index: str | None = None, emit: Emit | None = None) -> ToolRegistry:
        # read_memory only when memory is on and holds something: else it is noise.
        reader = MemoryReader(self.memory) if memory_index else None
        tools = build_tools(self.workspace, python_executor=self.python_executor, memory=reader)
        if self.notebook is not None:
            for tool in notebook_tools(self.notebook):
                tools.add(tool)
        for user_tool in user_tools():
            if user_tool.name not in tools:
                tools.add(user_tool.as_tool())
        if strategy == "rollover":
            tools.add(new_context_tool(self.workspace, lambda intent: self._declare_rollover(intent, emit)))
            tools.add(search_history_tool(self.history, lambda: self.session.id if self.session else None))
        for tool in self._mcp.tools() if self._mcp is not None else ():
            tools.add(tool)
        return tools

    # --- MCP servers -------------------------------------------------------------------------

    @property
    def mcp(self) -> McpHub:
        """The kernel's MCP servers (``%mcp``); nothing runs until a run or ``%mcp`` starts them."""
        if self._mcp is None:
            self._mcp = McpHub()
        return self._mcp

    def prepare_mcp(self, *, start: bool = True) -> list[str]:
        """Match the servers to the configuration now, starting new ones; problems as lines."""
        hub = self.mcp
        hub.start_timeout, hub.call_timeout = self.settings.mcp_start_timeout, self.settings.mcp_timeout
        config = load_config(self.workspace, self.settings.mcp_servers)
        return hub.configure(config, self.workspace, start=start)
    def describe_tools(self) -> str:
        """``%agent --tools``: every tool the next run offers, the user's own marked."""
        tools = self._tools(self._strategy(), self._memory_index(self.settings.memory_policy != "off"))
        mine = {t.name: t for t in user_tools()}
        lines = [f"{len(tools)} tools (permission mode {self.settings.permission_mode}):"]
        for tool in tools:
            kind = "changes things" if tool.side_effect else "read-only"
            origin = " · yours (@tool)" if tool.name in mine and mine[tool.name].args is tool.args else ""
            summary = tool.description.split(". ")[0].strip().rstrip(".")
            lines.append(f"  {tool.name:<18} {kind}{origin} — {summary[:90]}")
        if not mine:
            lines.append("  (no @tool functions registered: from pseudoclaude_nb import tool)")
        return "\n".join(lines)

    def _sections(self, strategy: str, memory_index: str | None = None) -> list[tuple[str, str]]:
        sections = system_sections(self.workspace)
        if strategy == "rollover":
            sections.append(("rollover", GUIDANCE))
        return with_memory(sections, memory_index)

    def _declare_rollover(self, intent: Intent, emit: Emit | None) -> str:
        if self.session is None:
            raise ToolError("new_context needs a session; keep working in this window")
        return self.session.context.declare(intent, emit or _ignore)

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


class _Relay:
    """The events of one run, for what is built before its runner (the tools)."""

    def __init__(self) -> None:
        self.target: Emit = _ignore

    def __call__(self, event: RunEvent) -> None:
        self.target(event)


def _ignore(event: RunEvent) -> None:
    pass


def _plays_memory(provider: Provider) -> bool:
    """Whether to ask ``provider`` for a memory update at all.

    A scripted provider whose script has no ``memory_ops`` (the demo, most test and notebook
    scripts) scripts no memory updates: asking would only fail with "the script ran out".
    """
    script = getattr(provider, "script", None)
    return script is None or bool(getattr(script, "memory_ops", True))
