"""``%agent`` / ``%%agent``: parse the options, run the core, render. Nothing more."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments

from ..agent import Agent
from ..config import MODES
from ..errors import PseudoClaudeError
from ..events import Notice
from ..notebook.skip import parse_counts
from ..run_marker import RunMarker
from ..widgets.confirm import notebook_ask
from .args import parse
from .notebook import IPythonNotebook
from .render import in_notebook, memory_outcome, renderer_for
from .studio import studio_listeners

DEMO_PLAYS_A_SCRIPT = (
    "the demo provider plays a fixed script (the stats-module task of the quickstart), whatever the "
    "prompt says; for a model that follows your prompt, set ANTHROPIC_API_KEY or OPENAI_API_KEY and "
    "use --provider anthropic or openai"
)


@magics_class
class AgentMagics(Magics):
    def __init__(self, shell: Any, agent: Agent) -> None:
        super().__init__(shell)
        self._agent = agent

    @magic_arguments()
    @argument(
        "--provider",
        help="anthropic, openai, offline, demo, scripted or auto (default: %%config PseudoClaude.provider)",
    )
    @argument("--model", help="model name (default: the provider's)")
    @argument("--new", action="store_true", help="start a new session for this run")
    @argument("--session", metavar="ID", help="resume session ID and continue it")
    @argument(
        "--strategy",
        metavar="NAME",
        help="context strategy: compact, rollover, api (the provider's own), or your own as "
        "MODULE:CLASS (a file in this folder works) or an installed strategy's name",
    )
    @argument("--mode", choices=MODES, help="tool permissions: read-only, ask (default) or auto")
    @argument("--no-memory", action="store_true", help="leave memory out of this run")
    @argument("--no-notebook", action="store_true", help="leave the notebook activity block out")
    @argument(
        "--skip-cells",
        metavar="COUNTS",
        help="leave these cells (execution counts: 3,5 or 3-5) out of this run's notebook block",
    )
    @argument(
        "--confirm-compaction",
        action="store_true",
        help="pause before a compaction or rollover replace: approve, edit or reject it (this run)",
    )
    @argument("--tools", action="store_true", help="list the tools the agent has (yours too); run nothing")
    @argument("--max-steps", type=int, metavar="N", help="model requests at most (default 50)")
    @argument("--context-window", type=int, metavar="N", help="override the window, in tokens")
    @argument("--script", metavar="PATH", help="script file for --provider scripted")
    @argument(
        "--thinking", type=int, metavar="N", help="Anthropic extended thinking with N tokens (>= 1024; 0 off)"
    )
    @argument("--effort", metavar="LEVEL", help="reasoning_effort for OpenAI-compatible reasoning models")
    @argument("--quiet", action="store_true", help="show only notices and the end line")
    @argument("prompt", nargs="*", help="what to ask (or the cell body with %%agent)")
    # The prompt goes as typed (SPEC §19): IPython would turn f"{name}" into f"Ada" and $price
    # into its value. The agent reads kernel values itself, with inspect_variable.
    @no_var_expand
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> None:
        """Run the coding agent on PROMPT in the notebook's folder.

        Successive %agent cells continue the kernel's current session; --new starts
        another, --session ID resumes a stored one. Examples::

            %agent --provider demo --mode auto "add a stats module with a test"

            %%agent --mode auto
            Refactor utils.py and run the tests.

            %agent why did my last cell fail?

        Each run begins with the cells you ran since the previous run (--no-notebook
        leaves them out); --tools lists the tools, your @tool functions included.
        """
        args = parse(self.agent, line)
        if args.tools:
            # The tables are %agent --tools' only (and the other magics'): not on a run's way.
            from .tables import Column, Note, Table, emit

            try:
                head, rows, notes = self._agent.tool_listing()
            except PseudoClaudeError as exc:  # a bad workspace setting: say it, as a run does
                raise UsageError(str(exc)) from None
            table = Table(
                (Column("tool", mono=True), Column("effect"), Column("does", code=True)), indent="  "
            )
            for row in rows:
                table.add(*row)
            emit(self.shell, head, table, *(Note(f"  {note}") for note in notes))
            return
        prompt = " ".join(_unquote(word) for word in args.prompt)
        if cell is not None:
            prompt = (prompt + "\n\n" + cell).strip() if prompt else cell.strip()
        if not prompt:
            raise UsageError(
                '%agent needs a prompt: %agent "what to do", or %%agent with the prompt as the cell body'
            )
        if args.max_steps is not None and args.max_steps < 1:
            raise UsageError("--max-steps must be at least 1")
        if args.context_window is not None and args.context_window < 1000:
            raise UsageError("--context-window is in tokens and must be at least 1000")
        if args.thinking is not None and (args.thinking < 0 or 0 < args.thinking < 1024):
            raise UsageError("--thinking is a token budget of at least 1024 (or 0 for off)")
        if args.new and args.session:
            raise UsageError("use either --new or --session ID, not both")
        if args.strategy is not None:
            args.strategy = _strategy(args.strategy)
        skip = _skip_counts(args.skip_cells)
        renderer = renderer_for(self.shell, quiet=args.quiet)
        if (args.provider or self._agent.settings.provider) == "demo":
            # The demo's script (its files and turns) is imported when the demo is asked for only.
            from ..providers.demo_script import DEMO_PROMPT

            if prompt.strip() != DEMO_PROMPT:
                renderer(Notice(DEMO_PLAYS_A_SCRIPT))
        self._agent.skip_counts = skip
        session = self._agent
        marker = RunMarker(lambda: session.session.dir if session.session else None, renderer)
        try:
            self._agent.run(
                prompt,
                new=args.new,
                session_id=args.session,
                listeners=[renderer, marker, *studio_listeners(self.shell)],
                provider=args.provider,
                model=args.model,
                strategy=args.strategy,
                permission_mode=args.mode,
                memory=False if args.no_memory else None,
                notebook=False if args.no_notebook else None,
                max_steps=args.max_steps,
                context_window=args.context_window,
                script=args.script,
                quiet=args.quiet or None,
                thinking_budget=args.thinking,
                reasoning_effort=args.effort,
                confirm_compaction=True if args.confirm_compaction else None,
                confirm=notebook_ask(self._agent.ask) if in_notebook(self.shell) else None,
            )
        except PseudoClaudeError as exc:
            # Setup problems (provider, session lock, …): one line that says what to do.
            raise UsageError(str(exc)) from None
        finally:
            self._agent.skip_counts = frozenset()
            if isinstance(self._agent.notebook, IPythonNotebook):
                self._agent.notebook.finish_run()  # numbering after the cells the run ran
        memory_outcome(self._agent, renderer)


def _strategy(value: str) -> str:
    from ..context.names import normalized

    try:
        return normalized(value)
    except ValueError as exc:
        raise UsageError(f"--strategy {exc}") from None


def _skip_counts(value: str | None) -> frozenset[int]:
    if value is None:
        return frozenset()
    try:
        return parse_counts(value)
    except ValueError as exc:
        raise UsageError(
            f"--skip-cells {value}: {exc}. Usage: --skip-cells 3,5 or --skip-cells 3-5 "
            "(execution counts, the n of In [n])"
        ) from None


def _unquote(word: str) -> str:
    # IPython splits magic lines without POSIX quote removal: '"fix it"' keeps its quotes.
    if len(word) >= 2 and word[0] == word[-1] and word[0] in "'\"":
        return word[1:-1]
    return word
