"""The context gauge: the estimate against the window, live during a run.

One ``ipywidgets.HTML`` holding an inline SVG, so it renders in JupyterLab, Notebook 7,
VS Code and Colab without a front-end extension (a running ``%agent``'s live gauge is no
widget: ipywidgets is imported when a snapshot's widget is first made, not on the way to a
kernel's first request, issue 47). ``GaugeState`` is plain data and
``gauge_svg``/``gauge_text`` are pure functions of it; ``ContextGauge`` only observes
run events and re-renders. A run's gauge keeps what a compaction takes away: the peak
estimate of the run (a tick and "peak ~N") and the last drop (before → after), so the gauge
read after the run still says how close the context came to the line.
"""

from __future__ import annotations

import functools
import html
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from ..cost import UNKNOWN, Spend, ratio_text
from ..events import (
    Compacted,
    CompactStarted,
    ContextState,
    Dropped,
    RolloverCommitted,
    RunEvent,
    RunFinished,
    Spilled,
    StepFinished,
)
from ..messages import Usage
from .picture import picture
from .theme import BG0, BRAND, ERROR, FG1, FG2, NO_MATH, TRACK, fill, spaced, stroke


@dataclass(frozen=True)
class GaugeState:
    estimated_tokens: int = 0
    anchor_tokens: int = 0
    context_window: int = 0
    marks: tuple[tuple[str, int], ...] = ()  # (label, tokens): the Layer 2 line or rollover limits
    last_usage: Usage | None = None
    spills: int = 0
    compactions: int = 0
    rollovers: int = 0
    breaker_open: bool = False
    status: str = "idle"  # idle | running | compacting… | done | error | interrupted
    peak_tokens: int = 0  # the largest estimate of the run so far
    last_drop: tuple[str, int, int] | None = None  # ("compacted" | "rolled over", before, after)
    # issue 31: the run's requests (model, usage), priced when shown; the session's cost at the end
    requests: tuple[tuple[str | None, Usage], ...] = ()
    session_cost: str = ""

    def cost_text(self) -> str:
        """``run $0.012 · cache hit 82%`` (`` · session $0.34`` once the run ended); '' before any."""
        if not self.requests:
            return ""
        spend = Spend(list(self.requests))
        run = spend.cost().text()
        if run.startswith(UNKNOWN) and self.session_cost == run:
            return f"{run} · {ratio_text(spend.hit_ratio())}"  # said once, not for run and session
        text = f"run {run} · {ratio_text(spend.hit_ratio())}"
        return text + (f" · session {self.session_cost}" if self.session_cost else "")

    @property
    def fraction(self) -> float:
        return min(self.estimated_tokens / self.context_window, 1.0) if self.context_window else 0.0

    @property
    def share(self) -> float:
        """The estimate over the window, not capped: the number said everywhere (the bar caps)."""
        return self.estimated_tokens / self.context_window if self.context_window else 0.0

    @property
    def shown_peak(self) -> int:
        """The peak worth a mark: one above where the estimate is now (0: none)."""
        return self.peak_tokens if self.peak_tokens > self.estimated_tokens else 0


def _drop_text(s: GaugeState) -> str:
    if s.last_drop is None:
        return ""
    what, before, after = s.last_drop
    return f"{what} ~{before:,} → ~{after:,}"


def gauge_text(s: GaugeState, width: int = 30) -> str:
    """One line for terminals and text frontends."""
    if not s.context_window:
        return "context gauge: waiting for the first request"
    filled = round(s.fraction * width)
    anchored = round(min(s.anchor_tokens / s.context_window, 1.0) * width) if s.context_window else 0
    anchored = min(anchored, filled)
    bar = "█" * anchored + "▓" * (filled - anchored) + "░" * (width - filled)
    marks = " · ".join(f"{label} {value:,}" for label, value in s.marks)
    usage = ""
    if s.last_usage is not None:
        u = s.last_usage
        usage = f" · cache read {u.cache_read_input_tokens:,} / write {u.cache_creation_input_tokens:,}"
    if s.requests:
        usage += f" · {s.cost_text()}"
    return (
        f"context ▕{bar}▏ ~{s.estimated_tokens:,} / {s.context_window:,} ({s.share:.0%})"
        + (f" · peak ~{s.shown_peak:,}" if s.shown_peak else "")
        + (f" · {marks}" if marks else "")
        + (f" · {_drop_text(s)}" if s.last_drop else "")
        + usage
        + f" · {s.spills} spilled · {s.compactions} compacted"
        + (f" · {s.rollovers} rolled over" if s.rollovers else "")
        + f" · breaker {'OPEN' if s.breaker_open else 'closed'}"
        + (f" · {s.status}" if s.status not in ("idle", "done") else "")
    )


def gauge_head(s: GaugeState) -> str:
    return (
        f"~{s.estimated_tokens:,} / {s.context_window:,} tokens ({s.share:.0%})"
        if s.context_window
        else "context: waiting for the first request"  # never "~0 / 0 tokens" at a run's start
    )


def gauge_summary(s: GaugeState) -> str:
    """The picture in one sentence (its ``alt``): where the estimate is, the lines, the peak."""
    if not s.context_window:
        return "context gauge: waiting for the first request"
    marks = ", ".join(f"{label} at {value:,}" for label, value in s.marks)
    return (
        f"context gauge: {gauge_head(s)}"
        + (f"; {marks}" if marks else "")
        + (f"; peak ~{s.shown_peak:,}" if s.shown_peak else "")
        + (f"; {_drop_text(s)}" if s.last_drop else "")
    )


def gauge_svg(s: GaugeState, width: int = 560, *, head: bool = True) -> str:
    """The bar: measured part (anchor) solid, estimated suffix lighter, marks as lines.
    ``head``: the headline above the bar (a saved gauge says it as HTML text instead)."""
    bar_w, bar_h, top = width - 20, 18, 22 if head else 6
    window = max(s.context_window, 1)

    def x(tokens: int) -> float:
        return 10 + bar_w * min(max(tokens, 0) / window, 1.0)

    hot = s.marks and s.estimated_tokens >= min(v for _, v in s.marks)
    color = ERROR if hot else BRAND
    peak = s.shown_peak
    labels = [(f"{label} {value:,}", x(value)) for label, value in s.marks]
    rows = _label_rows(labels + ([(f"peak ~{peak:,}", x(peak))] if peak else []), width)
    height = top + 42 + LABEL_ROW * max(rows, default=0)
    suffix, anchor = x(s.estimated_tokens) - 10, x(min(s.anchor_tokens, s.estimated_tokens)) - 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        'role="img" '
        f'aria-label="{html.escape(gauge_text(s))}">',
        f'<rect x="10" y="{top}" width="{bar_w}" height="{bar_h}" rx="3" {fill(TRACK)}/>',
    ]
    if f"{suffix:.1f}" != f"{anchor:.1f}":  # an estimated part as wide as the measured one is hidden under it
        parts.append(
            f'<rect class="pc-gauge-suffix" x="10" y="{top}" width="{suffix:.1f}" '
            f'height="{bar_h}" rx="3" {fill(color, 0.45)}/>'
        )
    parts.append(
        f'<rect class="pc-gauge-anchor" x="10" y="{top}" width="{anchor:.1f}" '
        f'height="{bar_h}" rx="3" {fill(color)}/>'
    )
    if head:
        parts.append(
            f'<text class="pc-gauge-head" x="10" y="14" font-size="12" font-weight="bold" {fill(FG1)}>'
            f"{gauge_head(s)}</text>"
        )
    # No <title> tooltips: the labels under the bar say the same, and a sanitized (untrusted)
    # view prints every title as text beside its label.
    if peak:  # where the run went before its last drop: a thin solid tick, unlike the dashed lines
        px, row = x(peak), rows[-1]
        over = s.marks and peak >= min(v for _, v in s.marks)  # red: the peak that crossed a line
        parts.append(  # a 2 px rect, not a line: a zero-width box counts as invisible to some checks
            f'<rect class="pc-gauge-peak" x="{px - 1:.1f}" y="{top - 2}" width="2" height="{bar_h + 4}" '
            f"{fill(ERROR if over else FG1)}/>"
        )
        parts.append(
            f'<text class="pc-gauge-peak-label" x="{px:.1f}" y="{top + bar_h + 16 + LABEL_ROW * row}" '
            f'font-size="10" text-anchor="{_anchor(px, width)}" {fill(FG1)}>peak ~{peak:,}</text>'
        )
    for (label, value), row in zip(s.marks, rows[: len(s.marks)], strict=True):
        px = x(value)
        parts.append(
            f'<line x1="{px:.1f}" y1="{top - 4}" x2="{px:.1f}" y2="{top + bar_h + 4}" '
            f"{stroke(FG1, 'stroke-dasharray:3,2')}/>"
        )
        parts.append(
            f'<text class="pc-gauge-mark" x="{px:.1f}" y="{top + bar_h + 16 + LABEL_ROW * row}" font-size="10" '
            f'text-anchor="{_anchor(px, width)}" {fill(FG2)}>{html.escape(label)} {value:,}</text>'
        )
    parts.append("</svg>")
    return spaced("".join(parts))


LABEL_ROW = 12  # px between rows of mark labels
_CHAR = 6.0  # px per character of a 10px label, a little over the average, digits included


def _label_rows(labels: list[tuple[str, float]], width: int) -> list[int]:
    """The row of each mark's label: 0 under the bar, or a lower one when it would overlap a
    label already in that row (marks close together: a 200K window's remind, base and hard
    limits are ~35 px apart, their labels ~80 px wide)."""
    taken: list[list[tuple[float, float]]] = []
    rows = []
    for text, px in labels:
        w = len(text) * _CHAR
        start = {"start": px, "middle": px - w / 2, "end": px - w}[_anchor(px, width)]
        span = (start - 4, start + w + 4)
        row = next(
            (i for i, spans in enumerate(taken) if all(span[1] <= a or span[0] >= b for a, b in spans)),
            len(taken),
        )
        if row == len(taken):
            taken.append([])
        taken[row].append(span)
        rows.append(row)
    return rows


def _anchor(px: float, width: int, room: float = 60) -> str:
    """A label centred on its line, unless that would cut it at an edge of the picture."""
    if px > width - room:
        return "end"
    return "start" if px < room else "middle"


def gauge_html(s: GaugeState, *, saved: bool = False) -> str:
    """The gauge as HTML. ``saved``: the form a notebook keeps, the headline as text and the
    bar as a ``picture`` (an untrusted notebook's sanitizer strips inline SVG)."""
    u = s.last_usage
    if u is not None:
        cache = f"last usage: cache read {u.cache_read_input_tokens:,} · cache write {u.cache_creation_input_tokens:,} · "
    else:  # a measured anchor is usage too (from the log); say "none yet" only when there is none
        cache = "" if s.anchor_tokens else "no usage yet · "
    if s.requests:
        cache += f"{html.escape(s.cost_text())} · "
    breaker = f"<b style='color:{ERROR}'>breaker OPEN</b>" if s.breaker_open else "breaker closed"
    status = f" · <b>{html.escape(s.status)}</b>" if s.status not in ("idle", "done") else ""
    peak = f"peak ~{s.shown_peak:,} · " if s.shown_peak else ""
    drop = f"{html.escape(_drop_text(s))} · " if s.last_drop else ""
    suffix = max(s.estimated_tokens - s.anchor_tokens, 0)
    drawing = (
        f"<div class='pc-gauge-head' style='font-weight:bold'>{html.escape(gauge_head(s))}</div>"
        + picture(gauge_svg(s, head=False), gauge_summary(s), "pc-picture pc-gauge-picture")
        if saved
        else gauge_svg(s)
    )
    return (
        f"<div class='pc-gauge' data-estimated='{s.estimated_tokens}' data-window='{s.context_window}' "
        f"data-spills='{s.spills}' data-compactions='{s.compactions}' data-rollovers='{s.rollovers}' "
        f"data-status='{html.escape(s.status)}' data-peak='{s.peak_tokens}'>{drawing}"
        f"<div class='pc-gauge-note {NO_MATH}' style='font-size:85%;color:{FG2}'>measured {s.anchor_tokens:,} + estimated {suffix:,} · "
        f"{peak}{drop}{cache}{s.spills} spilled · {s.compactions} compacted"
        f"{f' · {s.rollovers} rolled over' if s.rollovers else ''} · {breaker}{status}</div></div>"
    )


def state_from_context(state: ContextState) -> dict[str, Any]:
    """The gauge's part of a ``ContextState`` event: the strategy's own marks."""
    return {
        "estimated_tokens": state.estimated_tokens,
        "anchor_tokens": state.anchor_tokens,
        "context_window": state.context_window,
        "marks": state.marks or (("Layer 2", state.threshold),),
        "spills": state.spills,
        "compactions": state.compactions,
        "rollovers": state.rollovers,
        "breaker_open": state.breaker_open,
    }


@functools.cache
def text_repr_html() -> type:
    """An HTML widget whose ``text/plain`` and ``text/html`` forms are its current state, so a
    terminal, a saved notebook, nbconvert or GitHub read it without a widget manager (the class
    is made on first use: ipywidgets is imported then). ``saved``: the HTML a notebook keeps,
    when it differs from the live view's (a picture)."""
    import ipywidgets

    class TextReprHTML(ipywidgets.HTML):
        def __init__(self, *, text: str, saved: str | None = None, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.text = text
            self.saved = saved

        def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
            bundle = super()._repr_mimebundle_(**kwargs) or {}
            bundle["text/plain"] = self.text
            bundle["text/html"] = self.value if self.saved is None else self.saved
            return bundle

    return TextReprHTML


# The live gauge of a run stays in view while the answer below it grows: its output sticks to
# the top of the notebook's scroll area for as long as the cell's outputs are on screen.
STICKY_CSS = (
    "<style>.jp-OutputArea-child:has(.pc-gauge-live){position:sticky;top:0;z-index:5;"
    f"background:{BG0}}}"
    # The output area scrolls its own overflow, which would make it the sticky's scroller.
    ".jp-OutputArea:has(.pc-gauge-live){overflow:visible}</style>"
)


LIVE_EVERY = 0.25  # seconds between a live gauge's re-renders: a tool loop's steps are coalesced


@dataclass
class ContextGauge:
    """A gauge: feed it run events (it is a runner listener).

    A snapshot (``%context``) is an HTML widget. A ``live`` one, a running ``%agent``'s, is
    no widget: an output the renderer shows (``live_bundle``) and hands over as ``handle``,
    updated in place at most every ``LIVE_EVERY`` seconds, the last state always shown (a
    timer sends what a burst of events left). When the run ends ``static_bundle`` replaces
    it: the saved notebook holds HTML and text, nothing to load.
    """

    state: GaugeState = field(default_factory=GaugeState)
    finished: bool = False  # set by RunFinished: later events change nothing
    live: bool = False  # the gauge of a running %agent (sticky), not a snapshot
    handle: Any = None  # the live gauge's display handle
    _lock: Any = field(default_factory=threading.Lock, repr=False)
    _timer: Any = field(default=None, repr=False)
    _shown_at: float = field(default=0.0, repr=False)

    _widget: Any = field(default=None, repr=False)
    # A live gauge's extra HTML before its picture: the styles the run's other outputs share
    # (the renderer's ``TOOL_CSS``), said once, in the one output every run has.
    head: str = ""

    @property
    def widget(self) -> Any:
        """The snapshot's HTML widget, made when first asked for (a gauge only shown as
        ``static_bundle`` opens no widget model at all)."""
        if self._widget is None and not self.live:
            self._widget = text_repr_html()(
                value=self._html(self.state),
                text=gauge_text(self.state),
                saved=self._html(self.state, saved=True),
            )
        return self._widget

    def live_bundle(self) -> dict[str, str]:
        return {"text/html": self._html(self.state), "text/plain": gauge_text(self.state)}

    def static_bundle(self) -> dict[str, str]:
        """The gauge as it ended, as HTML and text; no further re-render is sent."""
        with self._lock:
            self.finished = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        # A run's gauge keeps its sticky style: its long output still scrolls under it.
        return {"text/html": self._html(self.state, saved=True), "text/plain": gauge_text(self.state)}

    def _html(self, state: GaugeState, *, saved: bool = False) -> str:
        if not self.live:
            return gauge_html(state, saved=saved)
        return (
            STICKY_CSS
            + self.head
            + gauge_html(state, saved=saved).replace(
                "<div class='pc-gauge'", "<div class='pc-gauge pc-gauge-live'", 1
            )
        )

    def __call__(self, event: RunEvent) -> None:
        s = self.state
        if self.finished:
            return  # a finished run's gauge stays as it ended
        match event:
            case ContextState(estimated_tokens=estimated):
                status = "running" if s.status != "compacting…" else s.status
                peak = max(s.peak_tokens, estimated)
                s = replace(s, **state_from_context(event), status=status, peak_tokens=peak)
            case StepFinished(usage=usage, model=model):
                s = replace(s, last_usage=usage, requests=(*s.requests, (model, usage)))
            case CompactStarted(before_tokens=before):
                s = replace(s, status="compacting…", peak_tokens=max(s.peak_tokens, before))
            case Compacted(ok=ok, before_tokens=before, after_tokens=after):
                s = replace(
                    s,
                    status="running",
                    compactions=s.compactions + (1 if ok else 0),
                    estimated_tokens=after if ok else s.estimated_tokens,
                    anchor_tokens=after if ok else s.anchor_tokens,
                    peak_tokens=max(s.peak_tokens, before),
                    last_drop=("compacted", before, after) if ok else s.last_drop,
                )
            case Spilled():
                s = replace(s, spills=s.spills + 1)
            case Dropped(before_tokens=before, after_tokens=after):
                s = replace(
                    s,
                    estimated_tokens=after,
                    anchor_tokens=after,
                    peak_tokens=max(s.peak_tokens, before),
                    last_drop=("dropped", before, after),
                )
            case RolloverCommitted(before_tokens=before, after_tokens=after):
                s = replace(
                    s,
                    rollovers=s.rollovers + 1,
                    estimated_tokens=after,
                    anchor_tokens=after,
                    peak_tokens=max(s.peak_tokens, before),
                    last_drop=("rolled over", before, after),
                )
            case RunFinished(summary=summary):
                session = summary.session_spend
                s = replace(
                    s,
                    status="done" if summary.status == "done" else summary.status,
                    session_cost=session.cost().text() if session is not None and session.requests else "",
                )
                self.finished = True
            case _:
                return
        self.update(s)

    def update(self, state: GaugeState) -> None:
        self.state = state
        if not self.live:
            self._render()
            return
        with self._lock:
            if self.finished or self._timer is not None:
                return  # the run's end replaces it / the pending re-render will show this state
            wait = self._shown_at + LIVE_EVERY - time.monotonic()
            if wait <= 0:
                self._render()
                return
            self._timer = threading.Timer(wait, self._trailing)
            self._timer.daemon = True
            self._timer.start()

    def _trailing(self) -> None:
        with self._lock:
            self._timer = None
            if not self.finished:
                self._render()

    def _render(self) -> None:
        self._shown_at = time.monotonic()
        if self.live:
            if self.handle is not None:
                self.handle.update(self.live_bundle(), raw=True)
            return
        if self._widget is not None:
            self._widget.text = gauge_text(self.state)
            self._widget.saved = self._html(self.state, saved=True)
            self._widget.value = self._html(self.state)
