"""The real context window of an OpenAI-compatible server: asked, read from its errors, cached.

A local server knows its window and the model table cannot (issue 32: a 2,048-token
llama.cpp server was taken for 128,000). So, once per base URL and model, the server is
asked where it says — llama.cpp ``/props`` (``n_ctx``, and whether its chat template can
show tools), ``/v1/models`` (vLLM ``max_model_len``, LM Studio and others'
``context_length`` fields), Ollama's ``/api/show`` (``num_ctx``, else the model's
``context_length``), LM Studio's ``/api/v0/models/{model}`` — with a short timeout, and
the answer (or that there was none) is kept in ``$PSEUDOCLAUDE_HOME/windows.json``.
``window_in_error`` reads the window out of a context-length error in the wordings of
llama.cpp, vLLM, OpenAI, Ollama, LM Studio and Anthropic.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import safeio
from ..errors import UnsafePathError

if TYPE_CHECKING:
    import httpx

FILE = "windows.json"
VERSION = 1
PROBE_SECONDS, PROBE_CONNECT_SECONDS = 2.0, 1.0
_LIMIT = 1 << 20
# Fields that hold a served window, best first; training lengths (n_ctx_train) are not one.
_FIELDS = (
    "n_ctx",
    "max_model_len",
    "loaded_context_length",
    "num_ctx",
    "context_length",
    "max_context_length",
)


@dataclass(frozen=True)
class Learned:
    window: int | None  # None: the server was asked and did not say
    source: str  # where it came from, for %context: "llama.cpp /props n_ctx"
    supports_tools: bool | None = None  # llama.cpp /props: can its chat template show tools?


# --- asking the server ---------------------------------------------------------------------------


def server_root(base_url: str) -> str:
    """``http://host:8080/v1`` → ``http://host:8080`` (where /props and /api live)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def probe(client: httpx.Client, base_url: str, model: str) -> Learned | None:
    """Ask the server for its window, in the places servers say it; never raises.

    None when nothing listens there (not worth keeping: the server may start later).
    """
    import httpx  # only a run against a server that may know its window asks: not the offline ones

    root = server_root(base_url)
    timeout = httpx.Timeout(PROBE_SECONDS, connect=PROBE_CONNECT_SECONDS)
    tries = (
        ("GET", f"{root}/props", None, _from_props),
        ("GET", f"{base_url.rstrip('/')}/models", None, lambda d: _from_models(d, model)),
        ("POST", f"{root}/api/show", {"model": model}, _from_ollama),
        ("GET", f"{root}/api/v0/models/{model}", None, _from_lmstudio),
    )
    for method, url, body, read in tries:
        try:
            response = client.request(method, url, json=body, timeout=timeout)
        except httpx.ConnectError:
            return None  # nobody listens: the run says so with the real request
        except httpx.HTTPError:
            continue
        if response.status_code != 200:
            continue
        try:
            learned = read(response.json())
        except (ValueError, TypeError, AttributeError):
            continue
        if learned is not None:
            return learned
    return Learned(None, "not reported by the server")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _field(obj: Any) -> tuple[int, str] | None:
    """The best window field in ``obj`` or one level down (``meta``, ``settings`` …)."""
    if not isinstance(obj, dict):
        return None
    for name in _FIELDS:
        if _int(obj.get(name)):
            return obj[name], name
    for value in obj.values():
        if isinstance(value, dict):
            for name in _FIELDS:
                if _int(value.get(name)):
                    return value[name], name
    return None


def _from_props(data: Any) -> Learned | None:
    found = _field(data)
    if found is None:
        return None
    caps = data.get("chat_template_caps") if isinstance(data, dict) else None
    tools = caps.get("supports_tools") if isinstance(caps, dict) else None
    return Learned(found[0], f"llama.cpp /props {found[1]}", tools if isinstance(tools, bool) else None)


def _from_models(data: Any, model: str) -> Learned | None:
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        return None
    named = [e for e in entries if isinstance(e, dict) and e.get("id") == model]
    pick = named or (entries if len(entries) == 1 else [])
    found = _field(pick[0]) if pick else None
    return None if found is None else Learned(found[0], f"/v1/models {found[1]}")


def _from_ollama(data: Any) -> Learned | None:
    if not isinstance(data, dict) or not ("model_info" in data or "parameters" in data):
        return None
    # The window Ollama serves is num_ctx (a Modelfile PARAMETER, or the server's default);
    # the model's context_length is only how far it could go.
    match = re.search(r"^\s*num_ctx\s+(\d+)", str(data.get("parameters") or ""), re.MULTILINE)
    if match:
        return Learned(int(match.group(1)), "Ollama /api/show num_ctx")
    info = data.get("model_info") or {}
    lengths = [v for k, v in info.items() if k.endswith(".context_length") and _int(v)]
    return Learned(lengths[0], "Ollama /api/show context_length") if lengths else None


def _from_lmstudio(data: Any) -> Learned | None:
    found = _field(data)
    return None if found is None else Learned(found[0], f"LM Studio /api/v0/models {found[1]}")


# --- reading it from an error ----------------------------------------------------------------------

_WORDINGS = (
    # llama.cpp: "request (2062 tokens) exceeds the available context size (2048 tokens)"
    r"available context size \((\d+) tokens\)",
    # OpenAI, vLLM: "This model's maximum context length is 4096 tokens"
    r"maximum context length is (\d+)",
    # LM Studio: "the model is loaded with context length of only 4096 tokens"
    r"context length of only (\d+)",
    # Ollama and others: "exceeds the context length (4096)", "a context window of 4096 tokens"
    r"exceeds? the (?:available )?context (?:length|window|size)(?: of)? \(?(\d+)",
    r"context window of (\d+)",
    # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
    r"> (\d+) maximum",
    # Anthropic: "input length and `max_tokens` exceed context limit: 180000 + 30000 > 200000"
    r"exceed context limit: \d+ \+ \d+ > (\d+)",
)


def window_in_error(payload: Any) -> int | None:
    """The window a context-length error names (its ``n_ctx`` field, or its words)."""
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and _int(error.get("n_ctx")):
        return error["n_ctx"]
    text = payload if isinstance(payload, str) else json.dumps(payload)
    text = text.replace(",", "")  # "128,000 tokens"
    for pattern in _WORDINGS:
        match = re.search(pattern, text, re.IGNORECASE)
        if match and int(match.group(1)) > 0:
            return int(match.group(1))
    return None


_PROMPT_WORDINGS = (
    r"request \((\d+) tokens\) exceeds",  # llama.cpp
    r"messages resulted in (\d+) tokens",  # OpenAI
    r"you requested (\d+) tokens",  # vLLM
    r"prompt is too long: (\d+) tokens",  # Anthropic
)


def prompt_in_error(payload: Any) -> int | None:
    """The prompt's real size a context-length error names (llama.cpp's ``n_prompt_tokens``)."""
    error = payload.get("error") if isinstance(payload, dict) else None
    if isinstance(error, dict) and _int(error.get("n_prompt_tokens")):
        return error["n_prompt_tokens"]
    text = (payload if isinstance(payload, str) else json.dumps(payload)).replace(",", "")
    for pattern in _PROMPT_WORDINGS:
        match = re.search(pattern, text, re.IGNORECASE)
        if match and int(match.group(1)) > 0:
            return int(match.group(1))
    return None


# --- the cache -----------------------------------------------------------------------------------


def _key(base_url: str, model: str) -> str:
    return f"{base_url.rstrip('/')} {model}"


def _path() -> Path:
    # $PSEUDOCLAUDE_HOME as memory.store reads it (not imported: memory imports providers).
    configured = os.environ.get("PSEUDOCLAUDE_HOME")
    home = Path(configured).expanduser() if configured else Path.home() / ".pseudoclaude"
    return home / FILE


def _load() -> dict[str, dict[str, Any]]:
    try:
        raw = json.loads(safeio.read_text(_path(), limit=_LIMIT))
    except (OSError, UnicodeDecodeError, ValueError, UnsafePathError):
        return {}  # unreadable: ask again, and rewrite it
    entries = raw.get("windows") if isinstance(raw, dict) and raw.get("version") == VERSION else None
    return entries if isinstance(entries, dict) else {}


def cached(base_url: str, model: str) -> Learned | None:
    entry = _load().get(_key(base_url, model))
    if not isinstance(entry, dict) or not isinstance(entry.get("source"), str):
        return None
    window, tools = entry.get("window"), entry.get("supports_tools")
    return Learned(_int(window), entry["source"], tools if isinstance(tools, bool) else None)


def remember(base_url: str, model: str, learned: Learned) -> None:
    """Keep what was learned; a cache that cannot be written only means asking again."""
    entries = _load()
    entries[_key(base_url, model)] = asdict(learned) | {"at": int(time.time())}
    text = json.dumps({"version": VERSION, "windows": entries}, indent=2, sort_keys=True)
    try:
        safeio.write_atomic(_path(), text + "\n", create_dirs=True, fsync=False)
    except (OSError, UnsafePathError):
        pass
