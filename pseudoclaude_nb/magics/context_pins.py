"""``%context pin TEXT|--first|--message N`` / ``%context pins`` / ``%context unpin N`` (SPEC §19).

Thin: the words come parsed from ``%context``; ``context.pins.Pins`` keeps the pins and
writes them. Pin text is the user's but may come from a log of an untrusted workspace, so
everything printed from it is escaped (``textsafe.printable``).
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

from ..context.estimate import estimate_text
from ..context.pins import first_prompt, message_text
from ..errors import PseudoClaudeError
from ..prompt import pins_section
from ..textsafe import printable
from .tables import Column, Table, emit

USAGE = (
    "usage: %context pin TEXT | %context pin --first | %context pin --message N | "
    "%context pins | %context unpin N"
)
SHOWN_CHARS = 200  # of a pin's text, in the list (the model gets all of it)


def pins_action(magics: Any, verb: str, rest: str) -> None:
    """``verb`` is pin, pins or unpin; ``rest`` the rest of the line as typed."""
    agent = magics._agent
    try:
        if verb == "pin":
            _pin(agent, rest)
        elif verb == "pins" and not rest:
            _list(agent, magics.shell)
        elif verb == "unpin" and rest and len(rest.split()) == 1:
            _unpin(agent, rest)
        else:
            raise UsageError(USAGE)
    except PseudoClaudeError as exc:
        raise UsageError(str(exc)) from None


def _pin(agent: Any, rest: str) -> None:
    words = rest.split()
    if words == ["--first"]:
        text = _first(agent)
    elif words[:1] == ["--message"]:
        text = _message(agent, words[1:])
    else:
        text = rest.removeprefix("-- ")  # "pin -- --first" pins those words
    number = agent.pin(text)  # refused past pins_max_share of the window (issue 41)
    later = " (held: written into the session the next run starts)" if agent.pins.held else ""
    print(printable(f"pinned #{number}: {_shown(text)}{later}", one_line=True))


def _first(agent: Any) -> str:
    if agent.session is None:
        raise UsageError("no session yet: run %agent first, then %context pin --first")
    text = first_prompt(agent.session.dir)
    if not text or not text.strip():
        raise UsageError("this session has no user prompt yet to pin")
    return text


def _message(agent: Any, words: list[str]) -> str:
    """The text of message N of the current history, numbered as ``%context --at`` numbers it."""
    if agent.session is None:
        raise UsageError("no session yet: run %agent first, then %context pin --message N")
    messages = agent.session.conversation.messages()
    valid = f"messages are numbered 1 to {len(messages)} (the # column of %context --at STEP)"
    try:
        (number,) = (int(w) for w in words)
    except ValueError:
        raise UsageError(f"pin --message takes one message number: {valid}") from None
    if not 1 <= number <= len(messages):
        raise UsageError(f"no message #{number}: {valid}")
    text = message_text(messages[number - 1])
    if not text.strip():
        raise UsageError(f"message #{number} has no text to pin (it only calls tools)")
    return text


def _list(agent: Any, shell: Any) -> None:
    pins = agent.pins.items()
    if not pins:
        print("no pins")
        return
    # The whole section as sent (its heading too), as %context's pins part counts it.
    total = estimate_text(pins_section([p.text for p in pins]))
    held = " (held for the session the next run starts)" if agent.pins.held else ""
    table = Table((Column("#"), Column("tokens"), Column("pin")), indent="  ")
    for n, pin in enumerate(pins, 1):
        table.add(f"#{n}", f"~{estimate_text(pin.text):,}", _shown(pin.text))
    emit(
        shell,
        f"{len(pins)} pin{'s' if len(pins) != 1 else ''}, ~{total:,} tokens in every request with the section's heading{held}:",
        table,
    )


def _unpin(agent: Any, word: str) -> None:
    count = len(agent.pins.items())
    valid = f"pins are numbered 1 to {count}" if count else "there are no pins"
    try:
        number = int(word)
    except ValueError:
        raise UsageError(
            f"unpin takes a pin's number, not {printable(word, one_line=True)!r}: {valid}"
        ) from None
    pin = agent.pins.remove(number)
    print(printable(f"unpinned #{number}: {_shown(pin.text)}", one_line=True))


def _shown(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= SHOWN_CHARS else flat[:SHOWN_CHARS] + "…"
