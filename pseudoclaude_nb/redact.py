"""Secret redaction (SPEC §6.2): known key shapes become ``[REDACTED:<kind>]`` before disk.

It owns the patterns and nothing else: the session writer, spill files and exports call it
on everything they write; it never reads or writes files itself. The values of the API
keys in the environment (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``) are redacted exactly,
whatever their shape, so a key pasted into a prompt or printed by a tool never lands on disk.

Speed matters because every log line passes through here (the durable append's budget is
a few tens of microseconds, SPEC §15). Each pattern has literal *triggers* (``sk-``,
``AKIA``, ``PRIVATE KEY``…). One Aho-Corasick automaton finds all of them in a single pass
(``redact_triggers``; 24 separate substring scans of a 2 KB line took ~40 µs): a line
without any is written as it is, and a pattern's regex runs only on text holding one of its
own triggers. The regexes begin with a literal, so ``re`` scans for it instead of trying
every position. Clean text comes back as the very same object.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .redact_triggers import finder

# Environment variables whose values are never written, whatever they look like.
ENV_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
# Shorter values are placeholders ("x", "test"): redacting them would shred ordinary text.
MIN_ENV_VALUE = 12
# The dict behind os.environ (CPython's ``_data``, encoded keys): the keys are looked at on
# every log line, and ``os.environ.get`` of an unset key raises and catches a KeyError
# (~2.5 µs each, twice a line); a lookup here is ~50 ns and sees every change os.environ makes.
_RAW_ENV: dict | None = getattr(os.environ, "_data", None)
# That dict is changed in place by ``os.environ[k] = v``, ``monkeypatch.setenv`` and dotenv
# loaders alike. ENV_KEYS holds two keys, unpacked here: see env_secrets.
_RAW_A, _RAW_B = (os.environ.encodekey(k) for k in ENV_KEYS) if _RAW_ENV is not None else (None, None)


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True)
class Pattern:
    kind: str
    triggers: tuple[str, ...]  # literal substrings; the regex runs only if one is present
    regex: re.Pattern[str]
    keep: int = 0  # a group kept verbatim before the secret (the "aws_secret_access_key = ")
    # What must follow one of the triggers for the regex to have a chance, matched at the
    # trigger's end: a trigger that is a common word ("token", "secret") then costs one
    # anchored match, not the regex over the whole text (~100 µs on 4 KB). A superset of
    # what the regex accepts there (tests/test_redaction.py checks it against the regex).
    after: re.Pattern[str] | None = None
    # The same gate on an encoded log line, where a string's ``"`` is ``\"``, a tab ``\t``
    # and other control characters ``\u00XX``: a line no gate lets through is not walked.
    after_line: re.Pattern[bytes] | None = None
    # With ``after``: the words a match begins with (its regex's literal alternatives). A
    # match can begin only where one of them holds the trigger found ("private_key" holds
    # "_key" 7 in, "token" holds "oken" 1 in), so the regex is tried only at those starts.
    words: tuple[str, ...] = ()
    # A match to leave as it stands (code that names a secret without holding one).
    spare: Callable[[re.Match[str]], bool] | None = None

    def backs(self, trigger: str) -> tuple[int, ...]:
        """How far before an occurrence of ``trigger`` a match of this pattern can begin."""
        return tuple(sorted({k for w in self.words for k in range(len(w)) if w.startswith(trigger, k)}))

    def sub(self, text: str, counts: Counter[str], starts: list[int] | None = None) -> str:
        """``text`` with this pattern's matches replaced (callers run it only on a trigger).

        ``starts``: every position where a match can begin, ascending. The regex is then
        matched there only, left to right and not overlapping, which is what ``re.sub``
        finds when no match can begin anywhere else.
        """

        replaced = 0
        spare = self.spare

        def replace(m: re.Match[str]) -> str:
            nonlocal replaced
            if spare is not None and spare(m):
                return m.group()
            replaced += 1
            counts[self.kind] += 1
            return (m.group(self.keep) if self.keep else "") + marker(self.kind)

        if starts is None:
            out = self.regex.sub(replace, text)
            return out if replaced else text  # the very same object when nothing was replaced
        parts, done = [], 0
        for start in starts:
            if start >= done and (m := self.regex.match(text, start)) is not None:
                parts += (text[done : m.start()], replace(m))
                done = m.end()
        return "".join((*parts, text[done:])) if replaced else text


# A token may not continue a longer word ("task-ant…", "xsk-…"). The check is a lookbehind
# placed *after* the literal prefix, e.g. ``sk-(?<!X sk-)``, so the regex still starts
# with a literal that ``re`` can search for quickly.
_WORD = "[A-Za-z0-9_-]"
_END = rf"(?!{_WORD})"


def _after(prefix: str) -> str:
    return rf"{re.escape(prefix)}(?<!{_WORD}{re.escape(prefix)})"


# Code that names a secret without holding one, left as it is when the value is not quoted:
# ``token = get_token()``, ``password = os.environ["PW"]``, ``key = settings.SECRET_KEY``,
# ``self.token = token``, ``token: Optional[str] = None``. Only values without a digit (a
# generated secret almost always has some: ``f(Hunter2…)`` is redacted), and a variable is
# a secret word itself or a snake_case name holding one (``PASSWORD=supersecret`` is redacted).
_CODE_VALUE = re.compile(
    r"(?!.*[0-9])(?:"  # no digit anywhere in the value
    # A call or a subscript that closes (or is cut by a quote): get_token(), os.environ["…"]
    r"[A-Za-z_]+(?:\.[A-Za-z_]+)*(?:\(.*\)|\[.*\]|[(\[]$)"
    r"|(?:[A-Za-z_]+(?:\.[A-Za-z_]+)+"  # an attribute: settings.SECRET_KEY, self.token
    r"|password|passwd|secret|token|key|api_key|apikey"  # a variable named for what it holds …
    r"|(?=[a-z_]*_)[a-z_]*(?:pass|secret|token|key)[a-z_]*"  # … or a snake_case name: auth_token
    r"|None|True|False|null|true|false|nil|undefined"
    r")[)\]}]*$)"
)


def _names_code(m: re.Match[str]) -> bool:
    """An assigned secret's match whose value is code (see ``_CODE_VALUE``), not a secret."""
    if m.group(1).endswith(('"', "'")):  # a quoted value is a value
        return False
    return _CODE_VALUE.match(m.string, m.end(1), m.end()) is not None


_GITHUB_CLASSIC = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")
# The names an assigned secret is recognised by, in the order its regex tries them.
_SECRET_NAMES = (
    "password", "passwd", "secret", "token", "api_key", "apikey", "private_key", "_key",
    "PASSWORD", "PASSWD", "SECRET", "TOKEN", "API_KEY", "APIKEY", "PRIVATE_KEY", "_KEY",
    "Password", "Secret", "Token",
)  # fmt: skip

PATTERNS: tuple[Pattern, ...] = (
    # Private keys first: a PEM body can contain anything the token patterns look for.
    Pattern(
        "private-key",
        ("PRIVATE KEY",),
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            # The whole block, not reaching past another BEGIN (so one unfinished block
            # cannot swallow everything up to the next key's END) …
            r"(?:(?:(?!-----BEGIN ).)*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            # … or a block cut before its END (a truncated read, a preview): its header
            # and base64 lines, so half a key is not left behind either.
            r"|(?:[ \t]*\r?\n?[ \t]*(?:(?:Proc-Type|DEK-Info|Comment):[^\n]*|[A-Za-z0-9+/]{16,}={0,2}))*)",
            re.DOTALL,
        ),
    ),
    # Anthropic: sk-ant-api03-…, sk-ant-admin01-…, sk-ant-oat01-… (about 100 characters).
    Pattern("anthropic", ("sk-ant-",), re.compile(_after("sk-ant-") + r"[A-Za-z0-9_-]{20,}")),
    # OpenAI project, service-account and admin keys, then legacy sk-<48 alphanumerics>.
    # The legacy shape needs a digit and 32+ characters, so "sk-learn" or prose stays.
    Pattern(
        "openai",
        ("sk-",),
        re.compile(
            _after("sk-") + r"(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"
            r"|(?=[A-Za-z]*[0-9])[A-Za-z0-9]{32,}" + _END + ")"
        ),
    ),
    # GitHub classic tokens (ghp_/gho_/ghu_/ghs_/ghr_ + 36) and fine-grained github_pat_….
    Pattern(
        "github",
        (*_GITHUB_CLASSIC, "github_pat_"),
        re.compile(_after("g") + r"(?:h[pousr]_[A-Za-z0-9]{36,}|ithub_pat_[A-Za-z0-9_]{22,})" + _END),
    ),
    # AWS access key ids: AKIA (long-term) or ASIA (temporary) + 16 upper-case alphanumerics.
    Pattern(
        "aws-access-key-id",
        ("AKIA", "ASIA"),
        re.compile(r"A(?<![A-Za-z0-9]A)(?:KIA|SIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ),
    # AWS secret keys are 40 random base64 characters: only recognisable by their label
    # (aws_secret_access_key = …, "SecretAccessKey": "…", AWS_SECRET_ACCESS_KEY=…). The
    # match starts at the "secret" (an "aws_" before it stays as it is): a literal start
    # keeps the regex fast on the many texts that merely say "secret".
    Pattern(
        "aws-secret-key",
        ("ecret", "ECRET"),
        re.compile(
            r"([sS](?:ecret|ECRET)_?(?i:(?:access_?)?key)[\"']?\s*[:=]\s*[\"']?)"
            r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
        ),
        keep=1,
        after=re.compile(r"_?(?i:(?:access_?)?key)"),
        after_line=re.compile(rb"_?(?i:(?:access_?)?key)"),
        words=("secret", "sECRET", "Secret", "SECRET"),
    ),
    # Authorization: Bearer <token>, in headers, curl -H, JSON or Python dicts. A shell
    # variable ($TOKEN) or a placeholder (<token>) has characters outside the token set.
    Pattern(
        "bearer-token",
        ("uthorization", "UTHORIZATION"),
        re.compile(r"((?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:bearer)\s+)[A-Za-z0-9._~+/=_-]{16,}"),
        keep=1,
    ),
    # Slack tokens: xoxb- (bot), xoxp- (user), xoxa-/xoxr-/xoxs-, and xapp- app tokens.
    Pattern(
        "slack",
        ("xox", "xapp-"),
        re.compile(r"x(?<![A-Za-z0-9_-]x)(?:ox[abprs]|app)-[A-Za-z0-9-]{10,}" + _END),
    ),
    # Google API keys: AIza + 35 characters.
    Pattern("google-api-key", ("AIza",), re.compile(_after("AIza") + r"[0-9A-Za-z_-]{35}" + _END)),
    # Stripe secret and restricted keys, live and test.
    Pattern(
        "stripe",
        ("k_live_", "k_test_"),
        re.compile(r"(?:s|r)(?<![A-Za-z0-9_-][sr])k_(?:live|test)_[0-9A-Za-z]{16,}" + _END),
    ),
    # JSON Web Tokens: three base64url parts, the first two JSON objects ("eyJ" is '{"').
    Pattern(
        "jwt",
        ("eyJ",),
        re.compile(_after("eyJ") + r"[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}" + _END),
    ),
    # Credentials in a URL (postgres://user:pass@host, https://user:token@github.com): the
    # password goes, the scheme, user and host stay.
    Pattern(
        "url-password",
        ("://",),
        re.compile(r"(://[^\s:/@\"'<>\\]{1,256}:)[^\s@/\"'<>\\]{1,512}(?=@[A-Za-z0-9\[])"),
        keep=1,
        # A link without a user and a colon (https://docs.python.org/…) is not walked, and
        # in a string the regex is tried only where a user and a colon follow a "://".
        after=re.compile(r"[^\s:/@\"'<>\\]{1,256}:"),
        after_line=re.compile(rb"(?:[^\s:/@\"'<>\\]|\\u00[01][0-9a-fA-F]|\\b){1,256}:"),
        words=("://",),
    ),
    # Assignments and .env lines whose name says what the value is: DB_PASSWORD=…,
    # "client_secret": "…", GITHUB_TOKEN: …, STRIPE_API_KEY=… (an AWS secret key is the
    # pattern above). A shell variable ($X), a placeholder (<x>, {x}) or an already
    # redacted value is left alone.
    Pattern(
        "assigned-secret",
        ("assw", "ASSW", "ecret", "ECRET", "oken", "OKEN", "_KEY", "_key", "apikey", "APIKEY"),
        re.compile(
            # Literal alternatives (not (?i:…)): re then skips ahead by their first letters,
            # ~10x faster on long text. The name before the keyword stays as it is.
            r"((?:" + "|".join(_SECRET_NAMES) + r")"
            r"[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?)(?![\[$<{(])[^\s\"'`,;\\]{4,}"
        ),
        keep=1,
        # Each keyword ends at its trigger, or 1-3 letters later (passw|ord, PASSW|D).
        after=re.compile(r"(?:ord|ORD|d|D)?[\"']?[ \t]{0,4}[:=]"),
        after_line=re.compile(rb"(?:ord|ORD|d|D)?(?:\\?[\"'])?(?: |\\t){0,4}[:=]"),
        words=_SECRET_NAMES,
        spare=_names_code,
    ),
)

# The pre-check: every trigger, each mapped to the patterns it gates, in one automaton per
# text type (log lines are checked as encoded bytes, strings while walking an entry).
_TRIGGERS = tuple(dict.fromkeys(t for p in PATTERNS for t in p.triggers))
_GATES = tuple(frozenset(i for i, p in enumerate(PATTERNS) if t in p.triggers) for t in _TRIGGERS)
_BACKS = tuple({t: p.backs(_TRIGGERS[t]) for t in range(len(_TRIGGERS))} if p.after else {} for p in PATTERNS)
_occurrences = finder(_TRIGGERS)


def _line_gated(data: bytes) -> bool:
    """Could a pattern match the strings of this encoded line: a trigger whose gate lets it through?"""
    for trigger, _, end in _occurrences(data):
        for i in _GATES[trigger]:
            if (after := PATTERNS[i].after_line) is None or after.match(data, end):
                return True
    return False


def _gated(text: str) -> dict[int, list[int] | None]:
    """The patterns whose regex can match ``text`` (a trigger is there, and what follows it
    fits), each with the positions where a match can begin (``None``: anywhere)."""
    found = _occurrences(text)
    if not found:  # most strings of an entry: keys, ids, short values
        return {}
    gated: dict[int, list[int] | None] = {}
    for trigger, start, end in found:
        for i in _GATES[trigger]:
            pattern = PATTERNS[i]
            if pattern.after is None:
                gated[i] = None
            elif pattern.after.match(text, end):
                starts = gated.setdefault(i, [])
                if starts is not None:
                    starts += [start - back for back in _BACKS[i][trigger] if back <= start]
    return {i: None if starts is None else sorted(set(starts)) for i, starts in gated.items()}


# --- patterns a user adds: %config PseudoClaude.redact_patterns = [r"…", …] -------------------------


@dataclass(frozen=True)
class _Extra:
    source: str
    regex: re.Pattern[str]
    bytes_regex: re.Pattern[bytes] | None  # the pre-check on encoded lines (None: always look)

    def sub(self, text: str, counts: Counter[str]) -> str:
        def replace(m: re.Match[str]) -> str:
            counts["custom"] += 1
            return marker("custom")

        return self.regex.sub(replace, text)


_EXTRA: tuple[_Extra, ...] = ()


def set_extra_patterns(patterns: list[str] | tuple[str, ...]) -> None:
    """Add the user's own patterns (regular expressions) to every redaction; ``ValueError`` if one is invalid."""
    global _EXTRA
    extras = []
    for source in patterns:
        try:
            regex = re.compile(source)
        except re.error as exc:
            raise ValueError(f"redact pattern {source!r} is not a valid regular expression: {exc}") from None
        if regex.search(""):
            raise ValueError(f"redact pattern {source!r} matches the empty string; it would redact nothing useful")
        try:
            as_bytes: re.Pattern[bytes] | None = re.compile(source.encode("utf-8"))
        except (re.error, UnicodeEncodeError):
            as_bytes = None
        extras.append(_Extra(source, regex, as_bytes))
    _EXTRA = tuple(extras)


def extra_patterns() -> tuple[str, ...]:
    return tuple(x.source for x in _EXTRA)


class Redactor:
    """Redacts strings, nested JSON values and encoded lines; counts replacements by kind.

    The environment is looked at on every call (not once), because a key may be set after
    the writer opened: by ``.env`` loading, or by the user in a cell.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = environ
        self.counts: Counter[str] = Counter()
        self._env_seen: tuple[str | None, ...] = ()
        self._env: list[tuple[str, str]] = []
        self._env_bytes: tuple[bytes, ...] = ()

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def env_secrets(self) -> list[tuple[str, str]]:
        """(name, value) of the API keys set now, longest value first: a new list only when they change."""
        env = os.environ if self._environ is None else self._environ
        if self._environ is None and _RAW_ENV is not None:
            # Read on every log line, right after a fsync, when every object touched is a
            # cache miss: two plain lookups cost half of ``tuple(map(...))`` there (~2 µs).
            seen: tuple[str | None, ...] = (_RAW_ENV.get(_RAW_A), _RAW_ENV.get(_RAW_B))
        else:
            seen = tuple(map(env.get, ENV_KEYS))
        if seen != self._env_seen:
            values = tuple(map(env.get, ENV_KEYS))
            found = [(n, v) for n, v in zip(ENV_KEYS, values, strict=True) if v and len(v) >= MIN_ENV_VALUE]
            self._env = sorted(found, key=lambda nv: -len(nv[1]))
            self._env_bytes = tuple(v.encode() for _, v in self._env)
            self._env_seen = seen
        return self._env

    def may_contain(self, data: bytes, *, env_read: bool = False) -> bool:
        """The cheap pre-check on an encoded line (or many): could it hold a secret?

        Every trigger is ASCII and JSON leaves ASCII letters, digits, ``-`` and ``_``
        unescaped, so a secret inside a JSON string shows up in the encoded bytes too.
        ``env_read``: the caller has just called ``env_secrets`` (the writer, once per append).
        """
        if not env_read:
            self.env_secrets()
        return (
            _line_gated(data)
            or bool(_EXTRA)
            and any(x.bytes_regex is None or x.bytes_regex.search(data) for x in _EXTRA)
            or bool(self._env_bytes)
            and any(v in data for v in self._env_bytes)
        )

    def text(self, text: str) -> str:
        """``text`` with secrets replaced; the very same object when there was none."""
        return self._text(text, self.env_secrets())

    def value(self, obj: Any) -> Any:
        """A JSON-like value (dicts, lists, strings) with every string redacted, keys too."""
        return self._value(obj, self.env_secrets())

    def _value(self, obj: Any, secrets: list[tuple[str, str]]) -> Any:
        if isinstance(obj, str):
            return self._text(obj, secrets)
        if isinstance(obj, dict):
            return {self._value(k, secrets): self._value(v, secrets) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self._value(v, secrets) for v in obj]
        return obj

    def _text(self, text: str, secrets: list[tuple[str, str]]) -> str:
        gated = _gated(text)
        env = [(name, value) for name, value in secrets if value in text] if secrets else ()
        if not (gated or env or (_EXTRA and any(x.regex.search(text) for x in _EXTRA))):
            return text
        for name, value in env:  # longest first: a key inside a longer one is gone with it
            if value not in text:
                continue
            self.counts[name] += text.count(value)
            text = text.replace(value, marker(name))
        if env:
            gated = _gated(text)
        # A pattern runs only if its triggers are in the text as it stands at its turn: a
        # replacement can remove (or, in principle, bring) one.
        stale = False  # a replacement moved the text: gated again before the next pattern's turn
        for i, pattern in enumerate(PATTERNS):
            if stale:
                gated, stale = _gated(text), False
            if i in gated:
                replaced = pattern.sub(text, self.counts, gated[i])
                if replaced is not text:
                    text, stale = replaced, True
        for extra in _EXTRA:
            text = extra.sub(text, self.counts)
        return text

    def line(self, entry: Any, line: bytes, *, checked: bool = False) -> bytes:
        """An encoded log line (``entry`` as JSON, newline included), redacted.

        ``checked``: the caller's ``may_contain`` already said yes for this very line.

        Each string of the entry is redacted (keys too), then the JSON text of the whole line,
        so a label and its value split across a key and its value
        (``{"Authorization": "Bearer …"}``, ``"aws_secret_access_key": "…"``) are caught. The
        markers hold no JSON syntax, so the line stays valid JSON; if it somehow does not, the
        per-string result is kept.
        """
        import orjson

        if not (checked or self.may_contain(line)):
            return line
        try:
            walked = orjson.dumps(self.value(entry)) + (b"\n" if line.endswith(b"\n") else b"")
        except (TypeError, RecursionError):  # nested past orjson's limit: the standard library
            import json

            walked = json.dumps(self.value(entry), ensure_ascii=False, separators=(",", ":")).encode()
            walked += b"\n" if line.endswith(b"\n") else b""
        text = walked.decode("utf-8")
        whole = self._text(text, self.env_secrets())
        if whole is text:
            return walked
        out = whole.encode("utf-8")
        try:
            orjson.loads(out)
        except orjson.JSONDecodeError:
            return walked
        return out


def redact_text(text: str, environ: Mapping[str, str] | None = None) -> str:
    """One string (memory files, index rows, previews): the same object if it is clean."""
    return Redactor(environ).text(text)


def redact_value(obj: Any, environ: Mapping[str, str] | None = None) -> Any:
    return Redactor(environ).value(obj)
