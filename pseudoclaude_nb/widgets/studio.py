"""The context studio (``%studio``): the gauge, the cost, the pins and the session timeline with
its step scrubber (the request at the chosen step), in one panel that follows the session.

It only observes: ``refresh`` reads the agent's dry view of the next request (``%context``'s
manifest), its pins and the current session's log, and redraws what changed; a running
``%agent`` also hands it the run's events (it is a run listener), so the gauge moves during a
run. Whichever session is current when it refreshes is the one shown: a new or resumed session
is followed. ``%studio`` docks it in JupyterLab's side area (``magics.studio``).
"""

from __future__ import annotations

import html
import logging
from dataclasses import replace
from typing import Any

import ipywidgets

from ..errors import PseudoClaudeError
from ..events import RunEvent
from .gauge import ContextGauge, GaugeState
from .settle import close_tree
from .theme import FG2

_log = logging.getLogger(__name__)


def gauge_state(m: Any, before: GaugeState) -> GaugeState:
    """The gauge from a manifest, keeping the peak and the last drop the studio has seen: a
    compaction between two refreshes is shown as the drop it was."""
    state = replace(
        before,
        estimated_tokens=m.estimated_tokens,
        anchor_tokens=m.anchor_tokens,
        context_window=m.context_window,
        marks=tuple(m.lines()),
        spills=m.spills or 0,
        compactions=m.compactions or 0,
        rollovers=int(m.strategy_view.get("rollovers", 0)),
        breaker_open=m.breaker == "open",
        peak_tokens=max(before.peak_tokens, m.estimated_tokens),
        status="idle",
    )
    if state.compactions > before.compactions or state.rollovers > before.rollovers:
        what = "rolled over" if state.rollovers > before.rollovers else "compacted"
        state = replace(state, last_drop=(what, before.estimated_tokens, state.estimated_tokens))
    return state


def cost_html(m: Any) -> str:
    cost = m.cost or {}
    if not cost.get("session"):
        return "<i>no request yet</i>"
    ratio = cost.get("cache_hit_ratio")
    hit = "" if ratio is None else f" · cache hit {ratio:.0%} of the session's input"
    run = f"last run {cost['run']} · " if cost.get("run") and cost["run"] != cost["session"] else ""
    return html.escape(f"{run}session {cost['session']} ({cost['session_requests']} requests){hit}")


def pins_html(texts: list[str]) -> str:
    if not texts:
        return "<i>no pins</i> (<code>%context pin TEXT</code> keeps a line in every request)"
    items = "".join(f"<li>{html.escape(t[:200])}{'…' if len(t) > 200 else ''}</li>" for t in texts)
    return f"<ol style='margin:0;padding-left:1.5em'>{items}</ol>"


class ContextStudio(ipywidgets.VBox):
    """``ContextStudio(agent)``: call ``refresh()`` after each cell; pass it to a run as a listener."""

    def __init__(self, agent: Any, **kwargs: Any) -> None:
        self.agent = agent
        self.gauge = ContextGauge()
        self.cost = ipywidgets.HTML()
        self.pins = ipywidgets.HTML()
        self.head = ipywidgets.HTML()
        self.timeline: Any = None
        self._log_seen: tuple[str, int] | None = None  # (log, size) the timeline was drawn from
        self._timeline_box = ipywidgets.VBox()
        section = f"style='color:{FG2};font-size:90%;margin-top:6px'"
        super().__init__(
            children=[
                # A side panel is narrow: the pictures scale down to its width (they have a viewBox).
                ipywidgets.HTML("<style>.pc-studio svg{max-width:100%;height:auto}</style>"),
                self.head,
                self.gauge.widget,
                ipywidgets.HTML(f"<div {section}>cost</div>"),
                self.cost,
                ipywidgets.HTML(f"<div {section}>pins</div>"),
                self.pins,
                ipywidgets.HTML(f"<div {section}>timeline · choose a step for its request</div>"),
                self._timeline_box,
            ],
            **kwargs,
        )
        self.add_class("pc-studio")
        self.refresh()

    def __call__(self, event: RunEvent) -> None:
        """A run's events: the gauge moves as the run's own does. A run's gauge stops at its
        end; the studio's goes on with the next run (and every refresh)."""
        self.gauge.finished = False
        self.gauge(event)

    def refresh(self, *_: Any) -> None:
        """Redraw from the agent: the next request's manifest, the pins, the session's log."""
        try:
            m = self.agent.next_manifest()
        except PseudoClaudeError as exc:
            self.head.value = f"<b>context studio</b> · {html.escape(str(exc))}"
            return
        except Exception:  # noqa: BLE001 - a panel that cannot redraw keeps what it showed
            _log.debug("the context studio could not refresh", exc_info=True)
            return
        session = self.agent.session
        name = session.id if session is not None else "no session yet (the next %agent starts one)"
        self.head.value = f"<b>context studio</b> · session {html.escape(name)}"
        self.gauge.update(gauge_state(m, self.gauge.state))
        self.cost.value = cost_html(m)
        self.pins.value = pins_html(self.agent.pins.texts())
        self._draw_timeline(session, m)

    def _draw_timeline(self, session: Any, m: Any) -> None:
        if session is None:
            self._set_timeline(None)
            return
        log = session.dir / "conversation.jsonl"
        try:
            seen = (str(log), log.stat().st_size)
        except OSError:
            return
        if seen == self._log_seen:
            return  # nothing was appended: the timeline (and where its scrubber is) stays
        from ..session.timeline import build_timeline
        from .timeline import SessionTimeline

        parts = m.parts
        now = {
            "system": int(parts.get("system", 0)),
            "memory": int(parts.get("memory", 0)),
            "tool_schemas": int(parts.get("tool_schemas", 0)) + int(parts.get("mcp_tool_schemas", 0)),
        }
        self._set_timeline(SessionTimeline(build_timeline(session.dir), marks=m.lines(), steps=True, now=now))
        self._log_seen = seen

    def _set_timeline(self, timeline: Any) -> None:
        old, self.timeline = self.timeline, timeline
        self._timeline_box.children = [timeline] if timeline is not None else []
        if old is not None:
            close_tree(old)
        self._log_seen = None if timeline is None else self._log_seen

    def static_bundle(self) -> dict[str, str]:
        """What the studio leaves behind when closed in an output: the gauge as HTML and text."""
        bundle = self.gauge.static_bundle()
        return {
            "text/html": bundle["text/html"],
            "text/plain": "context studio (closed)\n" + bundle["text/plain"],
        }
