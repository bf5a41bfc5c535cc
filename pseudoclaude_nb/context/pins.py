"""Pins: the user's facts and instructions that every request carries verbatim (SPEC §19).

A pin is a ``pin`` entry in the session's log, and an ``unpin`` entry ends it; neither is
part of the conversation, so no replace (a summary, a rollover, an undo) can drop one. The
model sees the pins as a system-prompt section (``prompt.pins_section``), so they survive
Layer 2 and a handoff without either repeating them. ``Pins`` is the agent's view of the
current session's pins: loaded with the session (``LoadResult.pins``), written through its
writer, and held in memory while there is no session yet — the run that starts one writes
them into it. It never imports IPython and renders nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Protocol

from .. import safeio
from ..errors import ConfigError
from ..messages import Message, new_id
from ..prompt import pins_section
from ..session.entries import MessageEntry, Pin, PinEntry, UnpinEntry, parse_line
from ..workspace import LOG_NAME
from .estimate import estimate_text

# A pin is sent with every request: a runaway one must not eat the window. A longer text
# belongs in a file, with a pin that says to read it.
PIN_MAX_BYTES = 20_000
# Their total, as a share of the window (issue 41; %config PseudoClaude.pins_max_share): twelve
# pins of 19 KB took 65,000 tokens of a 50,000-token window, and compaction cannot shrink pins.
PINS_MAX_SHARE = 0.25
# What to do about too many pins, said by the refusal and by the notice before a run.
_ADVICE = (
    "every request carries the pins and compaction cannot shrink them: unpin some (%context pins, "
    "then %context unpin N), or put the text in a file and pin an instruction to read it"
)


def pins_tokens(texts: list[str]) -> int:
    """The pins' section as the model gets it (its heading too), as ``%context`` counts it."""
    return estimate_text(pins_section(texts)) if texts else 0


def pins_notice(texts: list[str], window: int, share: float, source: str | None = None) -> str | None:
    """A run's notice before its first request when the pins in force take more than ``share``
    of its ``window`` (a window learned smaller than the one they were pinned under); else None."""
    tokens = pins_tokens(texts)
    if window <= 0 or tokens <= window * share:
        return None
    where = f" ({source})" if source else ""
    return (
        f"the pins in force take ~{tokens:,} tokens, {tokens / window:.0%} of the {window:,}-token "
        f"window{where}, over the {share:.0%} pins may take (%config PseudoClaude.pins_max_share); " + _ADVICE
    )


class PinWriter(Protocol):
    """What pins need of the session writer (``SessionRecord``)."""

    def record(self, entry: PinEntry | UnpinEntry) -> None: ...


class Pins:
    """The pins in force for the current session, or held for the session a run will start."""

    def __init__(self) -> None:
        self._items: list[Pin] = []  # the session's, in log order
        self._held: list[Pin] = []  # set with no session: written when one becomes current
        self._writer: PinWriter | None = None

    # --- the session ---------------------------------------------------------------------------

    def attach(self, writer: PinWriter, loaded: list[Pin]) -> None:
        """A session became current with the pins its log holds; held pins are written into it."""
        self._writer, self._items = writer, list(loaded)
        held, self._held = self._held, []
        for pin in held:
            writer.record(PinEntry.new(pin.text, id=pin.id, ts=pin.ts))
            self._items.append(pin)

    def detach(self) -> None:
        """The session closed: its pins stay in its log, and pins set now are held."""
        self._writer, self._items = None, []

    # --- what the magics and the prompt read -----------------------------------------------------

    @property
    def held(self) -> bool:
        """True when the pins shown are held for a session not started yet."""
        return self._writer is None

    def items(self) -> list[Pin]:
        return list(self._items if self._writer is not None else self._held)

    def texts(self) -> list[str]:
        return [p.text for p in self.items()]

    # --- changes -------------------------------------------------------------------------------

    def add(self, text: str, *, window: int = 0, share: float = PINS_MAX_SHARE) -> int:
        """Pin ``text`` as it is; its number (1-based). Written at once when there is a session.

        ``window``: the window the pins' total may take ``share`` of (0: not checked); a pin
        past it is refused with the figures (``ConfigError``) and nothing is written.
        """
        if not text.strip():
            raise ConfigError("nothing to pin: give the text, e.g. %context pin use pnpm, never npm")
        size = len(text.encode("utf-8", errors="surrogatepass"))
        if size > PIN_MAX_BYTES:
            raise ConfigError(
                f"this pin is {size:,} bytes; a pin is sent with every request, so the limit is "
                f"{PIN_MAX_BYTES:,}. Put the text in a file and pin an instruction to read it"
            )
        if window > 0:
            total, cap = pins_tokens([*self.texts(), text]), int(window * share)
            if total > cap:
                raise ConfigError(
                    f"pin refused: with it the pins would take ~{total:,} tokens, {total / window:.0%} "
                    f"of the {window:,}-token window; pins may take {share:.0%} of it (~{cap:,} tokens, "
                    f"%config PseudoClaude.pins_max_share = {share:g}); " + _ADVICE
                )
        pin = Pin(new_id(), text, time.time())
        if self._writer is None:
            self._held.append(pin)
            return len(self._held)
        self._writer.record(PinEntry.new(pin.text, id=pin.id, ts=pin.ts))  # durable before it counts
        self._items.append(pin)
        return len(self._items)

    def remove(self, number: int) -> Pin:
        """Drop pin ``number`` (1-based, as ``%context pins`` shows it); the pin dropped."""
        items = self._items if self._writer is not None else self._held
        if not items:
            raise ConfigError("there are no pins to drop")
        if not 1 <= number <= len(items):
            raise ConfigError(f"no pin #{number}: pins are numbered 1 to {len(items)} (%context pins)")
        pin = items[number - 1]
        if self._writer is not None:
            self._writer.record(UnpinEntry.new(pin.id))
        del items[number - 1]
        return pin


def message_text(m: Message) -> str:
    """What a pin of message ``m`` keeps: a prompt as typed (without the notebook activity
    block before it), an answer's text, or a tool result."""
    if m.tool_result is not None:
        return m.tool_result.content
    if m.notebook is not None:
        # The block is followed by a blank line, then the prompt (agent.notebook).
        return m.content[m.notebook.chars :].removeprefix("\n\n")
    return m.content


def first_prompt(session_dir: Path) -> str | None:
    """The session's first user prompt as typed: its first user text message without the
    notebook activity block before it. Reads the log only up to that message."""
    try:
        with os.fdopen(safeio.open_file(Path(session_dir) / LOG_NAME), "rb") as f:
            for line in f:
                entry = parse_line(line)
                if isinstance(entry, MessageEntry):
                    m = entry.message
                    if m.role == "user" and m.tool_result is None:
                        return message_text(m)
    except OSError:
        return None
    return None
