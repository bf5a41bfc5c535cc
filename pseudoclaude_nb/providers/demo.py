"""The ``demo`` provider: the tour's script, told as it really went (issue 44).

A ``ScriptedProvider`` over ``demo_script``'s turns that reads each request before it answers:
the tool results seen so far (by call id, kept across requests), whether the window was
replaced (the messages shrank, a summary or the provider's compaction happened) and whether
rollover's reminder came. A turn is played only when every call of the turn before it came
back without an error; a refused or failed call ends the tour with a turn that says which,
and why the tour needs ``--mode auto``. ``tour`` is the one question mode ``ask`` puts for the
whole tour (``Permissions``), instead of one per change.
"""

from __future__ import annotations

from typing import Any

from ..messages import HOST_REMIND, ToolResult
from .base import Request
from .demo_script import DEMO_PROMPT, DemoTurn, Seen, build_demo_script, demo_turns, tour_text
from .scripted import ScriptedProvider, ScriptTurn

# What the tour's stop turn tells a person to run instead.
AUTO_COMMAND = f'%agent --provider demo --mode auto --new "{DEMO_PROMPT}"'


class DemoProvider(ScriptedProvider):
    def __init__(self, strategy: str = "compact", **kwargs: Any) -> None:
        super().__init__(build_demo_script(strategy), name="demo", **kwargs)
        self.turns: list[DemoTurn] = demo_turns(strategy)
        self.tour = tour_text(self.turns)
        self.stopped: str | None = None  # the stop turn's text, once the tour ended early
        self._results: dict[str, ToolResult] = {}
        self._reminded = False
        self._replaced = False
        self._messages = 0

    def unplayed(self) -> dict[str, int]:
        return {} if self.stopped else super().unplayed()  # a tour that stopped said why

    def _take_turn(self, request: Request) -> tuple[ScriptTurn, int]:
        turn, index = super()._take_turn(request)
        self._observe(request)
        if self.stopped is None and index > 0:
            self.stopped = self._stop_reason(self.turns[index - 1])
        if self.stopped is not None:
            self.turns_used = len(self.script.turns)  # the rest is not played
            return ScriptTurn(text=self.stopped), index
        seen = Seen(
            self._results, replaced=self._replaced, reminded=self._reminded, window=self.context_window
        )
        return turn.model_copy(update={"text": self.turns[index].text(seen)}), index

    def _observe(self, request: Request) -> None:
        messages = request.messages
        for m in messages:
            if m.tool_result is not None:
                self._results[m.tool_result.call_id] = m.tool_result
            if m.host == HOST_REMIND:
                self._reminded = True
        compaction = any(r.kind == "compaction" for m in messages for r in m.reasoning)
        self._replaced |= len(messages) < self._messages or self.summaries_used > 0 or compaction
        self._messages = len(messages)

    def _stop_reason(self, before: DemoTurn) -> str | None:
        """The stop turn's text when a call of the turn before did not succeed, else None."""
        for call in before.calls:
            result = self._results.get(call["id"])
            if result is None or not result.is_error:
                continue
            first = result.content.strip().splitlines()[0] if result.content.strip() else "no reason given"
            target = call["arguments"].get("path") or call["arguments"].get("command")
            what = f"`{call['name']}` of `{target}`" if target else f"`{call['name']}`"
            if first.startswith("refused: "):
                why = first.removeprefix("refused: ").split(" (")[0].split(";")[0]
                return (
                    f"The tour stops here: {what} was refused ({why}). Nothing after it ran, and "
                    "I won't describe steps that did not happen.\n\n"
                    "The tour writes files and runs commands in this folder, so it needs them "
                    f"allowed: run it with `--mode auto`:\n\n    {AUTO_COMMAND}"
                )
            return (
                f"The tour stops here: {what} failed ({first}). Each step needs the one "
                "before it, so nothing after it ran."
            )
        return None
