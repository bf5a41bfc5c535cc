"""Queries of the history index: matching, snippets, and hits rendered as text.

The index (``history.HistoryIndex``) owns the database and keeps it current; this module
only reads it. A query matches substrings, case-insensitively, newest first. The index
narrows the rows: each word of a term must be a word of the row (a word inside the term),
start one (the term's last word), end one (its first) or contain one (a term that is one
word); the vocabulary (``terms``, by its ``terms_g`` grams) says which words those are.
Two neighbouring words of a term, one of them a common word (``schema.COMMON``),
must also be neighbours in the row: the index holds each such pair as one token, so a phrase of words that are everywhere ("fix the
error in the file") reads only the rows where they meet in that order, not every row that
holds them all.
Every candidate is then read from the log by offset and kept only if it really holds every
term, so the answer is the brute-force answer. A fragment that more than ``MAX_WORDS``
words contain does not narrow (a query of nothing else reads rows newest first until it has
enough).
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .rows import SEARCH_TOOL, Folders, RowReader
from .schema import CJK_RUN, COMMON, PAIR, PAIR_STANDIN, WORD, fragment_grams, pair_token, quote

SNIPPET_CHARS = 90  # each side of the match
MAX_WORDS = 64  # a fragment in more words than this does not narrow the candidates
MAX_PAIR_ALTERNATIVES = 128  # a pair of words that could be more pairs than this does not narrow
CJK_MARK = "\x00"  # stands for a CJK run while a term is split into words (never a word character)
_ROW = "d.id, d.sid, d.kind, d.part, d.off, d.len, d.line, d.src, d.slen"

__all__ = ["SEARCH_TOOL", "Hit", "match", "render_hits"]


@dataclass(frozen=True)
class Hit:
    session_id: str
    message_uuid: str
    role: str
    kind: str  # text | tool_call | tool_result | spill
    ts: float
    snippet: str
    call_id: str | None = None
    ref: str | None = None  # spills: the file, relative to the workspace
    line: int | None = None  # spills: the line of the match in that file

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "message_uuid": self.message_uuid,
            "role": self.role,
            "kind": self.kind,
            "ts": self.ts,
            "snippet": self.snippet,
            "call_id": self.call_id,
            "ref": self.ref,
            "line": self.line,
        }


def match(con: sqlite3.Connection, query: str, session_id: str | None, limit: int, root: Path) -> list[Hit]:
    """The hits for ``query``: the exact phrase first, then rows with every word."""
    quoted = len(query) >= 2 and query[0] == query[-1] == '"'
    phrase = query[1:-1].strip() if quoted else query
    terms = [phrase] if quoted else phrase.split()
    if not phrase:
        return []
    sid: int | None = None
    span: tuple[int, int] | None = None
    if session_id is not None:
        row = con.execute("SELECT sid FROM logs WHERE session_id = ?", (session_id,)).fetchone()
        if row is None:
            return []
        sid = row[0]
        # A session's rows form one rowid range (mostly its own): FTS5 narrows by range
        # natively, where a join condition alone would walk every match of the workspace.
        low, high = con.execute("SELECT min(id), max(id) FROM docs WHERE sid = ?", (sid,)).fetchone()
        if low is None:
            return []
        span = (low, high)
    names = dict(con.execute("SELECT sid, session_id FROM logs"))
    with RowReader(Folders(root, names)) as reader:
        found = _find(con, reader, [phrase], sid, span, limit)
        if len(found) < limit and len(terms) > 1:
            # Too few hits for the exact phrase: every word, anywhere in one row.
            ids = {r[0][0] for r in found}
            more = [r for r in _find(con, reader, terms, sid, span, limit) if r[0][0] not in ids]
            found += more[: limit - len(found)]
        return [_hit(reader, row, text, names.get(row[1], ""), terms) for row, text in found]


def _find(
    con: sqlite3.Connection,
    reader: RowReader,
    terms: list[str],
    sid: int | None,
    span: tuple[int, int] | None,
    limit: int,
) -> list[tuple[tuple[Any, ...], str]]:
    """Rows holding every term, newest first, with their text.

    Newest first rather than by a rank: ranking must score every match, where rowid order
    stops at ``limit``.
    """
    lows = [t.lower() for t in terms]
    expr = candidates(con, lows)
    if expr is False:
        return []  # a word of the query is in no row at all
    in_sid = " AND d.sid = ?" if sid is not None else ""
    args: list[Any] = [sid] if sid is not None else []
    if expr is None:
        in_span = " AND d.id BETWEEN ? AND ?" if span else ""
        sql = f"SELECT {_ROW} FROM docs d WHERE 1{in_span}{in_sid} ORDER BY d.id DESC"
        cursor = con.execute(sql, (*(span or ()), *args))
    else:
        in_span = " AND words.rowid BETWEEN ? AND ?" if span else ""
        sql = (
            f"SELECT {_ROW} FROM words CROSS JOIN docs d ON d.id = words.rowid "
            f"WHERE words MATCH ?{in_span}{in_sid} ORDER BY words.rowid DESC"
        )
        cursor = con.execute(sql, (expr, *(span or ()), *args))
    out: list[tuple[tuple[Any, ...], str]] = []
    try:
        for row in cursor:
            text = reader.text(row)
            if text is None:
                continue
            low = text.lower()
            if all(t in low for t in lows):
                out.append((row, text))
                if len(out) >= limit:
                    break
    finally:
        cursor.close()
    return out


def candidates(con: sqlite3.Connection, terms: list[str]) -> str | None | bool:
    """The ``words`` MATCH expression every row holding all ``terms`` (lower-cased) satisfies.

    ``None``: the index cannot narrow them (read every row); ``False``: no row can match.
    Neighbouring words of a term narrow by their pair token (``schema.index_text``):
    a phrase of common words then reads only the rows where they are neighbours.
    """
    groups: list[tuple[str, ...]] = []  # a row matches one expression of every group
    for term in terms:
        term = term.replace(PAIR, PAIR_STANDIN)
        for run in CJK_RUN.findall(term):
            # Each CJK character and each pair of neighbours is a token of its own.
            grams = [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
            groups.extend((quote(g),) for g in dict.fromkeys(grams))
        marked = CJK_RUN.sub(CJK_MARK, term)  # a CJK run: no word, and words across it never pair
        words: list[tuple[re.Match[str], list[str] | None]] = []
        for m in WORD.finditer(marked):
            before, after = m.start() > 0, m.end() < len(marked)
            mode = "exact" if before and after else "prefix" if before else "suffix" if after else "inside"
            found = _words(con, m.group(), mode)
            if found is not None and not found:
                return False
            words.append((m, found))
        paired: set[int] = set()
        for i in range(len(words) - 1):
            (m, left), (n, right) = words[i], words[i + 1]
            if CJK_MARK in marked[m.end() : n.start()]:
                continue
            group = _pair(left, n.group(), right, whole=n.end() < len(marked))
            if group is not None:
                groups.append(group)
                paired.update((i, i + 1))  # a pair's row holds both words: their own groups add nothing
        groups.extend(
            tuple(quote(w) for w in found) for i, (_, found) in enumerate(words) if found and i not in paired
        )
    if not groups:
        return None
    return " AND ".join("(" + " OR ".join(g) + ")" for g in dict.fromkeys(groups))


def _pair(left: list[str] | None, b: str, right: list[str] | None, whole: bool) -> tuple[str, ...] | None:
    """The rows where a word of ``left`` is followed by ``b`` (``whole``) or a word it begins (``right``).

    The index holds a pair only if one of its words is COMMON, so the group is: the pairs of
    a left word that is COMMON (then any right word, as a prefix query), the pairs of the
    others with a COMMON right word, and, for the pairs the index does not hold, the rows
    that merely hold both words. None: too many words to say (no narrowing by this pair).
    """
    if left is None:
        return None
    common_right = [c for c in COMMON if (c == b if whole else c.startswith(b))]
    if whole:
        rare_right: list[str] | None = [] if b in COMMON else [b]
    else:
        rare_right = None if right is None else [r for r in right if r not in COMMON]
    out = []
    for w in left:
        if w in COMMON:
            out.append(quote(pair_token(w, b)) + ("" if whole else "*"))
        else:
            out.extend(quote(pair_token(w, c)) for c in common_right)
    rare_left = [w for w in left if w not in COMMON]
    if rare_left and rare_right is None:
        return None
    if rare_left and rare_right:
        out.append(f"(({' OR '.join(map(quote, rare_left))}) AND ({' OR '.join(map(quote, rare_right))}))")
    return tuple(out) if 0 < len(out) <= MAX_PAIR_ALTERNATIVES else None


def _words(con: sqlite3.Connection, fragment: str, mode: str) -> list[str] | None:
    """Words of the vocabulary that ``fragment`` is (exact), starts, ends or is inside; None if too many."""
    if mode == "exact":
        return [fragment] if con.execute("SELECT 1 FROM terms WHERE term = ?", (fragment,)).fetchone() else []
    if mode == "prefix":
        upper = fragment[:-1] + chr(ord(fragment[-1]) + 1) if ord(fragment[-1]) < 0x10FFFF else None
        sql = "SELECT term FROM terms WHERE term >= ?" + (" AND term < ?" if upper else "") + " LIMIT ?"
        rows = con.execute(sql, (fragment, *((upper,) if upper else ()), MAX_WORDS + 1)).fetchall()
        found = [r[0] for r in rows if r[0].startswith(fragment)]
        return None if len(found) > MAX_WORDS else found
    expr = " AND ".join(quote(g) for g in fragment_grams(fragment))
    cursor = con.execute(
        "SELECT t.term FROM terms_g CROSS JOIN terms t ON t.id = terms_g.rowid WHERE terms_g MATCH ?", (expr,)
    )
    found = []
    try:
        for (word,) in cursor:
            if word.endswith(fragment) if mode == "suffix" else fragment in word:
                found.append(word)
                if len(found) > MAX_WORDS:
                    return None
    finally:
        cursor.close()
    return found


def _hit(reader: RowReader, row: tuple[Any, ...], text: str, session_id: str, terms: list[str]) -> Hit:
    info = reader.describe(row, session_id, text)
    found = None
    for term in terms:
        found = re.search(re.escape(term), text, re.IGNORECASE)
        if found:
            break
    a, b = (found.start(), found.end()) if found else (0, 0)
    lo, hi = max(0, a - SNIPPET_CHARS), min(len(text), b + SNIPPET_CHARS)
    snippet = ("…" if lo else "") + " ".join(text[lo:hi].split()) + ("…" if hi < len(text) else "")
    line = info.line
    if line is not None and found:
        line += text[:a].count("\n")
    return Hit(
        info.session_id,
        info.message_uuid,
        info.role,
        info.kind,
        info.ts or 0.0,
        snippet,
        info.call_id,
        info.ref,
        line,
    )


def render_hits(hits: list[Hit], query: str, scope: str) -> str:
    """Hits as text, for the model and for ``%sessions search``."""
    if not hits:
        return f"no match for {query!r} in {scope}."
    lines = [f"{len(hits)} match{'es' if len(hits) != 1 else ''} for {query!r} in {scope}:"]
    for i, h in enumerate(hits, 1):
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(h.ts)) if h.ts else "?"
        where = f"session_id {h.session_id} · message_uuid {h.message_uuid or '(unknown)'}"
        what = f"{h.role} {h.kind}" + (f" {h.call_id}" if h.call_id else "")
        lines.append(f"{i}. {where} · {what} · {when}")
        if h.ref:
            lines.append(f"   in {h.ref}, line {h.line} (read_file with offset to see more)")
        lines.append(f"   {h.snippet}")
    return "\n".join(lines)
