"""Secret redaction (SPEC §6.2): realistic keys never reach the disk; near-misses stay untouched."""

from __future__ import annotations

import hashlib
import json
import random
import string
from collections import Counter
from pathlib import Path

import ahocorasick_rs
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pseudoclaude_nb import redact as redact_module
from pseudoclaude_nb.agent import Agent
from pseudoclaude_nb.config import PseudoClaude
from pseudoclaude_nb.context.spill import write_spill
from pseudoclaude_nb.conversation import Conversation
from pseudoclaude_nb.messages import Message, ToolCall
from pseudoclaude_nb.redact import PATTERNS, Redactor, redact_text, redact_value
from pseudoclaude_nb.session import load_session
from pseudoclaude_nb.session.entries import NoteEntry
from pseudoclaude_nb.session.writer import SessionWriter
from pseudoclaude_nb.workspace import new_session_dir
from tests.scripts import script, turn

# --- the corpus: keys are generated in their real shapes, so no key-like literal is committed ----

_rng = random.Random(20261130)
ALNUM = string.ascii_letters + string.digits
UPPER = string.ascii_uppercase + string.digits


def _r(n: int, alphabet: str = ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _pem(kind: str) -> str:
    body = "\n".join(_r(64, ALNUM + "+/") for _ in range(6)) + "\n" + _r(20, ALNUM + "+/") + "=="
    return f"-----BEGIN {kind}-----\n{body}\n-----END {kind}-----"


KEYS: list[tuple[str, str]] = [
    ("anthropic", "sk-ant-api03-" + _r(93, ALNUM + "_-") + "AA"),
    ("anthropic", "sk-ant-admin01-" + _r(93, ALNUM + "_-") + "AA"),
    ("openai", "sk-proj-" + _r(74, ALNUM + "_-") + "T3BlbkFJ" + _r(74, ALNUM + "_-")),
    ("openai", "sk-svcacct-" + _r(60, ALNUM + "_-")),
    ("openai", "sk-" + _r(20) + "T3BlbkFJ" + _r(20)),  # the legacy 48-character shape
    ("github", "ghp_" + _r(36)),
    ("github", "gho_" + _r(36)),
    ("github", "ghs_" + _r(36)),
    ("github", "ghr_" + _r(36)),
    ("github", "github_pat_" + _r(22) + "_" + _r(59)),
    ("aws-access-key-id", "AKIA" + _r(16, UPPER)),
    ("aws-access-key-id", "ASIA" + _r(16, UPPER)),
    ("slack", "xoxb-" + _r(12, "0123456789") + "-" + _r(13, "0123456789") + "-" + _r(24)),
    ("slack", "xoxp-" + _r(12, "0123456789") + "-" + _r(12, "0123456789") + "-" + _r(32)),
    ("google-api-key", "AIza" + _r(35, ALNUM + "_-")),
    ("stripe", "sk_live_" + _r(24)),
    ("stripe", "rk_live_" + _r(24)),
    ("jwt", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIx" + _r(20) + "." + _r(43, ALNUM + "_-")),
    ("private-key", _pem("RSA PRIVATE KEY")),
    ("private-key", _pem("OPENSSH PRIVATE KEY")),
    ("private-key", _pem("PRIVATE KEY")),
    ("private-key", _pem("EC PRIVATE KEY")),
    # Token shapes from redact.rules (gitleaks' rules): a prefix and a body.
    ("gitlab", "glpat-" + _r(20, ALNUM + "_-")),
    ("gitlab", "gldt-" + _r(20, ALNUM + "_-")),
    ("gitlab", "glrt-t1_" + _r(27, ALNUM) + ".01" + _r(7, "abcdef0123456789")),
    ("gitlab", "glptt-" + _r(40, "0123456789abcdef")),
    ("pypi", "pypi-AgEIcHlwaS5vcmc" + _r(60, ALNUM + "_-")),
    ("huggingface", "hf_" + _r(34, string.ascii_letters)),
    ("sendgrid", "SG." + _r(22, ALNUM + "_-") + "." + _r(43, ALNUM + "_-")),
    ("digitalocean", "dop_v1_" + _r(64, "0123456789abcdef")),
    ("digitalocean", "doo_v1_" + _r(64, "0123456789abcdef")),
    ("mailgun", "key-" + _r(32, "0123456789abcdef")),
    ("npm", "npm_" + _r(36)),
    ("shopify", "shpat_" + _r(32, "0123456789abcdef")),
    ("square", "EAAA" + _r(60, ALNUM + "_-")),
    ("square", "sq0csp-" + _r(43, ALNUM + "_-")),
    ("heroku", "HRKU-AA" + _r(58, ALNUM + "_-")),
    ("new-relic", "NRAK-" + _r(27, UPPER)),
    ("atlassian", "ATATT3xFfGF0" + _r(180, ALNUM + "_-") + "=" + _r(8, "0123456789ABCDEF")),
    ("linear", "lin_api_" + _r(40)),
    ("databricks", "dapi" + _r(32, "0123456789abcdef")),
]
AWS_SECRET = _r(40, ALNUM + "/+")
BEARER = "eyJhbGciOiJIUzI1NiJ9." + _r(40, ALNUM + "_-") + "." + _r(43, ALNUM + "_-")

# Where keys show up in practice. {k} is the key.
CONTEXTS = [
    "here is my key: {k} — please use it",
    'client = Anthropic(api_key="{k}")',
    "export TOKEN={k}\n",
    '{{"token": "{k}", "n": 1}}',
    "token:\n  value: '{k}'\n",
    "`{k}`",
    "({k})",
    "{k}",
]

# Text that looks a little like a secret and must come back unchanged.
NEAR_MISSES = [
    "pip install scikit-learn; import sklearn as sk-learn",
    "use sk-123 for the demo, then sk-abc-def",
    "the task-ant colony and my desk-antique-lamp-restoration-project-notes-2024",
    "ask-ant-api03-is-not-a-key because it starts with ask",
    "git sha 3f786850e387550fdab836ed7e6dc881de23001b and sha256 " + "ab" * 32,
    "request id 123e4567-e89b-12d3-a456-426614174000",
    "img = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='",
    "the bearer of bad news; Bearer tokens are explained in RFC 6750",
    "curl -H 'Authorization: Bearer $TOKEN' https://example.org",
    'headers = {"Authorization": f"Bearer {api_key}"}',
    "Authorization: Bearer <token>",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBa\n-----END CERTIFICATE-----",
    "AKIA is the prefix of AWS access key ids; AKIAshort and AKIA12345",
    "ghp_short and gho_ and github_pat_ are prefixes",
    "aws_secret_access_key = <your secret here>",
    "the secret of the sk- prefix is that Anthropic keys start with sk-ant-",
    "sk-" + "a" * 40,  # letters only: not the legacy shape
    "xsk-" + _r(48) + " is glued to a word",
    "def parse_task(task_id): return f'task-{task_id}'",
    "PRIVATE KEY handling is described in docs/keys.md",
    "日本語のテキスト sk-ant と ghp_ のような接頭辞",
    # issue 41's shapes, where they hold no secret
    "{'auth': 'required', 'auths': {}}",
    "requests.get(url, auth=(user, password)) and auth=None",
    "{'x-api-key': os.environ['API_KEY']}",
    "headers = {'X-Api-Key': settings.API_KEY}",
    "the api-key header: send api-key rotation notices",
    "the login page asks for a password; machine learning password strength",
    "In machine learning, a password is never a feature",
]


@pytest.mark.parametrize("kind, key", KEYS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(KEYS)])
@pytest.mark.parametrize("context", CONTEXTS)
def test_each_key_in_each_context_is_replaced_and_nothing_else_changes(
    kind: str, key: str, context: str
) -> None:
    text = context.format(k=key)
    out = redact_text(text)
    assert out == context.format(k=f"[REDACTED:{kind}]")


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_come_back_as_the_same_object(text: str) -> None:
    assert redact_text(text) is text


@pytest.mark.parametrize(
    "text, want",
    [
        (f"aws_secret_access_key = {AWS_SECRET}", "aws_secret_access_key = [REDACTED:aws-secret-key]"),
        (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n", "AWS_SECRET_ACCESS_KEY=[REDACTED:aws-secret-key]\n"),
        (f'{{"SecretAccessKey": "{AWS_SECRET}"}}', '{"SecretAccessKey": "[REDACTED:aws-secret-key]"}'),
        (f"aws_secret_key: '{AWS_SECRET}'", "aws_secret_key: '[REDACTED:aws-secret-key]'"),
        (f"Authorization: Bearer {BEARER}\r\n", "Authorization: Bearer [REDACTED:bearer-token]\r\n"),
        (
            f"curl -H 'authorization: bearer {BEARER}' url",
            "curl -H 'authorization: bearer [REDACTED:bearer-token]' url",
        ),
        (f'{{"Authorization": "Bearer {BEARER}"}}', '{"Authorization": "Bearer [REDACTED:bearer-token]"}'),
    ],
)
def test_labelled_secrets_keep_their_label(text: str, want: str) -> None:
    assert redact_text(text) == want


# Source code the agent reads names secrets without holding them; it must reach the log as it is.
CODE_THAT_NAMES_A_SECRET = [
    "self.token = token",
    "self.api_token = api_token",
    "token = get_token()",
    'password = os.environ["DB_PASSWORD"]',
    "password = os.environ.get('DB_PASSWORD')",
    'access_token = response.json()["access_token"]',
    "secret_key = settings.SECRET_KEY",
    "token: Optional[str] = None",
    "client(api_key=api_key, token=self.token)",
    "password = new_password",
    '{"token": null}',
]


@pytest.mark.parametrize("text", CODE_THAT_NAMES_A_SECRET)
def test_code_that_names_a_secret_is_kept_in_text_and_in_log_lines(text: str) -> None:
    redactor = Redactor({})
    assert redactor.text(text) is text
    entry = {"type": "message", "content": f"def connect():\n    {text}\n"}
    line = orjson.dumps(entry) + b"\n"
    assert redactor.line(entry, line) == line
    assert redactor.total == 0


@pytest.mark.parametrize(
    "text",
    [
        "PASSWORD=supersecret",  # a word, not a variable name
        "password=letmein123",
        'token = "get_token()"',  # quoted: a value, whatever it looks like
        "password: 'settings.SECRET'",
        "token = f(Hunter2Hunter2)",  # a digit: not code to spare
        "token = abc(def123",
        "api_key=my.pass.w0rd",
        "PASSWORD=SECRETPASS",
        "secret=mysecret",
        "DB_PASSWORD=Xy(z",
    ],
)
def test_values_that_only_look_a_little_like_code_are_still_redacted(text: str) -> None:
    out = redact_text(text)
    name = text.split("=")[0] if "=" in text else text.split(":")[0]
    assert out.startswith(name) and out.count("[REDACTED:assigned-secret]") == 1
    assert out.rstrip("\"')").endswith("[REDACTED:assigned-secret]")  # the whole value went


def test_a_spared_name_does_not_hide_a_secret_after_it() -> None:
    text = "token = get_token(); password = Hunter2Hunter2"
    assert redact_text(text) == "token = get_token(); password = [REDACTED:assigned-secret]"


def test_a_private_key_cut_before_its_end_is_still_redacted() -> None:
    pem = _pem("RSA PRIVATE KEY")
    cut = pem[: pem.index("\n-----END")] + "\n[… preview ends here …]"
    out = redact_text("start\n" + cut)
    assert out == "start\n[REDACTED:private-key]\n[… preview ends here …]"


def test_an_unfinished_key_does_not_swallow_text_up_to_a_later_key() -> None:
    pem = _pem("RSA PRIVATE KEY")
    head = pem[: pem.index("\n", 40)]
    text = f"{head}\n\nSome prose (in between) stays.\n{_pem('EC PRIVATE KEY')}\nend"
    assert (
        redact_text(text)
        == "[REDACTED:private-key]\n\nSome prose (in between) stays.\n[REDACTED:private-key]\nend"
    )


def test_environment_keys_are_redacted_whatever_their_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "proxy-key-for-my-gateway-42")
    monkeypatch.setenv("OPENAI_API_KEY", "short")  # a placeholder: too short to redact safely
    text = "key proxy-key-for-my-gateway-42 twice: proxy-key-for-my-gateway-42; short stays short"
    r = Redactor()
    assert (
        r.text(text)
        == "key [REDACTED:ANTHROPIC_API_KEY] twice: [REDACTED:ANTHROPIC_API_KEY]; short stays short"
    )
    assert r.counts == {"ANTHROPIC_API_KEY": 2}
    assert r.may_contain(b'{"content":"proxy-key-for-my-gateway-42"}')


def test_values_are_redacted_deep_and_other_types_kept() -> None:
    key = KEYS[0][1]
    value = {"a": [key, {"b": key, key: 1}], "n": 1.5, "ok": True, "none": None}
    assert redact_value(value) == {
        "a": ["[REDACTED:anthropic]", {"b": "[REDACTED:anthropic]", "[REDACTED:anthropic]": 1}],
        "n": 1.5,
        "ok": True,
        "none": None,
    }


def test_every_pattern_has_a_trigger_in_its_own_corpus_keys() -> None:
    # The pre-check skips a pattern whose triggers are absent: each kind must be reachable.
    kinds = {p.kind for p in PATTERNS}
    # The kinds found by a label (or keeping their prefix) are tested in test_trust_secrets.py.
    labelled = {
        "aws-secret-key",
        "bearer-token",
        "url-password",
        "assigned-secret",
        "authorization",
        "docker-auth",
        "api-key",
        "basic-auth",
        "netrc-password",
    }
    labelled |= {
        "cli-password",
        "password",
        "twilio",
        "discord",
        "slack-webhook",
        "discord-webhook",
        "azure-key",
        "telegram",
    }
    assert kinds == {k for k, _ in KEYS} | labelled
    for kind, key in KEYS:
        assert any(t in key for p in PATTERNS if p.kind == kind for t in p.triggers), kind


# --- properties ---------------------------------------------------------------------------------------

_words = st.text(alphabet=string.ascii_letters + string.digits + " .,:;-_=/+\n'\"(){}", max_size=60)


@settings(max_examples=300, deadline=None)
@given(st.lists(_words, max_size=6), st.sampled_from(KEYS))
def test_a_key_between_arbitrary_text_never_survives(pieces: list[str], kind_key: tuple[str, str]) -> None:
    kind, key = kind_key
    text = " ".join([*pieces[:3], key, *pieces[3:]])
    out = redact_text(text)
    assert key not in out
    assert f"[REDACTED:{kind}]" in out


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_redaction_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="sSEAGPHg"), max_size=300))
def test_text_without_any_trigger_letter_is_untouched(text: str) -> None:
    # Every trigger contains one of these letters, so none can be present.
    assert redact_text(text) is text


def _every_pattern_where_its_trigger_is(text: str) -> str:
    """The reference: each regex over the whole text whenever one of its triggers is in it."""
    counts: Counter[str] = Counter()
    for pattern in PATTERNS:
        if any(t in text for t in pattern.triggers):
            text = pattern.sub(text, counts)
    return text


_near_keywords = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "password",
                "PASSWORD",
                "Password",
                "passwd",
                "PASSWD",
                "secret",
                "SECRET",
                "Secret",
                "token",
                "TOKEN",
                "Token",
                "api_key",
                "apikey",
                "API_KEY",
                "APIKEY",
                "private_key",
                "PRIVATE_KEY",
                "_key",
                "_KEY",
                "aws_secret_access_key",
                "SecretAccessKey",
                "AWS_SECRET_ACCESS_KEY",
                "secret_key",
                "sEcReT",
            ]
        ),
        st.sampled_from(
            ['"', "'", " ", "é", "猫", "\t", "\t\t", "=", ":", " = ", '": "', "\\", "\n", "ord", "d"]
        ),
        st.sampled_from(["://", "https://", "://u:", "u:p@h", "@", "/", "<", "Authorization: Bearer "]),
        st.text(alphabet=string.ascii_letters + string.digits + "/+_-$<{[", min_size=1, max_size=44),
    ),
    max_size=12,
)


@settings(max_examples=400, deadline=None)
@given(_near_keywords)
def test_the_after_gates_skip_only_texts_the_regex_cannot_match(pieces: list[str]) -> None:
    """A pattern's ``after`` gate (what must follow its trigger) must never hide a match of its regex."""
    text = "".join(pieces)
    assert Redactor({}).text(text) == _every_pattern_where_its_trigger_is(text)


_control = st.sampled_from(["\x01", "\x08", "\x1f", "\u2028", "\u00a0", "é", "://", "://u", "://u:p@h", "@x"])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_near_keywords.map("".join), _control), max_size=6), st.booleans())
def test_the_line_gates_never_skip_a_line_the_walk_would_change(pieces: list[str], as_key: bool) -> None:
    """``after_line`` (the gate on an encoded line) must let through every line the walk redacts."""
    text = "".join(pieces)
    entry = {"type": "message", "content": text, **({text: "x"} if as_key else {})}
    line = orjson.dumps(entry) + b"\n"
    walked_always = Redactor({})
    real = redact_module._line_gated
    try:
        redact_module._line_gated = lambda data: True  # every line with a trigger is walked
        expected = walked_always.line(entry, line)
    finally:
        redact_module._line_gated = real
    assert Redactor({}).line(entry, line) == expected


# Pieces of triggers that overlap each other or themselves: "sk-ant-" holds "sk-", "_keyJ"
# holds "_key" and "eyJ", "xoxox" holds "xox" twice, "AKIAIza" ends one where another begins.
_overlapping_pieces = st.lists(
    st.one_of(
        st.sampled_from(list(redact_module._TRIGGERS)),
        st.sampled_from(
            ["s", "k", "-", "ant", "_", "e", "y", "J", "x", "o", "A", "I", "za", "ghp", "ithub_pat", "猫"]
        ),
    ),
    max_size=16,
)


@settings(max_examples=500, deadline=None)
@given(_overlapping_pieces)
def test_leftmost_first_matches_plus_overlap_windows_find_every_trigger(pieces: list[str]) -> None:
    """``_occurrences`` (fast leftmost-first matching) finds what an overlapping search finds."""
    text = "".join(pieces)
    words = redact_module._TRIGGERS
    for data, automaton in (
        (text, ahocorasick_rs.AhoCorasick(list(words))),
        (text.encode(), ahocorasick_rs.BytesAhoCorasick([w.encode() for w in words])),
    ):
        expected = sorted(automaton.find_matches_as_indexes(data, overlapping=True))
        assert sorted(redact_module._occurrences(data)) == expected


@settings(max_examples=500, deadline=None)
@given(st.lists(st.text(alphabet="abk-", min_size=1, max_size=6), max_size=10, unique=True))
def test_the_overlappers_are_the_words_another_can_start_inside(words: list[str]) -> None:
    """``overlappers`` (worked out through prefix sets, issue 47) is the pairwise definition."""
    from pseudoclaude_nb.redact.triggers import overlappers

    def pairwise(words: tuple[str, ...]) -> frozenset[int]:
        return frozenset(
            i
            for i, a in enumerate(words)
            for b in words
            if (b != a and (a.startswith(b) or b.startswith(a)))
            or any(b.startswith(a[k:]) or a[k:].startswith(b) for k in range(1, len(a)))
        )

    for case in (tuple(words), redact_module._TRIGGERS):
        assert overlappers(case) == pairwise(case)


def test_a_common_trigger_word_without_an_assignment_skips_the_regex(monkeypatch) -> None:
    text = "the tokenizer counts tokens; a secret plan; " * 50
    ran: list[str] = []

    class Spy:
        def __init__(self, pattern):
            self.pattern = pattern

        def __getattr__(self, name):
            return getattr(self.pattern, name)

        def sub(self, text, counts, starts=None):
            ran.append(self.pattern.kind)
            return self.pattern.sub(text, counts, starts)

    monkeypatch.setattr(redact_module, "PATTERNS", tuple(Spy(p) for p in PATTERNS))
    assert Redactor({}).text(text) is text and ran == []
    assert Redactor({}).text(text + " token=abcd1234efgh") != text and ran == ["assigned-secret"]


def test_a_lone_surrogate_is_still_checked_for_triggers() -> None:
    text = "\ud800 password=hunter2hunter2"
    assert "hunter2" not in Redactor({}).text(text)


# --- on disk: the writer, spill files, a real run -------------------------------------------------------


def _conversation_with_secrets(conv: Conversation, key: str, token: str) -> None:
    conv.add_user(f"my key is {key}")
    conv.add_assistant_tool_calls(
        "checking", [ToolCall(id="c1", name="bash", arguments={"command": f"gh auth {token}"})]
    )
    conv.add_tool_result("c1", f"logged in with {token}")
    conv.add_assistant("done")


def test_the_writer_redacts_appends_replaces_and_notes(workspace: Path) -> None:
    key, token = KEYS[0][1], KEYS[5][1]
    sdir = new_session_dir(workspace)
    with SessionWriter(sdir, model="m") as w:
        conv = Conversation()
        w.attach(conv)
        _conversation_with_secrets(conv, key, token)
        conv.replace("edit", [Message(role="user", content=f"summary mentions {key}")] + conv.messages()[1:])
        w.record(NoteEntry.new(f"note with {token}"))
        in_memory = conv.messages()
    raw = (sdir / "conversation.jsonl").read_bytes()
    assert key.encode() not in raw and token.encode() not in raw
    assert raw.count(b"[REDACTED:anthropic]") == 2 and raw.count(b"[REDACTED:github]") == 5
    loaded = load_session(sdir)
    assert [m.id for m in loaded.messages] == [m.id for m in in_memory]
    assert loaded.messages[0].content == "summary mentions [REDACTED:anthropic]"
    assert loaded.messages[1].tool_calls[0].arguments == {"command": "gh auth [REDACTED:github]"}
    assert in_memory[0].content == f"summary mentions {key}"  # memory keeps the text; only disk is redacted
    assert not loaded.problems()


def test_the_writer_without_redaction_keeps_secrets(workspace: Path) -> None:
    key, token = KEYS[0][1], KEYS[5][1]
    sdir = new_session_dir(workspace)
    with SessionWriter(sdir, redact=False) as w:
        conv = Conversation()
        w.attach(conv)
        _conversation_with_secrets(conv, key, token)
    raw = (sdir / "conversation.jsonl").read_bytes()
    assert key.encode() in raw and token.encode() in raw


def test_clean_entries_are_written_byte_for_byte_as_without_redaction(workspace: Path) -> None:
    messages = [
        Message(role="user", content="task-ant colony: see sk-learn docs ☕"),
        Message(role="assistant", content="a secret plan, with a bearer of news"),
    ]
    logs = []
    for redact in (True, False):
        sdir = new_session_dir(workspace)
        with SessionWriter(sdir, model="m", redact=redact) as w:
            conv = Conversation()
            w.attach(conv)
            for m in messages:
                conv.append(m)
        logs.append((sdir / "conversation.jsonl").read_bytes())
    assert logs[0] == logs[1]


def test_spill_files_hold_the_redacted_text_and_describe_it(workspace: Path) -> None:
    key = KEYS[2][1]
    sdir = new_session_dir(workspace)
    text = "line\n" * 100 + f"OPENAI_API_KEY={key}\n"
    spill = write_spill(sdir, "call_9", "bash", text)
    on_disk = (sdir / spill.path).read_bytes()
    assert key.encode() not in on_disk and b"OPENAI_API_KEY=[REDACTED:openai]\n" in on_disk
    assert spill.bytes == len(on_disk) and spill.sha256 == hashlib.sha256(on_disk).hexdigest()
    assert write_spill(sdir, "call_9", "bash", text) == spill  # same text: the same file is reused
    raw = write_spill(sdir, "call_10", "bash", text, redact=False)
    assert key.encode() in (sdir / raw.path).read_bytes()


def test_a_real_run_leaves_no_secret_anywhere_on_disk(workspace: Path, tmp_path: Path, monkeypatch) -> None:
    env_key = "gateway-" + _r(30)
    monkeypatch.setenv("ANTHROPIC_API_KEY", env_key)
    aws = KEYS[10][1]
    (workspace / "creds.txt").write_text(f"aws_access_key_id = {aws}\nkey = {env_key}\n" + "pad\n" * 3000)
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            script(
                turn(
                    "Reading.", ("read_file", {"path": "creds.txt"}), ("bash", {"command": f"echo {env_key}"})
                ),
                turn(f"The id is {aws}."),
            )
        )
    )
    settings_ = PseudoClaude(
        workspace=str(workspace),
        provider="scripted",
        script=str(path),
        permission_mode="auto",
        spill_bytes=5_000,
    )
    agent = Agent(settings_)
    try:
        summary = agent.run(f"read creds.txt; my key is {env_key}")
        assert summary.status == "done", summary.error
        assert len(load_session(agent.session.dir).spills) == 1  # the big read was spilled
    finally:
        agent.close()
    state = workspace / ".pseudoclaude"
    files = [p for p in state.rglob("*") if p.is_file()]
    assert any(p.parent.name == "tool-results" for p in files)
    for p in files:
        data = p.read_bytes()
        assert env_key.encode() not in data and aws.encode() not in data, p
