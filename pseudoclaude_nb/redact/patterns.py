"""What a secret looks like: each kind's literal triggers, its regex and its gates (SPEC §6.2).

The data of redaction, apart from how it is applied (``redact``): ``PATTERNS`` in the order
they run, the ``Pattern`` they are made of, and the marker a match becomes. A regex begins
with a literal (``re`` then scans for it instead of trying every position); a pattern whose
trigger is a common word (``token``, ``secret``) has ``after`` gates, so its regex runs only
where an assignment follows the word. Token shapes that begin with a fixed prefix (GitLab,
PyPI, Hugging Face, SendGrid…) are data, adapted from gitleaks' maintained rules
(``redact.rules``); the patterns here are those that need a label or a context.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, AnyStr, Generic

from .rules import SHAPES, Shape


class Regex(Generic[AnyStr]):
    """A regex compiled on its first use, then the compiled pattern's own methods.

    The table below holds ~90 regexes (each pattern and its gates); compiling them all took
    tens of milliseconds of every kernel's first ``%agent`` (its log writer redacts), while
    a text meets one only once the trigger pre-check found a word it gates (issue 47). The
    first attribute asked for compiles it and puts the compiled pattern's methods on this
    object, so a call costs what a compiled pattern's call costs.
    """

    match: Callable[..., re.Match[AnyStr] | None]
    fullmatch: Callable[..., re.Match[AnyStr] | None]
    search: Callable[..., re.Match[AnyStr] | None]
    finditer: Callable[..., Any]
    findall: Callable[..., list[Any]]
    sub: Callable[..., AnyStr]
    subn: Callable[..., tuple[AnyStr, int]]
    split: Callable[..., list[Any]]
    compiled: re.Pattern[AnyStr]

    def __init__(self, source: AnyStr, flags: int = 0) -> None:
        self.source: AnyStr = source
        self._flags = flags

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)  # copy, pickle and friends ask for dunders: not a use
        compiled = re.compile(self.source, self._flags)
        for method in ("match", "fullmatch", "search", "finditer", "findall", "sub", "subn", "split"):
            setattr(self, method, getattr(compiled, method))
        self.compiled = compiled
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"Regex({self.source!r})"


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True)
class Pattern:
    kind: str
    triggers: tuple[str, ...]  # literal substrings; the regex runs only if one is present
    regex: Regex[str]
    keep: int = 0  # a group kept verbatim before the secret (the "aws_secret_access_key = ")
    # What must follow one of the triggers for the regex to have a chance, matched at the
    # trigger's end: a trigger that is a common word ("token", "secret") then costs one
    # anchored match, not the regex over the whole text (~100 µs on 4 KB). A superset of
    # what the regex accepts there (tests/test_redaction.py checks it against the regex).
    after: Regex[str] | None = None
    # The same gate on an encoded log line, where a string's ``"`` is ``\"``, a tab ``\t``
    # and other control characters ``\u00XX``: a line no gate lets through is not walked.
    after_line: Regex[bytes] | None = None
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
        parts: list[str] = []
        done = 0
        for start in starts:
            if start >= done and (m := self.regex.match(text, start)) is not None:
                parts += (text[done : m.start()], replace(m))
                done = m.end()
        return "".join((*parts, text[done:])) if replaced else text


# A token may not continue a longer word ("task-ant…", "xsk-…"), but it may follow a "-"
# or "_" (``api-sk_live_…``, ``key_ghp_…``: a name glued to the token). The check is a
# lookbehind placed *after* the literal prefix, e.g. ``sk-(?<!X sk-)``, so the regex still
# starts with a literal that ``re`` can search for quickly. A token ends at a non-word.
_WORD = "[A-Za-z0-9_-]"
_GLUE = "[A-Za-z0-9]"
_END = rf"(?!{_WORD})"


def _after(prefix: str) -> str:
    return rf"{re.escape(prefix)}(?<!{_GLUE}{re.escape(prefix)})"


def _shape(shape: Shape) -> Pattern:
    """A token that begins with a literal prefix (``redact.rules``): gated by its body, so a
    prefix that is a common word ("SK", "key-", "dapi") costs one anchored match."""
    if shape.keep_prefix:
        head = "(" + "|".join(map(re.escape, shape.prefixes)) + ")"
    else:
        head = "(?:" + "|".join(map(_after, shape.prefixes)) + ")"
    if shape.triggers:  # the regex runs on the text holding one (re finds the prefixes)
        return Pattern(shape.kind, shape.triggers, Regex(head + f"(?:{shape.body}){_END}"))
    return Pattern(
        shape.kind,
        shape.prefixes,
        Regex(head + f"(?:{shape.body}){_END}"),
        keep=1 if shape.keep_prefix else 0,
        after=Regex(shape.body),
        after_line=Regex(shape.body.encode()),
        words=shape.prefixes,
    )


# What may stand between two parts of a credential given together (an id and its secret):
# spaces, a comma or a colon, quotes, and their JSON escapes.
_PAIR_GAP = r"(?:[\s,;:|=/\"']|\\[nrt\"]){1,12}"


# Code that names a secret without holding one, left as it is when the value is not quoted:
# ``token = get_token()``, ``password = os.environ["PW"]``, ``key = settings.SECRET_KEY``,
# ``self.token = token``, ``token: Optional[str] = None``. Only values without a digit (a
# generated secret almost always has some: ``f(Hunter2…)`` is redacted), and a variable is
# a secret word itself or a snake_case name holding one (``PASSWORD=supersecret`` is redacted).
_CODE_VALUE = Regex(
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


# What follows "uthorization" before the scheme, in text and in an encoded line (where a
# quote may be escaped and a tab or newline is "\t", "\n"): the regex runs only there.
_AUTH_AFTER = r"[\"']?\s*[:=]\s*[\"']?"
_AUTH_AFTER_LINE = rb"(?:\\?[\"'])?(?:\s|\\[nrt])*[:=](?:\s|\\[nrt])*(?:\\?[\"'])?"
_AUTH_WORDS = ("authorization", "Authorization", "AUTHORIZATION")
# After "password is": words that say something about a password, not what it is.
_NOT_A_PASSWORD = (
    "required", "wrong", "incorrect", "invalid", "not", "too", "the", "empty", "missing", "set",
    "stored", "saved", "correct", "expired", "hidden", "needed", "changed", "reset", "case",
    "being", "also", "still", "now", "only", "never", "always", "used", "given", "shown", "sent",
    "visible", "weak", "strong", "long", "short", "fine", "same", "different", "from", "encrypted",
    "hashed", "unknown", "optional", "mandatory", "none", "null", "blank", "your", "their", "this",
    "that", "what", "where", "here", "there", "available", "asked", "prompted", "read", "taken",
)  # fmt: skip
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
        Regex(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            # The whole block, not reaching past another BEGIN (so one unfinished block
            # cannot swallow everything up to the next key's END) …
            r"(?:(?:(?!-----BEGIN ).)*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
            # … or a block cut before its END (a truncated read, a preview): its header
            # and base64 lines, so half a key is not left behind either.
            # Lines end in a newline or, in a JSON string (a service-account file), in "\n".
            r"|(?:[ \t]*(?:\r?\n|\\r?\\n)?[ \t]*(?:(?:Proc-Type|DEK-Info|Comment):[^\n]*|[A-Za-z0-9+/]{16,}={0,2}))*)",
            re.DOTALL,
        ),
    ),
    # Anthropic: sk-ant-api03-…, sk-ant-admin01-…, sk-ant-oat01-… (about 100 characters).
    # Triggered by OpenAI's "sk-" (a text with "sk-" is looked at for both anyway): one literal
    # fewer in the pre-check, which holds at most 64 (issue 41 needed three).
    Pattern("anthropic", ("sk-",), Regex(_after("sk-ant-") + r"[A-Za-z0-9_-]{20,}")),
    # OpenAI project, service-account and admin keys, then legacy sk-<48 alphanumerics>.
    # The legacy shape needs a digit and 32+ characters, so "sk-learn" or prose stays.
    Pattern(
        "openai",
        ("sk-",),
        Regex(
            _after("sk-") + r"(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"
            r"|(?=[A-Za-z]*[0-9])[A-Za-z0-9]{32,}" + _END + ")"
        ),
    ),
    # GitHub classic tokens (ghp_/gho_/ghu_/ghs_/ghr_ + 36) and fine-grained github_pat_….
    Pattern(
        "github",
        (*_GITHUB_CLASSIC, "github_pat_"),
        Regex(_after("g") + r"(?:h[pousr]_[A-Za-z0-9]{36,}|ithub_pat_[A-Za-z0-9_]{22,})" + _END),
    ),
    # An AWS secret key given right after its access key id, without a label (a CSV row of
    # the console's credentials file, "AKIA… wJalr…", a tuple): the id stays for the next
    # pattern. The secret is 40 base64 characters of all three kinds (a git SHA is not).
    Pattern(
        "aws-secret-key",
        ("AKIA", "ASIA"),
        Regex(
            r"(A(?<![A-Za-z0-9]A)(?:KIA|SIA)[A-Z0-9]{16}" + _PAIR_GAP + ")"
            r"(?=[A-Za-z0-9/+]{0,39}[0-9])(?=[A-Za-z0-9/+]{0,39}[a-z])(?=[A-Za-z0-9/+]{0,39}[A-Z])"
            r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
        ),
        keep=1,
        after=Regex(r"[A-Z0-9]{16}" + _PAIR_GAP + r"[A-Za-z0-9/+]{40}"),
        after_line=Regex(rb"[A-Z0-9]{16}" + _PAIR_GAP.encode() + rb"[A-Za-z0-9/+]{40}"),
        words=("AKIA", "ASIA"),
    ),
    # AWS access key ids: AKIA (long-term) or ASIA (temporary) + 16 upper-case alphanumerics.
    Pattern(
        "aws-access-key-id",
        ("AKIA", "ASIA"),
        Regex(r"A(?<![A-Za-z0-9]A)(?:KIA|SIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ),
    # AWS secret keys are 40 random base64 characters: only recognisable by their label
    # (aws_secret_access_key = …, "SecretAccessKey": "…", AWS_SECRET_ACCESS_KEY=…). The
    # match starts at the "secret" (an "aws_" before it stays as it is): a literal start
    # keeps the regex fast on the many texts that merely say "secret".
    Pattern(
        "aws-secret-key",
        ("ecret", "ECRET"),
        Regex(
            r"([sS](?:ecret|ECRET)[ _-]?(?i:(?:access[ _-]?)?key)[\"']?\s*[:=,]\s*[\"']?)"
            r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
        ),
        keep=1,
        after=Regex(r"[ _-]?(?i:(?:access[ _-]?)?key)"),
        after_line=Regex(rb"[ _-]?(?i:(?:access[ _-]?)?key)"),
        words=("secret", "sECRET", "Secret", "SECRET"),
    ),
    # Authorization: Bearer <token>, in headers, curl -H, JSON or Python dicts. A shell
    # variable ($TOKEN) or a placeholder (<token>) has characters outside the token set.
    Pattern(
        "bearer-token",
        ("uthorization", "UTHORIZATION"),
        Regex(r"((?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:bearer)\s+)[A-Za-z0-9._~+/=_-]{16,}"),
        keep=1,
        after=Regex(_AUTH_AFTER + r"(?i:bearer)\s"),
        after_line=Regex(_AUTH_AFTER_LINE + rb"(?i:bearer)(?:\s|\\[nrt])"),
        words=_AUTH_WORDS,
    ),
    # Authorization with another scheme (Basic base64(user:pass), Discord's Bot, Token …).
    Pattern(
        "authorization",
        ("uthorization", "UTHORIZATION"),
        Regex(
            r"((?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:basic|bot|token|digest|apikey|sso-key)\s+)"
            r"[A-Za-z0-9._~+/=:-]{8,}"
        ),
        keep=1,
        after=Regex(_AUTH_AFTER + r"(?i:basic|bot|token|digest|apikey|sso-key)\s"),
        after_line=Regex(_AUTH_AFTER_LINE + rb"(?i:basic|bot|token|digest|apikey|sso-key)(?:\s|\\[nrt])"),
        words=_AUTH_WORDS,
    ),
    # A docker config's "auth": base64(user:password), also inside an escaped JSON string, and
    # in a Python repr ({'auths': {'ghcr.io': {'auth': '…'}}}, issue 41). A word ('required')
    # is not base64 of a user and a password: the value needs a digit, +, / or =, or both cases.
    # Triggers: '"auth' (JSON, escaped or not) and "auth'" (a repr; a literal led by a quote
    # would make every JSON line pay).
    Pattern(
        "docker-auth",
        ('"auth', "auth'"),
        Regex(
            r"""(["']auth\\?(["'])\s*:\s*\\?\2)"""
            r"(?=[A-Za-z0-9+/]*(?:[0-9+/=]|[a-z][A-Za-z0-9+/]*[A-Z]|[A-Z][A-Za-z0-9+/]*[a-z]))"
            r"[A-Za-z0-9+/]{8,}={0,2}(?=\\?\2)"
        ),
        keep=1,
        after=Regex(r"""\\?["']?\s*:"""),
        after_line=Regex(rb"""(?:\\?["'])?\s*:"""),
        words=('"auth', "'auth'"),  # where each trigger sits in the match's start
    ),
    # HTTP basic auth as requests takes it, a keyword argument: auth=('user', 'password')
    # (issue 41): the user stays, the password goes. Names (auth=(user, password)) stay.
    Pattern(
        "basic-auth",
        ("auth=(",),
        Regex(
            r"""(auth=\((?<![A-Za-z0-9_]auth=\()\s*(["'])[^"'\n]{1,256}\2\s*,\s*(["']))"""
            r"""(?![$<{])[^"'\n]{3,512}(?=\3)"""
        ),
        keep=1,
    ),
    # An API key in a header, as a dict or a line: {'x-api-key': '…'} (Anthropic's own header),
    # x-api-key: …, api-key=… (issue 41). Code that names one ({'x-api-key': os.environ['KEY']})
    # is spared. Lower case only ("pi-key"): another literal for X-Api-Key would pass the 64
    # the pre-check holds.
    Pattern(
        "api-key",
        ("pi-key",),
        Regex(
            r"((?:api-key|Api-Key|API-Key)[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?)"
            r"(?![\[$<{(])[A-Za-z0-9._~+/=-]{8,}(?![A-Za-z0-9._~+/=-])"
        ),
        keep=1,
        after=Regex(r"""[\"']?[ \t]{0,4}[:=]"""),
        after_line=Regex(rb"""(?:\\?[\"'])?(?: |\\t){0,4}[:=]"""),
        words=("api-key",),
        spare=_names_code,
    ),
    # A .netrc (or _netrc) entry: machine HOST login USER password SECRET, on one line or
    # several (issue 41). Only in an entry: after "machine" and a host name (a dot in it,
    # localhost, an address) or a "login USER", and the value ends its line or comes before
    # another keyword, so prose ("machine learning password strength", "the password reset
    # link") stays as it is. Triggered by "assw" (no literal of its own: the pre-check holds
    # at most 64), gated by what follows it; the match begins before it, at "machine".
    Pattern(
        "netrc-password",
        ("assw",),
        Regex(
            r"(machine(?<![A-Za-z0-9_]machine)[ \t]+(?:"
            r"(?:[\w-]+\.[\w.-]+|localhost|\d[\d.:]*|\[[0-9a-fA-F:]+\])\s+(?:(?:login|account)[ \t]+\S+\s+){0,2}"
            r"|\S+\s+(?:(?:login|account)[ \t]+\S+\s+){1,2})"
            r"password[ \t]+)(?![$<{\[])\S{3,}"
            r"(?=[ \t]*(?:\r?\n|$)|[ \t]+(?:machine|login|account|macdef|default)\b)"
        ),
        keep=1,
        after=Regex(
            r"ord[ \t]+\S{3,}?(?:[ \t]*(?:\r?\n|$)|[ \t]+(?:machine|login|account|macdef|default)\b)"
        ),
        after_line=Regex(
            rb'ord(?: |\\t)+(?:[^\s\\"]|\\.){3,}?'
            rb'(?:(?: |\\t)*(?:\\r)?\\n|(?: |\\t)*"|(?: |\\t)+(?:machine|login|account|macdef|default)\b)'
        ),
    ),
    # curl -u user:password (and --user): the password goes, the user stays.
    Pattern(
        "url-password",
        ("curl",),
        Regex(r"(curl\b[^\n]*?\s(?:-u|--user)(?:=|[ \t]+)[\"']?[^\s:\"']{1,256}:)(?![$\[<{])[^\s\"']{3,}"),
        keep=1,
    ),
    # A password on a command line: mysql -pSECRET, --password=SECRET / --password SECRET.
    Pattern(
        "cli-password",
        ("mysql",),
        Regex(r"(mysql[a-z]*\b[^\n|;&]*?\s-p)(?![$\[<{])[^\s\"';|&]{3,}"),
        keep=1,
    ),
    Pattern(
        "cli-password",
        ("--password",),
        Regex(r"(--password(?:=|[ \t]+)[\"']?)(?![$\[<{-])[^\s\"';|&]{3,}"),
        keep=1,
    ),
    # A password in prose: "my password is hunter2", "the password was: …". Words that
    # describe a password rather than being one ("is required", "is wrong") stay.
    Pattern(
        "password",
        ("assw", "ASSW"),
        Regex(
            r"((?:[pP]assword|PASSWORD|[pP]asswd|PASSWD)\s+(?i:is|was)\s*:?\s+[\"'`]?)"
            r"(?![\[$<{(])(?!(?i:" + "|".join(_NOT_A_PASSWORD) + r")\b)[^\s\"'`]{4,}"
        ),
        keep=1,
        after=Regex(r"(?:ord|ORD|d|D)?\s+(?i:is|was)\s"),
        after_line=Regex(rb"(?:ord|ORD|d|D)?(?:\s|\\[nt])+(?i:is|was)(?:\s|\\[nt])"),
        words=("password", "Password", "PASSWORD", "passwd", "Passwd", "PASSWD"),
    ),
    # Twilio: an account SID (AC…) or API key SID (SK…), then its auth token or secret, as
    # the client is made: ``Client("AC…", "…")`` (a .env's TWILIO_AUTH_TOKEN= is a label).
    # The SID stays (an id, not a secret). Not triggered on "AC"/"SK": 2 characters (or a
    # quote and 2, in JSON lines full of quotes) would double the pre-check's cost.
    Pattern(
        "twilio",
        ("Client(",),
        Regex(r"(Client\(\s*[\"'](?:AC|SK)[0-9a-f]{32}[\"']\s*,\s*[\"'])[A-Za-z0-9]{32}(?![A-Za-z0-9])"),
        keep=1,
        after=Regex(r"\s*[\"'](?:AC|SK)[0-9a-f]{32}"),
        after_line=Regex(rb"\s*\\?[\"'](?:AC|SK)[0-9a-f]{32}"),
        words=("Client(",),
    ),
    # Discord bot tokens (base64 of the bot's id, 6, 27+) have no fixed prefix: found where a
    # bot is started with one, ``client.run("…")`` (or by a label: DISCORD_TOKEN=, "Bot …").
    Pattern(
        "discord",
        (".run(",),
        Regex(r"(\.run\(\s*[\"'])[A-Za-z0-9_-]{23,28}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}" + _END),
        keep=1,
        after=Regex(r"\s*[\"'][A-Za-z0-9_-]{23,28}\."),
        after_line=Regex(rb"\s*\\?[\"'][A-Za-z0-9_-]{23,28}\."),
        words=(".run(",),
    ),
    *map(_shape, SHAPES),
    # Slack tokens: xoxb- (bot), xoxp- (user), xoxa-/xoxr-/xoxs-, and xapp- app tokens.
    Pattern(
        "slack",
        ("xox", "xapp-"),
        Regex(r"x(?<![A-Za-z0-9]x)(?:ox[abprs]|app)-[A-Za-z0-9-]{10,}" + _END),
    ),
    # Google API keys: AIza + 35 characters.
    Pattern("google-api-key", ("AIza",), Regex(_after("AIza") + r"[0-9A-Za-z_-]{35}" + _END)),
    # Stripe secret and restricted keys, live and test.
    Pattern(
        "stripe",
        ("k_live_", "k_test_"),
        Regex(r"(?:s|r)(?<![A-Za-z0-9][sr])k_(?:live|test)_[0-9A-Za-z]{16,}" + _END),
    ),
    # JSON Web Tokens: three base64url parts, the first two JSON objects ("eyJ" is '{"').
    Pattern(
        "jwt",
        ("eyJ",),
        Regex(_after("eyJ") + r"[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}" + _END),
    ),
    # Credentials in a URL (postgres://user:pass@host, https://user:token@github.com): the
    # password goes, the scheme, user and host stay.
    Pattern(
        "url-password",
        ("://",),
        Regex(r"(://[^\s:/@\"'<>\\]{1,256}:)[^\s@/\"'<>\\]{1,512}(?=@[A-Za-z0-9\[])"),
        keep=1,
        # A link without a user and a colon (https://docs.python.org/…) is not walked, and
        # in a string the regex is tried only where a user and a colon follow a "://".
        after=Regex(r"[^\s:/@\"'<>\\]{1,256}:"),
        after_line=Regex(rb"(?:[^\s:/@\"'<>\\]|\\u00[01][0-9a-fA-F]|\\b){1,256}:"),
        words=("://",),
    ),
    # Assignments and .env lines whose name says what the value is: DB_PASSWORD=…,
    # "client_secret": "…", GITHUB_TOKEN: …, STRIPE_API_KEY=… (an AWS secret key is the
    # pattern above). A shell variable ($X), a placeholder (<x>, {x}) or an already
    # redacted value is left alone.
    Pattern(
        "assigned-secret",
        ("assw", "ASSW", "ecret", "ECRET", "oken", "OKEN", "_KEY", "_key", "apikey", "APIKEY"),
        Regex(
            # Literal alternatives (not (?i:…)): re then skips ahead by their first letters,
            # ~10x faster on long text. The name before the keyword stays as it is.
            r"((?:" + "|".join(_SECRET_NAMES) + r")"
            r"[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?)(?![\[$<{(])[^\s\"'`,;\\]{4,}"
        ),
        keep=1,
        # Each keyword ends at its trigger, or 1-3 letters later (passw|ord, PASSW|D).
        after=Regex(r"(?:ord|ORD|d|D)?[\"']?[ \t]{0,4}[:=]"),
        after_line=Regex(rb"(?:ord|ORD|d|D)?(?:\\?[\"'])?(?: |\\t){0,4}[:=]"),
        words=_SECRET_NAMES,
        spare=_names_code,
    ),
)
