"""Every occurrence of a set of literal words in a text, overlapping ones too: redaction's pre-check.

``finder(words)`` returns ``find(data)`` for ``str`` or ``bytes``. It is built for speed,
because every log line passes through it on the durable append:
- Leftmost-first matching runs the Aho-Corasick automaton's SIMD prefilter (~1-2 µs on a
  2 KB log line, against ~5 µs for an overlapping search of the same text).
- But it skips past each match, so an occurrence that starts inside a reported one
  (``sk-`` inside ``sk-ant-``) is not reported. Those are found by an overlapping search of
  a few bytes after each match of an *overlapper*: a word another one can start inside.
- An ASCII string is searched as its bytes (the same offsets). The str automaton maps every
  offset back to characters, which is ~6x slower.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import ahocorasick_rs

Occurrences = list[tuple[int, int, int]]  # (word index, start, end)


def overlappers(words: tuple[str, ...]) -> frozenset[int]:
    """The words another one (or the same one again) can start inside: only a reported
    match of one of these can hide an occurrence from leftmost-first matching.

    Word ``a`` is one when another word is a prefix of it or it is a prefix of another, or
    when some tail ``a[k:]`` (k ≥ 1) begins a word or begins with one. Checked through the
    set of every word's prefixes, not word against word: every kernel's first log writer
    builds this (the pairwise check cost ~10 ms of its first ``%agent``, issue 47).
    """
    known = set(words)
    prefixes = {w[:j] for w in words for j in range(1, len(w) + 1)}  # what begins a word
    proper = {w[:j] for w in words for j in range(1, len(w))}  # what begins a longer word

    def begins_with_a_word(text: str) -> bool:
        return any(text[:j] in known for j in range(1, len(text) + 1))

    return frozenset(
        i
        for i, a in enumerate(words)
        if a in proper  # a begins a longer word
        or any(a[:j] in known for j in range(1, len(a)))  # a shorter word begins a
        or any(a[k:] in prefixes or begins_with_a_word(a[k:]) for k in range(1, len(a)))
    )


def finder(words: tuple[str, ...]) -> Callable[[str | bytes], Occurrences]:
    """``find(data)``: (word, start, end) of every occurrence of ``words`` in ``data``, in no set order."""
    first = ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST
    any_str = ahocorasick_rs.AhoCorasick(list(words), matchkind=first)
    any_bytes = ahocorasick_rs.BytesAhoCorasick([w.encode() for w in words], matchkind=first)
    all_str = ahocorasick_rs.AhoCorasick(list(words)).find_matches_as_indexes
    all_bytes = ahocorasick_rs.BytesAhoCorasick([w.encode() for w in words]).find_matches_as_indexes
    hiders, reach = overlappers(words), max(map(len, words)) - 1

    def find(data: str | bytes) -> Occurrences:
        if isinstance(data, str) and data.isascii():
            data = data.encode("ascii")
        overlapping: Callable[..., Occurrences]  # one of the two automata's finders, by data's type
        if isinstance(data, bytes):
            found = any_bytes.find_matches_as_indexes(data)
            overlapping = all_bytes
        else:
            try:
                found = any_str.find_matches_as_indexes(data)
            except UnicodeEncodeError:  # a lone surrogate: the automaton reads UTF-8 only
                return [
                    (i, m.start(), m.end())
                    for i, w in enumerate(words)
                    for m in re.finditer(re.escape(w), data)
                ]
            overlapping = all_str
        if not found:
            return found
        for t, start, end in [m for m in found if m[0] in hiders]:
            window: Any = data[start : end + reach]  # bytes or str, as the finder chosen above
            found += [
                (u, start + a, start + b)
                for u, a, b in overlapping(window, overlapping=True)
                if a < end - start and (u, a) != (t, 0)
            ]
        return found

    return find
