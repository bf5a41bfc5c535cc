"""The cache guard: ask before a request whose expected cache write costs more than a limit (issue 43).

``%config PseudoClaude.cache_guard = USD`` (None, the default, is off). Before each agent request
the guard works out what the request is expected to write to the prompt cache — its estimated
size less what the provider is expected to read from the cache (the previous request, unless a
replace, the cache's lifetime or a changed system prompt or tool set moved that point:
``context.cache.expected_read``) — at the model's cache-write price (the 1-hour one under
``cache_ttl = "1h"``). Above the limit it asks the person; with nobody to answer (a kernel
without stdin) the run stops before the request, with a line that says why and how to go on.
People ask for this after silent cache rebuilds cost them (claude-code #40567, #80821; codex
#35925). Cheap enough for every step: the estimate is the context's own, the last usage is read
from the log incrementally. No IPython here: ``ask`` is the agent's line reader.
"""

from __future__ import annotations

import builtins
import hashlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from .context.cache import TTL_SECONDS, expected_read
from .context.confirm import NO_ANSWER
from .context.estimate import estimate_request
from .cost import money, price_of
from .errors import PseudoClaudeError
from .events import Notice, RunEvent
from .providers.base import Request
from .session.spend import session_spend

if TYPE_CHECKING:
    from .context.state import SharedState

HOUR = 3600


class CacheGuardStop(PseudoClaudeError):
    """The run stopped before a request whose cache write would cost more than ``cache_guard``."""


@dataclass(frozen=True)
class Outlook:
    write: int  # tokens expected to be written to the cache
    read: int  # tokens expected to be read from it
    dollars: float  # the write at the model's cache-write price
    reason: str  # why the read is what it is


class CacheGuard:
    """One run's guard; the last system prompt and tools seen per session are kept per process, so a
    change between runs (a new memory index) counts as a cache reset."""

    _heads: ClassVar[dict[str, str]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        limit: float,
        *,
        state: SharedState,
        log: Path,
        session: str,
        model: str,
        ttl: str = "5m",
        ask: Callable[[str], str] | None = None,
    ) -> None:
        self.limit, self.state, self.log, self.session = limit, state, log, session
        self.model, self.ttl = model, ttl
        self.ask = ask
        self.approved = -1.0  # the largest write the person approved in this run

    def outlook(self, request: Request, now: float | None = None) -> Outlook | None:
        """What ``request`` is expected to write, and what that costs; None when the model has no price."""
        price = price_of(self.model)
        if price is None:
            return None
        estimate = self.state.estimate()  # the next request's, system prompt and tools included
        spend = session_spend(self.log)
        last = spend.requests[-1][1] if spend.requests else None
        head = estimate_request(request.system, [], request.tools)
        fingerprint = _fingerprint(request.system, request.tools)
        with self._lock:
            seen = self._heads.get(self.session)
        read, reason = expected_read(
            head_tokens=head,
            last=last,
            last_ts=spend.last_ts,
            anchored=bool(self.state.anchor and self.state.anchor[0] > 0),
            now=time.time() if now is None else now,
            ttl=HOUR if self.ttl == "1h" else TTL_SECONDS,
            head_changed=seen is not None and seen != fingerprint,
        )
        write = max(0, estimate - read)
        rates = price.rates
        rate = rates.cache_write_1h if self.ttl == "1h" else rates.cache_write
        return Outlook(write, read, write * rate / 1e6, reason)

    def check(self, request: Request, emit: Callable[[RunEvent], Any]) -> None:
        """Before ``request``: ask when its expected cache write costs more than the limit; raise
        ``CacheGuardStop`` when the person says no or nobody can answer."""
        seen = self.outlook(request)
        with self._lock:
            self._heads[self.session] = _fingerprint(request.system, request.tools)
        if seen is None or seen.dollars <= self.limit or seen.dollars <= self.approved:
            return
        what = (
            f"the next request would write ~{seen.write:,} tokens to the prompt cache (~{money(seen.dollars)} "
            f"at {self.model}'s {'1-hour ' if self.ttl == '1h' else ''}cache-write price), above "
            f"%config PseudoClaude.cache_guard = {self.limit:g}: it reads ~{seen.read:,} from the cache "
            f"({seen.reason})"
        )
        how = (
            "to go on, run %agent again with a higher guard (%config PseudoClaude.cache_guard = "
            f"{max(seen.dollars * 1.5, self.limit * 2):.2f}) or without it (None), or make the request "
            "smaller first (%compact)"
        )
        line = self.ask if self.ask is not None else builtins.input
        try:
            answer = line(f"{what}. Send it? [y/N] > ").strip().lower()
        except NO_ANSWER as exc:
            raise CacheGuardStop(
                f"stopped before the request: {what}, and nobody could confirm it here "
                f"({type(exc).__name__}); {how}"
            ) from None
        if answer not in ("y", "yes"):
            raise CacheGuardStop(f"stopped before the request, as you said: {what}; {how}")
        self.approved = seen.dollars
        emit(Notice(f"sent with your approval: {what}", "info"))


def _fingerprint(system: str, tools: list[dict[str, Any]]) -> str:
    from .providers.wire_prefix import encode

    return hashlib.sha256(system.encode("utf-8", "surrogatepass") + encode(tools)).hexdigest()
