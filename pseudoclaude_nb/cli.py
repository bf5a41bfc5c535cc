"""``python -m pseudoclaude_nb demo``: the offline demo, through a real IPython shell; and
``python -m pseudoclaude_nb lab``: the strategy lab's tables (``pseudoclaude_nb.lab``).

The demo loads the extension into an IPython ``InteractiveShell`` and runs the same magics a
notebook user would type, so what you see here is what a notebook shows (as text).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .config import STRATEGIES
from .providers.demo_script import DEMO_PROMPT

if TYPE_CHECKING:
    from .lab.experiments import LabReport, LabSizes
    from .lab.real import RealModel


def jupyter_command(executable: str | None = None) -> str | None:
    """How to start ``jupyter`` from this Python's environment: ``jupyter`` when that is the
    one on PATH, else its full path (a venv run as ``.venv/bin/python`` without activating it
    has its ``jupyter`` off PATH); None when the environment has none."""
    bindir = Path(executable or sys.executable).parent
    here = next((p for p in (bindir / "jupyter", bindir / "jupyter.exe") if p.is_file()), None)
    if here is None:
        return None
    on_path = shutil.which("jupyter")
    if on_path is not None and Path(on_path).resolve() == here.resolve():
        return "jupyter"
    return shlex.quote(str(here))


# What the demo itself writes and may find from an earlier demo run there, and what a
# notebook opened in that folder adds. Anything else could be imported by its commands.
DEMO_NAMES = frozenset(
    {
        "stats.py",
        "test_stats.py",
        "make_sample_log.py",
        "check_sample.py",
        "sample_run.log",
        "__pycache__",
        ".pseudoclaude",
        ".ipynb_checkpoints",
        ".virtual_documents",
    }
)


def foreign_names(workspace: Path) -> list[str]:
    """What in ``workspace`` the demo did not make: its commands must not meet it.

    The demo runs ``python -m unittest`` and ``python check_sample.py`` there in mode
    ``auto``, and Python puts that folder first on ``sys.path``: a ``unittest.py`` (or
    ``statistics.py``, any module) that a cloned repository put there would run instead. A
    link is foreign whatever its name (``stats.py`` -> a file elsewhere).
    """
    try:
        entries = list(os.scandir(workspace))
    except FileNotFoundError:
        return []
    return sorted(
        e.name
        for e in entries
        if e.is_symlink() or not (e.name in DEMO_NAMES or (e.name.endswith(".ipynb") and e.is_file()))
    )


def run_demo(workspace: Path, *, quiet: bool = False, strategy: str = "compact") -> int:
    foreign = foreign_names(workspace)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        print(
            f"the demo runs its commands in mode auto, so it works only in a new folder or one an "
            f"earlier demo made; {workspace} also holds {shown}. Pick another folder with --workspace "
            "(the default is ./pseudoclaude-demo)",
            file=sys.stderr,
        )
        return 2
    # The demo's shell is its own: a profile of its own in a folder that goes when it ends,
    # and no history, so nothing lands in ~/.ipython and no startup file of the user's runs.
    with tempfile.TemporaryDirectory(prefix="pseudoclaude-demo-ipython-") as ipython_dir:
        return _run_demo(workspace, ipython_dir, quiet=quiet, strategy=strategy)


def _run_demo(workspace: Path, ipython_dir: str, *, quiet: bool, strategy: str) -> int:
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    workspace.mkdir(parents=True, exist_ok=True)
    os.chdir(workspace)
    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config, ipython_dir=ipython_dir)
    cells = [
        "%load_ext pseudoclaude_nb",
        f"%agent --provider demo --mode auto --new --strategy {strategy} "
        f"{'--quiet ' if quiet else ''}{shlex.quote(DEMO_PROMPT)}",
        "%context",
        "%sessions list",
    ]
    # Bold prompts on a terminal only: piped into a file or a pager, no escape codes.
    bold, plain = (
        ("\033[1m", "\033[0m") if sys.stdout.isatty() and not os.environ.get("NO_COLOR") else ("", "")
    )
    for cell in cells:
        print(f"\n{bold}In: {cell}{plain}")
        result = shell.run_cell(cell, store_history=False)
        if not result.success:
            return 1
    from .magics import current_agent

    agent = current_agent(shell)
    session = agent.session
    if session is not None:
        print(f"\nsession log: {session.writer.path}")
        print(f"files written by the agent are in {workspace}")
        jupyter = jupyter_command()
        if jupyter is None:
            print("continue it in a notebook: JupyterLab is not installed in this Python's environment;")
            print("install it with the '[lab]' extra (pip install -e '.[lab]' in a checkout), then run")
            print(f"  jupyter lab {shlex.quote(str(workspace))}  and, in a new notebook there:")
        else:
            print("continue it in a notebook: start JupyterLab in that folder (it was installed with the")
            print(
                f"'[lab]' extra) with  {jupyter} lab {shlex.quote(str(workspace))}  then, in a new notebook there:"
            )
        print("  %load_ext pseudoclaude_nb")
        print("  %sessions resume --last")
    agent.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pseudoclaude_nb", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the offline demo (no API key needed)")
    demo.add_argument(
        "--workspace",
        type=Path,
        default=Path("pseudoclaude-demo"),
        help="folder the agent works in (default: ./pseudoclaude-demo)",
    )
    demo.add_argument("--quiet", action="store_true", help="only notices and the end line")
    demo.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="compact",
        help="context strategy: compact (a summary, the default), rollover (a handoff to a fresh window) "
        "or api (the provider's own compaction)",
    )
    lab = sub.add_parser(
        "lab",
        help="compare the context strategies on one long scripted task (offline, ~1 min; --quick: seconds), "
        "or on a real model within a budget",
    )
    lab.add_argument("--quick", action="store_true", help="small sizes: the same tables in a few seconds")
    lab.add_argument("--json", type=Path, metavar="PATH", help="also write every figure as JSON to PATH")
    lab.add_argument(
        "--price-model",
        default=None,
        help="the model whose prices.json entry prices the runs (default: claude-sonnet-4-5, or --model)",
    )
    lab.add_argument(
        "--summary-facts",
        type=int,
        default=None,
        help="facts the lab model's summaries and handoffs keep (default: 12)",
    )
    lab.add_argument(
        "--arms",
        default=None,
        help="comma-separated strategies: compact, rollover, api, or MODULE:CLASS (your Strategy, in a file "
        "of this folder); default: every built-in one. none always runs, as the baseline",
    )
    real = lab.add_argument_group(
        "a real model (costs money: the expected cost of each arm is printed, and asked about, first)"
    )
    real.add_argument(
        "--provider", choices=("anthropic", "openai"), default=None, help="run the arms on this provider"
    )
    real.add_argument("--model", default=None, help="the model to run them on")
    real.add_argument(
        "--budget-usd", default=None, metavar="X", help="the most the whole run may spend, in US dollars"
    )
    real.add_argument(
        "--yes", action="store_true", help="spend without asking (after printing the expected cost)"
    )
    real.add_argument(
        "--openai-api",
        choices=("auto", "responses", "chat"),
        default="auto",
        help="OpenAI: the Responses API or chat completions (default: Responses on api.openai.com)",
    )
    args = parser.parse_args(argv)
    if args.command == "demo":
        workspace = args.workspace.resolve()
        try:  # made here, so a path that cannot be a folder is one line, not a traceback
            workspace.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            parser.error(
                f"--workspace {args.workspace}: cannot make it a folder ({exc.strerror}); name another"
            )
        return run_demo(workspace, quiet=args.quiet, strategy=args.strategy)
    if args.command == "lab":
        return run_lab_command(args, parser)
    return 2


def refuse(problem: str) -> int:
    """One line on stderr, before anything ran: what is wrong and how to fix it."""
    print(f"python -m pseudoclaude_nb lab: error: {' '.join(problem.split())}", file=sys.stderr)
    return 2


def run_lab_command(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .cost import price_of
    from .errors import ConfigError
    from .lab import experiments, report

    real = _real_model(args)
    if isinstance(real, str):
        return refuse(real)
    price_model = args.price_model or (real.model if real is not None else experiments.PRICE_MODEL)
    if price_of(price_model) is None:
        if real is not None and args.price_model is None:
            return refuse(
                f"--model {price_model}: prices.json has no price for it, so the budget cannot be kept; "
                "name a model it prices with --price-model"
            )
        return refuse(f"--price-model {price_model}: prices.json has no such model; name one it lists")
    budget = args.summary_facts if args.summary_facts is not None else experiments.DEFAULT_BUDGET
    if budget < 1:
        return refuse("--summary-facts must be at least 1")
    asked = [a.strip() for a in args.arms.split(",") if a.strip()] if args.arms is not None else None
    if asked is not None and not asked:
        return refuse("--arms: (none given); name one or more of compact, rollover, api, or MODULE:CLASS")
    # Checked before the lab runs (a minute), not found when its figures are written (issue 41:
    # a folder or /dev/full failed with a traceback after the whole run; a FIFO blocked).
    problem = json_target_problem(args.json) if args.json is not None else None
    if problem is not None:
        return refuse(f"--json {args.json}: {problem}")
    sizes = experiments.QUICK if args.quick else experiments.FULL
    progress = lambda text: print(f"· {text}", file=sys.stderr)  # noqa: E731
    try:
        if real is not None:
            result = _run_real(real, args, sizes, price_model, asked, progress)
            if isinstance(result, int):
                return result
        else:
            # Every arm, the person's own too, loads before any plays: one that cannot is one line.
            result = experiments.run_lab(
                sizes, price_model=price_model, budget=budget, arms=asked, progress=progress
            )
    except ConfigError as exc:
        return refuse(str(exc))
    print(report.render(result))
    if args.json is not None:
        import json

        try:
            args.json.write_text(json.dumps(result.to_dict(), indent=1) + "\n", encoding="utf-8")
        except OSError as exc:  # e.g. the disk filled up during the run: the tables above stand
            print(
                f"--json {args.json}: not written ({exc.strerror or exc}); the tables above hold the figures",
                file=sys.stderr,
            )
            return 1
        print(f"every figure: {args.json}", file=sys.stderr)
    return 0


def _real_model(args: argparse.Namespace) -> RealModel | str | None:
    """The real model asked for (``lab.real.RealModel``), None for the offline lab, or why not (str)."""
    given = [f"--{n.replace('_', '-')}" for n in ("provider", "model", "budget_usd") if getattr(args, n)]
    if not given and not args.yes:
        return None
    if args.provider is None:
        return f"{', '.join(given) or '--yes'} is for a real model: add --provider anthropic|openai, --model M and --budget-usd X"
    if not args.model:
        return "--provider: name the model to spend on with --model (e.g. --model claude-sonnet-4-5)"
    if args.budget_usd is None:
        return "a real model costs money: give the most the run may spend with --budget-usd X (US dollars)"
    from .lab.real import RealModel, budget_problem

    dollars, problem = budget_problem(args.budget_usd)
    if problem is not None or dollars is None:
        return problem or "--budget-usd: refused"
    return RealModel(args.provider, args.model, dollars, openai_api=args.openai_api)


def _run_real(
    real: RealModel,
    args: argparse.Namespace,
    sizes: LabSizes,
    price_model: str,
    asked: Sequence[str] | None,
    progress: Callable[[str], None],
) -> LabReport | int:
    """Plan (the expected cost of each arm, printed), ask, then spend: the report, or an exit code."""
    from .lab import real as lab_real

    planned = lab_real.plan(real, sizes, price_model=price_model, asked=asked, progress=progress)
    print(planned.text(), flush=True)
    why_not = lab_real.confirmed(planned, yes=args.yes)
    if why_not is not None:
        print(why_not, file=sys.stderr)
        return 2 if why_not.startswith("nobody") else 1
    return lab_real.run_real(planned, progress=progress)


def json_target_problem(path: Path) -> str | None:
    """Why the lab cannot write its figures to ``path`` (a file to make or replace), or None.

    Only a regular file, or a new one in a folder that exists and can be written: a folder, a
    device (``/dev/full``) or a FIFO (its open would block until something reads it) is refused.
    """
    import os
    import stat

    try:
        mode = os.stat(path).st_mode  # follows a link: what the write would open
    except FileNotFoundError:
        folder = path.parent
        if not folder.is_dir():
            return f"the folder {folder} does not exist; create it or name another"
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"cannot write into the folder {folder}; name another"
        return None
    except OSError as exc:
        return f"cannot look at it ({exc.strerror or exc}); name another file"
    if stat.S_ISDIR(mode):
        return "is a folder, not a file; name a file in it, e.g. lab.json"
    if not stat.S_ISREG(mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a special file"
        )
        return f"is {kind}, not a regular file; name a file to write"
    if not os.access(path, os.W_OK):
        return "cannot be written (no permission); name another file"
    return None


if __name__ == "__main__":
    sys.exit(main())
