"""One HTTP client per provider configuration, kept across runs (issue 30 item 10, issue 32).

Every ``%agent`` run builds its provider afresh (the settings may have changed), and a new
``httpx.Client`` — or Anthropic SDK client — costs a new SSL context and connection pool:
0.3–0.6 s before the first request of each run. Providers ask here instead, by what makes
the client differ (kind, base URL, key, retries, timeout); a client someone closed is made
again. ``close_all`` runs when the extension is unloaded and at interpreter exit.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections.abc import Callable, Hashable
from typing import Any

# A failure that must not reach the user's output is logged at debug, with its traceback:
# logging.getLogger("pseudoclaude_nb").setLevel(logging.DEBUG) (and a handler) shows it.
_log = logging.getLogger(__name__)

_CLIENTS: dict[Hashable, Any] = {}
_LOCK = threading.Lock()


def _closed(client: Any) -> bool:
    state = getattr(client, "is_closed", False)  # httpx: a property; the SDKs: a method
    return bool(state() if callable(state) else state)


def shared(key: Hashable, make: Callable[[], Any]) -> Any:
    """The client for ``key``, made by ``make`` the first time (or after it was closed)."""
    with _LOCK:
        client = _CLIENTS.get(key)
        if client is None or _closed(client):
            client = _CLIENTS[key] = make()
        return client


def close_all() -> None:
    """Close every kept client (extension unload, interpreter exit); later asks make new ones."""
    with _LOCK:
        clients = list(_CLIENTS.values())
        _CLIENTS.clear()
    for client in clients:
        try:
            client.close()
        except Exception:  # noqa: BLE001 - closing must not fail an unload
            _log.debug("a kept HTTP client could not be closed", exc_info=True)


def count() -> int:
    with _LOCK:
        return len(_CLIENTS)


atexit.register(close_all)
