"""The provider ``%agent`` uses when no key is set: the offline explainer (``notebook.explain``).

It never plays a script and never claims to be a model. It answers the run's prompt from the
notebook activity block alone — the newest error, explained — or says in one answer that
nothing offline can answer it and how to set a key. No tool calls, so a run is one step. It
writes no summaries (a Layer 2 request is refused with what to do) and proposes no memory.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import ProviderError
from ..notebook.explain import answer
from .base import Request, Response, StreamEvent, collect
from .scripted import estimated_usage, replay_events

NAME = "offline"
MODEL = "offline-explainer"


class OfflineExplainer:
    name = NAME

    def __init__(self, *, context_window: int | None = None) -> None:
        self.model = MODEL
        self.context_window = context_window or 200_000
        self.max_output_tokens = Request.max_tokens
        self.requests: list[Request] = []

    def stream(self, request: Request) -> Iterator[StreamEvent]:
        self.requests.append(request)
        if request.purpose != "agent":
            yield from replay_events(self.complete(request))
            return
        prompt = next(
            (m.content for m in reversed(request.messages) if m.role == "user" and m.tool_result is None), ""
        )
        text = answer(prompt)
        yield from replay_events(
            Response(text=text, usage=estimated_usage(request, text, []), stop_reason="end_turn")
        )

    def complete(self, request: Request) -> Response:
        if request.purpose == "agent":
            return collect(self.stream(request))
        if request.purpose == "memory":
            text = "[]"  # nothing learned: the explainer is not a model
            return Response(text=text, usage=estimated_usage(request, text, []), stop_reason="end_turn")
        raise ProviderError(
            "the offline explainer cannot write a summary: set ANTHROPIC_API_KEY or OPENAI_API_KEY "
            "(or pass --provider) to compact this session"
        )
