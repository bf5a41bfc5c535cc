"""Secret redaction (SPEC §6.2): known key shapes become ``[REDACTED:<kind>]`` before disk.

It applies the patterns (``patterns``, what each kind of secret looks like) and
nothing else: the session writer, spill files and exports call it on everything they write;
it never reads or writes files itself. The values of the API keys in the environment
(``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``), and those a workspace ``.env`` gives the
package's providers (``envtrust.keys``: never in ``os.environ``), are redacted exactly,
whatever their shape, so a key pasted into a prompt or printed by a tool never lands on disk.

Speed matters because every log line passes through here (the durable append's budget is
a few tens of microseconds, SPEC §15). Each pattern has literal *triggers* (``sk-``,
``AKIA``, ``PRIVATE KEY``…). One Aho-Corasick automaton finds all of them in a single pass
(``triggers``; 24 separate substring scans of a 2 KB line took ~40 µs): a line
without any is written as it is, and a pattern's regex runs only on text holding one of its
own triggers. Clean text comes back as the very same object.

The package: this module applies (``Redactor``, ``redact_text``, ``redact_value``); the data
and the pre-check are beside it — ``patterns`` (each kind of secret: triggers, regex, gates),
``rules`` (well-known token shapes, from gitleaks) and ``triggers`` (the one-pass finder).
"""

from __future__ import annotations

import functools
import os
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .. import envtrust
from .patterns import PATTERNS, marker
from .triggers import finder

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


# The pre-check: every trigger, each mapped to the patterns it gates, in one automaton per
# text type (log lines are checked as encoded bytes, strings while walking an entry).
_TRIGGERS = tuple(dict.fromkeys(t for p in PATTERNS for t in p.triggers))
_GATES = tuple(frozenset(i for i, p in enumerate(PATTERNS) if t in p.triggers) for t in _TRIGGERS)
_occurrences = finder(_TRIGGERS)


@functools.cache
def _backs(pattern: int, trigger: int) -> tuple[int, ...]:
    """How far before an occurrence of ``trigger`` a match of ``pattern`` can begin: worked out
    when a gate first lets that pair through (all of them up front cost every kernel's first
    run ~5 ms, issue 47)."""
    return PATTERNS[pattern].backs(_TRIGGERS[trigger])


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
            elif not pattern.words and pattern.after.match(text, end):
                gated[i] = None  # its match begins anywhere before the trigger (netrc's "machine")
            elif pattern.after.match(text, end):
                starts = gated.setdefault(i, [])
                if starts is not None:
                    starts += [start - back for back in _backs(i, trigger) if back <= start]
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
            raise ValueError(
                f"redact pattern {source!r} matches the empty string; it would redact nothing useful"
            )
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
        self._env_seen: tuple[object, ...] = ()  # raw values when read from os.environ, and the .env's keys
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
            seen: tuple[object, ...] = (_RAW_ENV.get(_RAW_A), _RAW_ENV.get(_RAW_B), envtrust.keys)
        else:
            seen = (*map(env.get, ENV_KEYS), envtrust.keys)
        if seen != self._env_seen:
            values = tuple(map(env.get, ENV_KEYS))
            found = [(n, v) for n, v in zip(ENV_KEYS, values, strict=True) if v and len(v) >= MIN_ENV_VALUE]
            found += [(n, v) for n, v in envtrust.keys if len(v) >= MIN_ENV_VALUE and (n, v) not in found]
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


# A secret straddling a cut would leave a head no pattern knows: redact this much past the cut.
CUT_MARGIN = 4096


def redacted_head(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text``, redacted *before* the cut (SPEC §19).

    Only the kept part and ``CUT_MARGIN`` past it are scanned, so a 500 MB text costs the
    same as one just over ``limit``.
    """
    if len(text) <= limit:
        return redact_text(text)
    return redact_text(text[: limit + CUT_MARGIN])[:limit]
