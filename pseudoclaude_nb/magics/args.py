"""Parsing a magic's line with a mistake explained: the nearest option or action, and the usage.

IPython's ``magic_arguments`` says "unrecognized arguments: --mdoe" and stops. A person who
typed ``--mdoe`` wants to read "did you mean --mode?" and the usage line, so every magic
parses through ``parse`` (and names an unknown action with ``unknown``).
"""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Callable, Sequence
from typing import Any

from IPython.core.error import UsageError
from IPython.utils.process import arg_split

_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)")
_QUOTED = re.compile(r"'([^']*)'")


def parse(magic: Callable[..., Any], line: str, *, intermixed: bool = False) -> argparse.Namespace:
    """``magic``'s arguments from ``line``; a mistake is a ``UsageError`` with a hint and the usage.

    ``intermixed``: options may come after positionals (``%sessions show ID --tail 5``).
    """
    parser: argparse.ArgumentParser = magic.parser  # type: ignore[attr-defined]  # set by magic_arguments
    try:
        if intermixed:
            return parser.parse_intermixed_args(arg_split(line))
        return parser.parse_argstring(line)  # type: ignore[attr-defined]  # IPython's MagicArgumentParser
    except UsageError as exc:
        raise UsageError(explained(parser, str(exc))) from None


def explained(parser: argparse.ArgumentParser, message: str) -> str:
    """``message`` with the nearest known option for each unknown one, then the usage line."""
    hints = []
    if message.startswith("unrecognized arguments:"):
        known = [s for action in parser._actions for s in action.option_strings]
        for word in message.split(":", 1)[1].split():
            if word.startswith("-"):
                name = word.split("=", 1)[0]
                near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
                hints.append(f"{name}: did you mean {near[0]}?" if near else f"{name} is not an option")
    elif (bad := _INVALID_CHOICE.search(message)) is not None:
        near = difflib.get_close_matches(bad["word"], _QUOTED.findall(bad["choices"]), n=1, cutoff=0.6)
        if near:
            hints.append(f"did you mean {near[0]!r}?")
    return "\n".join([message, *hints, usage_line(parser)])


def usage_line(parser: argparse.ArgumentParser) -> str:
    """The usage as "usage: %name [--option …] …" (IPython formats it as a reST literal block)."""
    text = parser.format_usage().strip().removeprefix("::").strip()
    return "usage: " + (text if text.startswith("%") else text.removeprefix("usage: "))


def unknown(what: str, word: str, choices: Sequence[str], *, usage: str = "") -> UsageError:
    """The error for an unknown ``what`` (action, mode, …): the nearest choice, then all of them."""
    near = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    hint = f"did you mean {near[0]!r}? " if near else ""
    tail = f"\n{usage}" if usage else ""
    return UsageError(f"unknown {what} {word!r}; {hint}use one of: {', '.join(choices)}{tail}")


def expand_variables(shell: Any, line: str) -> str:
    """``line`` with ``{x}`` and ``$x`` expanded from the notebook's namespace, as IPython does
    for a magic that does not opt out (``InteractiveShell.var_expand``): for the parts of a
    ``@no_var_expand`` magic that were never free text (``%sessions resume {original}``)."""
    from IPython.utils.text import DollarFormatter

    try:
        return DollarFormatter().vformat(line, args=[], kwargs=dict(shell.user_ns))
    except Exception:  # noqa: BLE001 - IPython keeps a line it cannot format as it is; so does this
        return line
