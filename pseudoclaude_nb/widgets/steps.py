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
from collections.abc import Callable
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


# A request of more messages than this is not read when the scrubber opens: it is read when
# its step is chosen (issue 48: the last step of a 10,000-message session is all of it).
OPEN_LIMIT = 200

Now = dict[str, int] | None


class StepScrubber(Settles, ipywidgets.VBox):
    """A slider over steps 1..N and, below it, the request the model received at the chosen one.

    ``now``: today's system prompt, memory and tool schema tokens (``magics.context_steps.now_tokens``),
    shown labelled NOW exactly as ``%context --at`` shows them; None says they are unknown; a
    function returning them is called when a step is first shown. Opens at ``step`` (default:
    the last), showing its request when it has at most ``OPEN_LIMIT`` messages; a longer one
    is read when the slider is moved (the label says so). A session without steps gets a
    slider-less note.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        now: Now | Callable[[], Now] = None,
        step: int | None = None,
        index: StepIndex | None = None,
        timeline: Any = None,
        shared: dict[str, Any] | None = None,
        sliders: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """``shared``: a layout and a style for its HTML parts, ``sliders`` for its slider,
        shared with the view it sits in."""
        self.path = Path(path)
        self._now = now
        self._chosen: int | None = None  # the step whose view is shown (None: none read yet)
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
            **(sliders or {}),
        )
        self.label = ipywidgets.HTML(**(shared or {}))
        self.request = ipywidgets.HTML(**(shared or {}))
        self.slider.observe(lambda change: self._show(change["new"]), names="value")
        if shared:
            kwargs.setdefault("layout", shared["layout"])
        # The slider only when there is more than one step to choose.
        super().__init__(children=[*([self.slider] if n > 1 else []), self.label, self.request], **kwargs)
        self.add_class("pc-step-scrubber")
        if not n:
            self.label.value = "<i>no steps yet: no model response is logged</i>"
        elif (size := self.index.request_size(self.slider.value)) <= OPEN_LIMIT:
            self._show(self.slider.value)
        else:
            self._waiting = (
                f"step {self.slider.value} of {n} — {size:,} messages: move the slider to read a step's "
                f"request (%context --at {self.slider.value} shows this one)"
            )
            self.label.value = f"<small>{html.escape(self._waiting)}</small>"

    _waiting = ""

    @property
    def now(self) -> Now:
        """Today's NOW figures, asked for once (building them may build the agent)."""
        if callable(self._now):
            self._now = self._now()
        return self._now

    def close(self) -> None:
        self.slider.close()  # not among the children when there is one step
        super().close()

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
        self._chosen = n
        self.label.value = f"<small>{html.escape(shown.text)}</small>"
        self.request.value = shown.html

    @property
    def current(self) -> StepView | None:
        """The view shown (None before any is: no steps, or a long request not read yet)."""
        return self.view(self._chosen) if self._chosen is not None else None

    def text(self) -> str:
        shown = self.current
        if shown is not None:
            return shown.text
        return self._waiting or "no steps yet: no model response is logged"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        shown = self.current
        bundle["text/plain"] = self.text()
        bundle["text/html"] = shown.html if shown else f"<i>{html.escape(self.text())}</i>"
        return bundle
