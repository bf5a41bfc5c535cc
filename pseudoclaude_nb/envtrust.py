"""Workspace trust for the environment (SPEC §19, §20): what a workspace's ``.env`` may set,
and what the commands the agent runs inherit.

A cloned repository is untrusted input. Its ``.env`` may configure a provider and nothing
else, and only the provider the package builds: its ``PROVIDER_VARS`` are read into this
module (``lookup``) and never written to ``os.environ``, so the person's own code in the
kernel (``anthropic.Anthropic()`` in a cell), a tool's subprocess and an MCP server never see
them (issue 41: a ``.env`` base URL left in ``os.environ`` sent the person's key to the
repository's host from their next ordinary cell). Which value came from which ``.env`` is
remembered, so that the provider can refuse a base URL from one place with a key from another
before any request (``check_endpoint``) and ``%context`` can say so (``from_dotenv``). Tool
subprocesses get the kernel's environment without the variables that make a shell, the
dynamic loader or an interpreter run code as it starts, unless the user's own environment had
them when the package was loaded (``subprocess_env``).

This module only reads ``.env`` and ``os.environ``; it writes neither and prints nothing
(notices are returned).
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .errors import ConfigError

# key variable -> the base URL variable it is sent to: every variable a provider reads.
ENDPOINTS: dict[str, str] = {"ANTHROPIC_API_KEY": "ANTHROPIC_BASE_URL", "OPENAI_API_KEY": "OPENAI_BASE_URL"}
PROVIDER_VARS = frozenset(ENDPOINTS) | frozenset(ENDPOINTS.values())
# A provider ``.env`` is a few lines; a bigger one is not read (a repository could ship 10 GB).
MAX_DOTENV_BYTES = 1 << 20

# Variables that make a program run code, or load code, as it starts: bash sources $BASH_ENV
# (and sh $ENV) before `-c`, the loader maps LD_PRELOAD into every process, Python runs
# PYTHONSTARTUP/PYTHONPATH code, git runs GIT_SSH_COMMAND, a pager, an editor. Removed from
# what tool commands inherit unless the user's environment set them before the package loaded.
# fmt: off
STARTUP_VARS = frozenset(
    {
        # shells
        "BASH_ENV", "ENV", "PROMPT_COMMAND", "PS4", "SHELLOPTS", "BASHOPTS", "ZDOTDIR", "INPUTRC",
        "CDPATH", "GLOBIGNORE",
        # the loader and libc
        "GCONV_PATH", "LOCPATH", "NLSPATH", "HOSTALIASES", "MALLOC_CHECK_",
        # Python
        "PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME", "PYTHONINSPECT", "PYTHONBREAKPOINT",
        "PYTHONWARNINGS", "PYTHONUSERBASE", "PYTHONEXECUTABLE", "PYTHONPLATLIBDIR",
        # other interpreters
        "PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB", "NODE_OPTIONS",
        "NODE_PATH", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH",
        # git, ssh, pagers and editors that tools start on their own
        "GIT_SSH_COMMAND", "GIT_SSH", "GIT_EXEC_PATH", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_EDITOR",
        "GIT_PAGER", "GIT_EXTERNAL_DIFF", "GIT_PROXY_COMMAND", "GIT_TEMPLATE_DIR", "GIT_DIR",
        "GIT_WORK_TREE", "PAGER", "MANPAGER", "EDITOR", "VISUAL", "BROWSER", "LESSOPEN",
        "LESSCLOSE",
    }
)
# fmt: on
# Whole families: LD_PRELOAD/LD_AUDIT/LD_LIBRARY_PATH…, macOS DYLD_*, exported bash functions
# (BASH_FUNC_ls%%), GIT_CONFIG_GLOBAL/GIT_CONFIG_COUNT/GIT_CONFIG_KEY_0…, npm's settings.
STARTUP_PREFIXES = ("LD_", "DYLD_", "BASH_FUNC_", "GIT_CONFIG", "NPM_CONFIG_")


def is_startup_var(name: str) -> bool:
    return name in STARTUP_VARS or name.upper().startswith(STARTUP_PREFIXES)


# --- what a .env offers the package's providers ------------------------------------------------


@dataclass(frozen=True)
class FromDotenv:
    value: str
    path: Path


# name -> the value the workspace's .env gives it, for the package's providers only. Never in
# os.environ: a variable set there (before or after, even blank) is the person's and wins.
_LOADED: dict[str, FromDotenv] = {}
# The keys among them, for the redactor (``redact``): replaced, never mutated, so a reader can
# tell a change by identity on every log line.
keys: tuple[tuple[str, str], ...] = ()  # (name, value)
# Notices already given (each once per kernel): (path, what).
_SAID: set[tuple[Path, str]] = set()


def lookup(name: str) -> str | None:
    """The value a provider the package builds uses for ``name``: the person's environment
    first, else the workspace ``.env``'s; blank counts as unset."""
    if name in os.environ:
        return os.environ[name].strip() or None
    loaded = _LOADED.get(name)
    return (loaded.value.strip() or None) if loaded is not None else None


def source(name: str) -> Path | None:
    """The ``.env`` file the value ``lookup(name)`` gives came from; None when it is the person's."""
    if name in os.environ:
        return None
    loaded = _LOADED.get(name)
    return loaded.path if loaded is not None and loaded.value.strip() else None


def from_dotenv() -> dict[str, str]:
    """The provider variables whose value comes from a workspace ``.env`` now: name -> its path."""
    return {name: str(path) for name in sorted(_LOADED) if (path := source(name)) is not None}


# The base URL variable of each provider that reads one.
URL_VARS: dict[str, str] = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}


def workspace_endpoint(provider: str, base_url: str | None) -> str | None:
    """A notice when ``provider`` sends to ``base_url`` because a workspace's ``.env`` said so.

    Such a host is the repository's choice, not the person's (a ``.env`` base URL with no key
    is honoured: a local Ollama endpoint), so what is theirs alone stays out of its runs: the
    memory under ``$PSEUDOCLAUDE_HOME`` (its index, the notes' bodies, and the update after
    the run, which would let that host write notes every later session reads). None when the
    endpoint is the person's own (their environment, code, the default).
    """
    var = URL_VARS.get(provider)
    path = source(var) if var is not None else None
    if path is None or base_url is None or (lookup(var or "") or "").rstrip("/") != base_url.rstrip("/"):
        return None
    return (
        f"memory is off for this run: {var} comes from {path}, so requests go to {_host(base_url)}, "
        f"a host the workspace chose; set {var} in your own environment if you trust it"
    )


def load_workspace_env(workspace: Path | str) -> list[str]:
    """Read ``<workspace>/.env`` for the package's providers; the notices to say.

    Re-read on every run (and by ``%context``): what an earlier read gave is forgotten first,
    so an edited or another workspace's ``.env`` does not linger. Nothing is written to
    ``os.environ``. Values are never interpolated (``${GITHUB_TOKEN}`` in a URL would leak
    it) and never returned.
    """
    forget()
    path = Path(workspace).absolute() / ".env"
    values = _read(path)
    notices: list[str] = []
    ignored = sorted(name for name in values if name not in PROVIDER_VARS)
    if ignored:
        names = ", ".join(_printable(name) for name in ignored[:20]) + (" …" if len(ignored) > 20 else "")
        notices.append(
            _once(
                path,
                f"ignored in {path}: {names} — a workspace .env may set only "
                f"{', '.join(sorted(PROVIDER_VARS))}; set anything else in your own environment",
            )
        )
    for name in sorted(PROVIDER_VARS & values.keys()):
        value = values[name]
        if value is None:
            continue
        _LOADED[name] = FromDotenv(value, path)
        if name in ENDPOINTS.values() and source(name) is not None:
            notices.append(_once(path, f"{name} comes from {path}: requests go to {_host(value)}"))
    _set_keys()
    return [n for n in notices if n]


def forget() -> None:
    """Forget what a ``.env`` gave (before a re-read, and in tests)."""
    _LOADED.clear()
    _set_keys()


def _set_keys() -> None:
    global keys
    found = tuple((name, _LOADED[name].value) for name in sorted(ENDPOINTS) if name in _LOADED)
    if found != keys:
        keys = found


def _read(path: Path) -> dict[str, str | None]:
    from dotenv import dotenv_values

    try:
        if not path.is_file() or path.stat().st_size > MAX_DOTENV_BYTES:
            return {}
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    return dotenv_values(stream=io.StringIO(text), interpolate=False)


def _once(path: Path, text: str) -> str:
    if (path, text) in _SAID:
        return ""
    _SAID.add((path, text))
    return text


def _printable(name: str) -> str:
    return name if name.isprintable() else name.encode("unicode_escape").decode("ascii")


def _host(url: str) -> str:
    """Scheme, host and port only: a URL may carry a password or a token in its path."""
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname or "?"
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "an unparsable URL"
    return _printable(f"{parts.scheme}://{host}{port}")


# --- the check a provider makes before it builds a client --------------------------------------


def check_endpoint(key_var: str, url_var: str, *, key_given: bool = False, url_given: bool = False) -> None:
    """Refuse a key and a base URL that come from different places (SPEC §19).

    ``key_given``/``url_given``: the value was passed in by code (the user's). A ``.env``
    base URL with no key at all is allowed (a local Ollama endpoint needs none).
    """
    key = None if key_given else source(key_var)
    url = None if url_given else source(url_var)
    has_key = key_given or lookup(key_var) is not None
    has_url = url_given or lookup(url_var) is not None
    if not (has_key and has_url) or key == url:
        return
    if url is not None:
        where = "the api_key argument" if key_given else "your environment" if key is None else str(key)
        shadow = (
            " (and unset yours: your environment wins over a .env)" if where == "your environment" else ""
        )
        raise ConfigError(
            f"{url_var} comes from {url} but {key_var} from {where}: a workspace cannot send your "
            f"key to another host; set {url_var} in your own environment if you trust that host, "
            f"or put {key_var} in that .env too{shadow}"
        )
    where = "the base_url argument" if url_given else "your environment"
    raise ConfigError(
        f"{key_var} comes from {key} but {url_var} from {where}: a key and its endpoint must come "
        f"from one place; put {url_var} in that .env too, or set {key_var} in your own environment"
    )


# --- what tool commands inherit -----------------------------------------------------------------

# Startup variables of the user's own environment, noted when the package loads (and again at
# %load_ext): those are kept for tool commands; any set later (by code in the kernel) are not.
_USER_STARTUP: frozenset[str] = frozenset()


def remember_user_env(environ: Mapping[str, str] | None = None) -> None:
    global _USER_STARTUP
    env = os.environ if environ is None else environ
    _USER_STARTUP = frozenset(name for name in env if is_startup_var(name))


def subprocess_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment for a tool's command, without startup variables not the user's."""
    env = dict(os.environ if environ is None else environ)
    for name in list(env):
        if is_startup_var(name) and name not in _USER_STARTUP:
            del env[name]
    return env


remember_user_env()
