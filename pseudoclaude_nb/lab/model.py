"""The lab's model: the scripted provider playing the task, plus the two answers a fixed
script cannot know in advance.

A real model is asked for a summary (Layer 2) and, under rollover, reminded to hand over;
when either comes depends on the strategy and the window. So the lab model writes both
from what the request shows it, and hands them to the scripted provider as the next
summary or turn — the provider's own usage model (``providers.scripted``: estimated
tokens, cache reads of the unchanged prefix, writes of the rest) prices them like every
other request. Its memory is deliberately simple and stated, in two kinds (``summarizer``):
``newest``, the worst case, keeps only the ``budget`` facts it saw mentioned last
(``facts.newest``) — for a requirement said once at the start, which is what the drift
question is about, the lab then measures what the *host* keeps (the pinned request of a
rollover, pins, the recent tail); ``careful``, the good case (issue 46), keeps every must-keep
fact it saw and fills the rest of its budget with the newest (``facts.careful``), as a summary
that knows what matters would. A real model lies somewhere in that range, or outside it: the
lab on a real model (``lab.real``) measures it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from ..cost import Spend
from ..messages import HOST_FALLBACK, HOST_REMIND, Message, Usage
from ..providers.base import Request, Response, StreamEvent, UsageEvent, collect
from ..providers.scripted import ScriptCall, ScriptedProvider, ScriptTurn
from .facts import careful, newest
from .task import Fact, Task

DEFAULT_BUDGET = 12  # facts a summary or handoff keeps: about a screen of bullet points
Summarizer = Literal["newest", "careful"]
NEWEST: Summarizer = "newest"  # the worst case: the ``budget`` facts mentioned last
CAREFUL: Summarizer = "careful"  # the good case: every must-keep fact seen, then the newest
SUMMARIZERS: tuple[Summarizer, ...] = (NEWEST, CAREFUL)


def summarizer_label(kind: str, budget: int = DEFAULT_BUDGET) -> str:
    """How tables and plots name a summarizer (a real model's is ``real``)."""
    if kind == NEWEST:
        return f"last-{budget} summary"
    return "careful summary" if kind == CAREFUL else "the real model's summaries" if kind == "real" else kind


REREAD_LINES = 120  # what a new window re-reads of each related file (a page, as the task reads)


@dataclass(frozen=True)
class Paid:
    """One request the model answered: what it was for, and its usage as a provider reports it."""

    purpose: str
    usage: Usage


class LabModel:
    """A provider (``providers.base.Provider``) over one ``ScriptedProvider`` for a whole task.

    The agent builds a provider per run; the lab hands it this one every time, so the script
    keeps its place from run to run (``lab.run``)."""

    def __init__(
        self,
        task: Task,
        *,
        context_window: int,
        budget: int = DEFAULT_BUDGET,
        summarizer: Summarizer = NEWEST,
        model: str = "lab-scripted",
    ) -> None:
        self.inner = ScriptedProvider(
            {"model": model, "context_window": context_window, "turns": task.turns}, name="lab"
        )
        self.name = "lab"
        self.model = self.inner.model
        self.context_window = self.inner.context_window
        self.max_output_tokens = self.inner.max_output_tokens
        self.facts: tuple[Fact, ...] = task.facts
        self.budget = budget
        self.summarizer = summarizer
        self.paid: list[Paid] = []
        self.handoffs = 0
        self.summaries = 0
        self._answered: set[str] = set()
        self._reread: list[str] = []  # the related files of the handoff just written

    def __getattr__(self, name: str) -> Any:
        # What else a strategy may ask of the scripted provider is the lab model's too.
        return getattr(self.inner, name)

    # The api strategy (issue 31) sets what it asks of the provider (server-side compaction)
    # on the provider before each request: the scripted provider is the one that emulates it.
    @property
    def server_context(self) -> Any:
        return getattr(self.inner, "server_context", None)

    @server_context.setter
    def server_context(self, value: Any) -> None:
        # setattr: the attribute is the scripted provider's only where the api strategy exists.
        setattr(self.inner, "server_context", value)  # noqa: B010

    # --- the provider interface ---------------------------------------------------------------

    def stream(self, request: Request) -> Iterator[StreamEvent]:
        if request.purpose == "agent":
            note = pending_note(request.messages)
            if note is not None and note.id not in self._answered:
                self._answered.add(note.id)
                self.handoffs += 1
                self.inner.script.turns.insert(self.inner.turns_used, self._handoff_turn(request))
            elif self._reread:
                # The new window's first message says to re-read the related files before
                # changing them; a model that heeds it pays for those reads.
                calls = [
                    ScriptCall(name="read_file", arguments={"path": p, "limit": REREAD_LINES})
                    for p in self._reread
                ]
                self._reread = []
                self.inner.script.turns.insert(
                    self.inner.turns_used,
                    ScriptTurn(text="Re-reading the related files first.", tool_calls=calls),
                )
        elif request.purpose == "summary":
            self.summaries += 1
            self.inner.script.summaries.insert(self.inner.summaries_used, self._summary(request))
        # The api strategy asks the provider to compact on its own: should this request cross its
        # trigger, the scripted provider summarizes with the script's next summary — the lab's,
        # written like Layer 2's, so both compactions forget alike. Taken back if not used.
        offered = request.purpose == "agent" and self.server_context is not None
        used = self.inner.summaries_used
        if offered:
            self.inner.script.summaries.insert(used, self._summary(request, instruction=False))
        try:
            for event in self.inner.stream(request):
                if isinstance(event, UsageEvent):
                    self.paid.append(Paid(request.purpose, event.usage))
                yield event
        finally:
            if offered:
                if self.inner.summaries_used == used:
                    del self.inner.script.summaries[used]
                else:
                    self.summaries += 1

    def complete(self, request: Request) -> Response:
        return collect(self.stream(request))

    @property
    def requests(self) -> list[Request]:
        """Every request the model was asked, in order (summaries and handoffs included)."""
        return self.inner.requests

    def spend(self, price_model: str) -> Spend:
        """Every request's usage, priced as ``price_model`` (summaries and handoffs included)."""
        spend = Spend()
        for paid in self.paid:
            spend.add(paid.usage, price_model)
        return spend

    # --- what a fixed script cannot know ------------------------------------------------------

    def _kept(self, messages: list[Message]) -> list[Fact]:
        remember = careful if self.summarizer == CAREFUL else newest
        return remember(self.facts, messages, self.budget)

    def _summary(self, request: Request, *, instruction: bool = True) -> str:
        """Layer 2's summary, in the sections its instruction asks for, of the newest facts
        (``instruction``: the request ends with the summary instruction, which is no fact)."""
        facts = self._kept(request.messages[:-1] if instruction else request.messages)

        def section(title: str, kinds: tuple[str, ...], suffix: str = "") -> list[str]:
            lines = [f"- {f.text}{suffix}" for f in facts if f.kind in kinds]
            return [f"## {title}", *(lines or ["- (none)"])]

        return "\n".join(
            section("Confirmed requirements", ("constraint", "rule"), " Source: user request.")
            + section("Agent inferences (unverified)", ("note",))
            + section("Unresolved problems", ("error",))
            + section("Files and changes", ("path",))
            + ["## Next steps", "- Continue with the next module."]
        )

    def _handoff_turn(self, request: Request) -> ScriptTurn:
        """``new_context`` with a four-section handoff of the newest facts, the paths as related files."""
        facts = self._kept(request.messages)
        handoff = {
            "confirmed_requirements": [
                {"text": f.text, "source": "user"} for f in facts if f.kind in ("constraint", "rule")
            ],
            "agent_inferences": [f.text for f in facts if f.kind == "note"]
            or ["the modules reviewed so far each have a smoke test"],
            "unresolved_conflicts": [f.text for f in facts if f.kind == "error"],
            "unverified_acceptance_criteria": ["continue with the next module"],
        }
        files = [{"path": f.needle, "role": "other", "note": f.text} for f in facts if f.kind == "path"]
        current = last_read(request.messages)
        if current is not None and current not in {f["path"] for f in files}:
            files.append({"path": current, "role": "implementation", "note": "the module under review"})
        self._reread = [f["path"] for f in files]
        return ScriptTurn(
            text="The context is nearly full: handing over to a fresh window.",
            tool_calls=[
                ScriptCall(name="new_context", arguments={"handoff": handoff, "related_files": files})
            ],
        )


def last_read(messages: list[Message]) -> str | None:
    """The path the window's last ``read_file`` read: the file the work was on."""
    for m in reversed(messages):
        for call in reversed(m.tool_calls):
            path = call.arguments.get("path") if call.name == "read_file" else None
            if isinstance(path, str):
                return path
    return None


def pending_note(messages: list[Message]) -> Message | None:
    """The window's newest host note (rollover reminder or fallback) not yet answered by a handoff."""
    for m in reversed(messages):
        if m.host in (HOST_REMIND, HOST_FALLBACK):
            return m
        if m.role == "assistant" and any(c.name == "new_context" for c in m.tool_calls):
            return None
    return None
