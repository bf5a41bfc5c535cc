"""Queries of the history index: matching, snippets, and hits rendered as text.

The index (``history.HistoryIndex``) owns the database and keeps it current; this module
only reads it. A query matches substrings (FTS5 trigrams), newest first.
"""

from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass
from typing import Any

SNIPPET_CHARS = 90  # each side of the match
SEARCH_TOOL = "search_history"  # rows of earlier searches never answer a new one

_COLUMNS = "d.session_id, d.message_uuid, d.role, d.kind, d.ts, d.call_id, d.line, d.ref, d.text"


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


def grams(text: str) -> set[str]:
    """The tokens of ``text`` in the short-term table: each distinct character and character pair.

    Lower-cased first (a search is case-insensitive); pairs with white space are left out
    (a term never holds any). A token is the characters' code points in hex, ``u61`` or
    ``b61x62``, so FTS5's ascii tokenizer keeps it whole whatever the characters are.
    """
    low = text.lower()
    chars = set(low)
    out = {f"u{ord(c):x}" for c in chars if not c.isspace()}
    pairs = set(zip(low, low[1:], strict=False))
    out.update(f"b{ord(a):x}x{ord(b):x}" for a, b in pairs if not (a.isspace() or b.isspace()))
    return out


def grams_text(text: object) -> str:
    return " ".join(grams(text)) if isinstance(text, str) else ""


def short_token(term: str) -> str | None:
    """The side table's token for a one- or two-character term (lower-cased), or None."""
    low = term.lower()
    if len(low) == 1 and not low.isspace():
        return f"u{ord(low):x}"
    if len(low) == 2 and not (low[0].isspace() or low[1].isspace()):
        return f"b{ord(low[0]):x}x{ord(low[1]):x}"
    return None


def match(con: sqlite3.Connection, query: str, session_id: str | None, limit: int) -> list[Hit]:
    """The hits for ``query``: the exact phrase first, then rows with every word."""
    quoted = len(query) >= 2 and query[0] == query[-1] == '"'
    phrase = query[1:-1].strip() if quoted else query
    terms = [phrase] if quoted else phrase.split()
    span: tuple[int, int] | None = None
    if session_id is not None:
        # A session's rows form one rowid range (mostly its own): FTS5 narrows by range
        # natively, where a join condition alone would walk every match of the workspace.
        low, high = con.execute(
            "SELECT min(id), max(id) FROM docs WHERE session_id = ?", (session_id,)
        ).fetchone()
        if low is None:
            return []
        span = (low, high)
    found = _find(con, [phrase], session_id, span, limit)
    if len(found) < limit and len(terms) > 1:
        # Too few hits for the exact phrase: every word, anywhere in one row.
        ids = {r[0] for r in found}
        more = [r for r in _find(con, terms, session_id, span, limit) if r[0] not in ids]
        found += more[: limit - len(found)]
    return [_hit(r[1:], terms) for r in found]


def _find(
    con: sqlite3.Connection,
    terms: list[str],
    session_id: str | None,
    span: tuple[int, int] | None,
    limit: int,
) -> list[tuple]:
    """Rows with every term, newest first.

    Newest first rather than by bm25: on trigrams bm25 says little about a substring
    match, and ranking must score every match, where rowid order stops at ``limit``.
    """
    # Trigrams need 3 characters. Shorter terms alone (two CJK characters, "qz") are looked
    # up in the side table of characters and pairs; beside a long term, they are checked
    # with instr() on the rows the long terms matched (newest first, stopping at ``limit``).
    long = [t for t in terms if len(t) >= 3]
    short = [t.lower() for t in terms if len(t) < 3]
    if short and not long:
        tokens = [short_token(t) for t in short]
        if all(tokens):
            return _find_short(con, tokens, session_id, span, limit)  # type: ignore[arg-type]
    # Earlier searches echo their own query and hits: never an answer to a new one.
    where, args = [f"coalesce(d.tool, '') != '{SEARCH_TOOL}'"], []
    for t in short:
        where.append("instr(lower(d.text), ?) > 0")
        args.append(t)
    if session_id is not None:
        where.append("d.session_id = ?")
        args.append(session_id)
    conditions = "".join(f" AND {w}" for w in where)
    if long:
        match = " AND ".join('"' + t.replace('"', '""') + '"' for t in long)
        in_span = " AND docs_fts.rowid BETWEEN ? AND ?" if span else ""
        sql = (
            f"SELECT d.id, {_COLUMNS} FROM docs_fts JOIN docs d ON d.id = docs_fts.rowid "
            f"WHERE docs_fts MATCH ?{in_span}{conditions} ORDER BY docs_fts.rowid DESC LIMIT ?"
        )
        return con.execute(sql, (match, *(span or ()), *args, limit)).fetchall()
    in_span = " AND d.id BETWEEN ? AND ?" if span else ""
    sql = f"SELECT d.id, {_COLUMNS} FROM docs d WHERE 1{in_span}{conditions} ORDER BY d.id DESC LIMIT ?"
    return con.execute(sql, (*(span or ()), *args, limit)).fetchall()


def _find_short(
    con: sqlite3.Connection, tokens: list[str], session_id: str | None, span: tuple[int, int] | None, limit: int
) -> list[tuple]:
    """Rows with every one- or two-character term: the side table says exactly which, newest first."""
    where, args = [f"coalesce(d.tool, '') != '{SEARCH_TOOL}'"], []
    if session_id is not None:
        where.append("d.session_id = ?")
        args.append(session_id)
    in_span = " AND docs_short.rowid BETWEEN ? AND ?" if span else ""
    sql = (
        f"SELECT d.id, {_COLUMNS} FROM docs_short JOIN docs d ON d.id = docs_short.rowid "
        f"WHERE docs_short MATCH ?{in_span}{''.join(f' AND {w}' for w in where)} "
        "ORDER BY docs_short.rowid DESC LIMIT ?"
    )
    return con.execute(sql, (" AND ".join(tokens), *(span or ()), *args, limit)).fetchall()


def _hit(row: tuple, terms: list[str]) -> Hit:
    session_id, uuid, role, kind, ts, call_id, line, ref, text = row
    match = None
    for term in terms:
        match = re.search(re.escape(term), text, re.IGNORECASE)
        if match:
            break
    a, b = (match.start(), match.end()) if match else (0, 0)
    lo, hi = max(0, a - SNIPPET_CHARS), min(len(text), b + SNIPPET_CHARS)
    snippet = ("…" if lo else "") + " ".join(text[lo:hi].split()) + ("…" if hi < len(text) else "")
    if line is not None and match:
        line += text[:a].count("\n")
    return Hit(session_id, uuid, role, kind, ts or 0.0, snippet, call_id, ref, line)


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
