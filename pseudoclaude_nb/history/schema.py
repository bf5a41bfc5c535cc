"""The history index's tables, and how text becomes the tokens they hold.

The index stores no text. ``docs`` says where each searchable piece is (a log line and the
part of it, or a byte range of a spilled file); ``words`` is a contentless FTS5 table
(detail=none) of each piece's *words*, lower-cased, and of each pair of neighbouring words
one of which is a ``COMMON`` word (``the\ufdd0error``: one token, so a phrase of common
words narrows to the rows where they are neighbours, without positions in the index); ``terms`` is the vocabulary of the words, and ``terms_g`` a contentless FTS5 table of each word's characters, character
pairs and trigrams, so that a fragment of a word (``Wrapper`` in ``TextWrapper``, ``压缩``
inside a sentence, ``qz``) finds the words that contain it. A query becomes candidate rows
through these tables; the query module reads each candidate's text from the log by offset
and keeps only real matches, so the answer is exactly a case-insensitive substring search.

A word is what FTS5's ``ascii`` tokenizer (with ``_`` as a token character) makes a token:
a run of ASCII letters, digits, ``_`` and any non-ASCII characters. ``WORD`` is the same
rule in Python, so the vocabulary holds exactly the tokens of ``words``.

A workspace is untrusted input, so a ``history.sqlite`` found there is used only if
``problem`` finds it has exactly the shape this module makes: the same objects with the same
SQL (no trigger, view or extra table: a trigger would run inside every catch-up), the same
``user_version`` and ``application_id``, and only the full-text settings the package sets.
"""

from __future__ import annotations

import functools
import re
import sqlite3

SCHEMA_VERSION = 8  # 8: pairs of neighbouring words in ``words``
APPLICATION_ID = 0x50434E42  # "PCNB"; files made before it was set say 0
KIND_NAMES = ("text", "tool_call", "tool_result", "spill")
KIND = {name: i for i, name in enumerate(KIND_NAMES)}

# ``[0-9a-z_\u0080-\U0010ffff]+``, spelled as the ASCII it leaves out: the same characters
# (tests/test_history_index.py checks every code point), compiled in ~0.05 ms instead of ~3 ms (a class
# reaching U+10FFFF is built as a big charset) when a kernel's first run opens the index (issue 47).
WORD = re.compile(r"[^\x00-/:-^`{-\x7f]+")
# Marks the character grams of a word (never in a word, so never confused with one of its trigrams).
GRAM_MARK = "\x01"
# Joins two neighbouring words into one token of ``words`` (a Unicode noncharacter: a word
# character to the tokenizer). A text's own U+FDD0 is indexed as ``PAIR_STANDIN``, so no word
# of the vocabulary holds it.
PAIR = "\ufdd0"
PAIR_STANDIN = "\ufdd1"
# The words whose neighbours pair (common-grams): the glue of everyday phrases. A phrase of
# words found everywhere nearly always holds one ("fix the error in the file"), and a pair of
# two other words would double the index for phrases a rare word already narrows. Part of
# the index's format: a change needs a new ``SCHEMA_VERSION``.
COMMON = frozenset(
    "a an and are as at be by can do for from has have if in is it no not of on or that the this to was will with".split()  # noqa: SIM905
)
_COMMON_BYTES = frozenset(w.encode() for w in COMMON)
_PAIR_BYTES = PAIR.encode()
# Bytes that end a word: every ASCII byte but [0-9a-z_] (the text is lower-cased first); UTF-8
# bytes of other characters are word bytes, as they are to the tokenizer.
_SEPARATORS = bytes(
    c if c >= 0x80 or chr(c) in "0123456789abcdefghijklmnopqrstuvwxyz_" else 0x20 for c in range(256)
)

FTS_TABLES = ("words", "terms_g")
# The full-text settings of a live index (``rebuild.finish`` leaves them after a rebuild;
# an index made row by row has none): any other setting in a found file is refused.
LIVE_SETTINGS = {"automerge": 4, "crisismerge": 16, "hashsize": 1 << 20}

SCHEMA = """
CREATE TABLE IF NOT EXISTS logs(
    sid INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL UNIQUE,
    offset INTEGER NOT NULL,
    head TEXT NOT NULL,
    stamp TEXT
);
CREATE TABLE IF NOT EXISTS docs(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    sid INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    part INTEGER NOT NULL,
    off INTEGER NOT NULL,
    len INTEGER NOT NULL,
    line INTEGER,
    src INTEGER,
    slen INTEGER,
    uh INTEGER
);
CREATE INDEX IF NOT EXISTS docs_sid ON docs(sid);
CREATE TABLE IF NOT EXISTS skip(sid INTEGER NOT NULL, call_id TEXT NOT NULL, PRIMARY KEY(sid, call_id))
    WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS terms(id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE VIRTUAL TABLE IF NOT EXISTS words USING fts5(
    t, content='', detail=none, columnsize=0, tokenize="ascii tokenchars '_'"
);
CREATE VIRTUAL TABLE IF NOT EXISTS terms_g USING fts5(
    g, content='', detail=none, columnsize=0, tokenize='trigram case_sensitive 1'
);
"""


def prepare(con: sqlite3.Connection) -> None:
    """Create the tables in a new file; ``problem`` found the file new or exactly this shape."""
    version, app = con.execute("SELECT * FROM pragma_user_version, pragma_application_id").fetchone()
    if version == SCHEMA_VERSION:  # every table there, as ``problem`` checked
        if app != APPLICATION_ID:  # made before the id was set
            con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        return
    # One transaction: another kernel opening the file meanwhile sees no table or all of
    # them, never a part it would take for a foreign file.
    con.executescript(
        f"BEGIN IMMEDIATE;\n{SCHEMA}\nPRAGMA user_version = {SCHEMA_VERSION};\n"
        f"PRAGMA application_id = {APPLICATION_ID};\nCOMMIT;"
    )


@functools.cache
def expected() -> tuple[frozenset[tuple[str, str, str, str | None]], dict[str, object]]:
    """What this SQLite makes of ``SCHEMA``: its ``sqlite_master`` rows and FTS5's own settings.

    Made by this process's SQLite, so FTS5's shadow tables and its config version are the
    ones the file would hold had this SQLite made it.
    """
    con = sqlite3.connect(":memory:")
    try:
        con.executescript(SCHEMA)
        rows = frozenset(con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
        settings = dict(con.execute(f"SELECT k, v FROM {FTS_TABLES[0]}_config"))
    finally:
        con.close()
    return rows, {**settings, **LIVE_SETTINGS}


def problem(con: sqlite3.Connection) -> str | None:
    """Why the open file is not an index this package made (None: it is, or it is empty).

    Reads only the header, ``sqlite_master`` and the FTS5 settings: no statement that could
    fire a trigger or read a view. Raises ``sqlite3.DatabaseError`` for a file SQLite cannot
    read (the caller tells corruption from a busy file).
    """
    version, app = con.execute("SELECT * FROM pragma_user_version, pragma_application_id").fetchone()
    found = frozenset(con.execute("SELECT type, name, tbl_name, sql FROM sqlite_master"))
    if not found and version == 0 and app == 0:
        return None  # a new file: ``prepare`` makes the tables
    if app not in (0, APPLICATION_ID):
        return f"application_id {app}, not this package's"
    if version != SCHEMA_VERSION:
        return f"schema version {version}, expected {SCHEMA_VERSION}"
    rows, settings = expected()
    extra = sorted(found - rows, key=lambda r: (r[0], r[1]))
    if extra:
        kind, name = extra[0][:2]
        known = any(r[1] == name for r in rows)
        return f"{kind} {name!r} {'differs from the expected one' if known else 'is not part of the index'}"
    missing = sorted(r[1] for r in rows - found)
    if missing:
        return f"{missing[0]!r} is missing"
    for table in FTS_TABLES:
        for key, value in con.execute(f"SELECT k, v FROM {table}_config"):
            if key not in settings or settings[key] != value or type(value) is not type(settings[key]):
                return f"full-text setting {key!r} of {table!r} is {value!r}"
    return None


# Han, kana, hangul and their punctuation: written without spaces, so each character is a
# token of its own and each pair of neighbours one more (``压缩`` is then a token, exactly).
CJK = "\u2e80-\u2fff\u3000-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff"
CJK_RUN = re.compile(f"[{CJK}]+")


def _cjk_tokens(m: re.Match[str]) -> str:
    run = m.group()
    pairs = " ".join(run[i : i + 2] for i in range(len(run) - 1))
    return f" {' '.join(run)} {pairs} "


def index_text(text: str) -> str:
    """What a rebuild gives ``words`` for a piece of text: its words (lower-cased, CJK split), then its pairs.

    The pairs are the neighbouring words of which one is in ``COMMON`` (a text's words with
    its CJK runs taken out: words that meet across only non-word characters, ``error: in``,
    pair; a query never pairs across CJK).
    """
    return indexed(text, vocabulary=False)[0]


def indexed(text: str, *, vocabulary: bool = True) -> tuple[str, set[bytes]]:
    """What ``words`` is given for ``text`` (``index_text``), and (with ``vocabulary``) its
    distinct words (``words_of``), UTF-8 encoded: a batch's vocabulary is decoded once, for
    the words new to it.

    ``words`` is contentless with ``detail=none``: it keeps, per token, only the rows that
    hold it, never how often or where. So with ``vocabulary`` (the distinct words are made
    anyway) it is given each distinct word once, then the pairs: the same index from about
    half the text, and the tokenizer and FTS5's pending-terms hash see each token once (the
    background indexer's CPU per message is what a durable append waits for, issue 34).
    Without (a rebuild, whose SQLite inserts run on a thread of their own) it is given the
    lowered text: the Python thread is a rebuild's bottleneck. The words are the tokens
    split for the pairs: the ``WORD`` regex over the text again, and decoding every word of
    every row, cost more than the rest of indexing a row.
    """
    low = text.lower()
    if low.isascii():
        tokens = low.encode().translate(_SEPARATORS).split()
        words = set(tokens) if vocabulary else set()
    else:
        if PAIR in low:
            low = low.replace(PAIR, PAIR_STANDIN)
        tokens = CJK_RUN.sub(" ", low).encode().translate(_SEPARATORS).split()
        low = CJK_RUN.sub(_cjk_tokens, low)
        words = set(" ".join(WORD.findall(low)).encode().split()) if vocabulary else set()
    pairs = {
        a + _PAIR_BYTES + b
        for a, b in zip(tokens, tokens[1:], strict=False)
        if a in _COMMON_BYTES or b in _COMMON_BYTES
    }
    if vocabulary:
        given = b" ".join(words)
        if pairs:
            given += b"\n" + b" ".join(pairs)
        return given.decode(), words
    if not pairs:
        return low, words
    return f"{low}\n{b' '.join(pairs).decode()}", words


def words_of(indexed: str) -> set[str]:
    """The distinct words (not pairs) ``words`` makes of what ``index_text`` gave."""
    cut = indexed.rfind("\n")
    if cut >= 0 and PAIR in indexed[cut:]:
        indexed = indexed[:cut]
    return set(WORD.findall(indexed))


def pair_token(left: str, right: str) -> str:
    return f"{left}{PAIR}{right}"


def gram_text(term: str) -> str:
    """What ``terms_g`` is given for one word: its trigrams, and its characters and pairs marked.

    ``\\x01a\\x01b\\x01`` has the trigrams ``\\x01a\\x01`` (the character a) and ``a\\x01b``
    (the pair ab): the trigram tokenizer then finds words by a fragment of any length.
    """
    return f"{term}\n{GRAM_MARK}{GRAM_MARK.join(term)}{GRAM_MARK}"


def fragment_grams(fragment: str) -> list[str]:
    """The ``terms_g`` tokens every word containing ``fragment`` has (a superset test)."""
    if len(fragment) == 1:
        return [f"{GRAM_MARK}{fragment}{GRAM_MARK}"]
    if len(fragment) == 2:
        return [f"{fragment[0]}{GRAM_MARK}{fragment[1]}"]
    grams = list(dict.fromkeys(fragment[i : i + 3] for i in range(len(fragment) - 2)))
    if len(grams) > 12:  # enough to be selective; the words found are checked anyway
        step = len(grams) / 12
        grams = [grams[int(i * step)] for i in range(12)] + [grams[-1]]
    return grams


def quote(token: str) -> str:
    """An FTS5 string for one token."""
    return '"' + token.replace('"', '""') + '"'
