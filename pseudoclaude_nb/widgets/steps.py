"""The step scrubber: a slider over a session's steps showing the request of the chosen one.

A step is the N-th ``usage`` entry of the log (``session.steps``); the view of a step is the
one ``%context --at STEP`` shows, made by the same renderer (``widgets.step_view``), so
everything read from the log is escaped there. The steps come from the session's timeline
(the timeline view's own, when the scrubber sits under it); a step's request is read from
the nearest replace before it, only when that step is chosen (the slider reports on
release, not while dragging), and its view is kept: choosing it again reads nothing. Only
core ipywidgets (IntSlider, HTML).
"""

from __future__ import annotations

import html
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ipywidgets

from ..errors import PseudoClaudeError
from ..session.step_index import step_index
from ..session.steps import StepIndex, request_at, scan
from ..textsafe import printable
from .settle import Settles
from .step_view import request_html

CACHED = 128  # step views kept (each a bounded table); the oldest chosen is dropped first


@dataclass(frozen=True)
class StepView:
    """What the scrubber shows for one step: ``%context --at``'s HTML and its totals."""

    number: int
    steps: int
    html: str
    messages: int | None = None  # None: the request could not be read (``html`` says why)
    tokens: int = 0

    @property
    def text(self) -> str:
        head = f"step {self.number} of {self.steps}"
        if self.messages is None:
            return f"{head} — could not be read from the log"
        noun = "message" if self.messages == 1 else "messages"
        return f"{head} — {self.messages:,} {noun}, ~{self.tokens:,} tokens"


class StepScrubber(Settles, ipywidgets.VBox):
    """A slider over steps 1..N and, below it, the request the model received at the chosen one.

    ``now``: today's system prompt, memory and tool schema tokens (``magics.context_steps.now_tokens``),
    shown labelled NOW exactly as ``%context --at`` shows them; None says they are unknown.
    Opens at ``step`` (default: the last). A session without steps gets a slider-less note.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        now: dict[str, int] | None = None,
        step: int | None = None,
        index: StepIndex | None = None,
        timeline: Any = None,
        **kwargs: Any,
    ) -> None:
        self.path = Path(path)
        self.now = now
        # The step list, once: from the timeline view's own timeline when it has one.
        if index is None:
            index = step_index(path, timeline) if timeline is not None else scan(path)
        self.index = index
        self._views: OrderedDict[int, StepView] = OrderedDict()
        n = len(self.index.steps)
        self.slider = ipywidgets.IntSlider(
            value=min(max(step or n, 1), max(n, 1)),
            min=1,
            max=max(n, 1),
            description="step",
            continuous_update=False,  # one replay when the slider is let go, not one per step passed
            layout={"display": "flex" if n > 1 else "none"},
        )
        self.label = ipywidgets.HTML()
        self.request = ipywidgets.HTML()
        self.slider.observe(lambda change: self._show(change["new"]), names="value")
        super().__init__(children=[self.slider, self.label, self.request], **kwargs)
        self.add_class("pc-step-scrubber")
        if n:
            self._show(self.slider.value)
        else:
            self.label.value = "<i>no steps yet: no model response is logged</i>"

    @property
    def steps(self) -> int:
        return len(self.index.steps)

    def view(self, n: int) -> StepView:
        """Step ``n``'s view: computed the first time it is asked for, then kept."""
        if n in self._views:
            self._views.move_to_end(n)
            return self._views[n]
        try:
            req = request_at(self.path, n, index=self.index)
        except PseudoClaudeError as exc:
            page = f"<div class='pc-context-step'>! {html.escape(printable(str(exc), one_line=True))}</div>"
            shown = StepView(n, self.steps, page)
        else:
            shown = StepView(n, req.steps, request_html(req, self.now), len(req.rows), req.tokens)
        self._views[n] = shown
        if len(self._views) > CACHED:
            self._views.popitem(last=False)
        return shown

    def _show(self, n: int) -> None:
        if not self.steps:
            return
        shown = self.view(n)
        self.label.value = f"<small>{html.escape(shown.text)}</small>"
        self.request.value = shown.html

    @property
    def current(self) -> StepView | None:
        return self.view(self.slider.value) if self.steps else None

    def text(self) -> str:
        shown = self.current
        return shown.text if shown else "no steps yet: no model response is logged"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        shown = self.current
        bundle["text/plain"] = self.text()
        bundle["text/html"] = shown.html if shown else f"<i>{html.escape(self.text())}</i>"
        return bundle
