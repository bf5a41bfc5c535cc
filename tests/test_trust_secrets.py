"""Workspace trust, secrets (findings 7 and 8): redaction before every cut, and the common kinds.

A key pasted into a long cell is redacted before the cell is capped (the activity block,
``read_cells``, the request); the kinds found only by their label or context (an AWS secret
next to its id, ``mysql -p…``, ``curl -u``, a webhook, "my password is …") are redacted; a
token glued after ``-``/``_`` is still a token. Hashes, UUIDs and image data stay as they are.
"""

from __future__ import annotations

import json
import random
import string

import pytest

from pseudoclaude_nb.notebook import BoundedText, CellRecord, render_activity
from pseudoclaude_nb.notebook.record import cap
from pseudoclaude_nb.redact import Redactor, redact_text

_rng = random.Random(7)
ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"


def _r(n: int, alphabet: str = ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def _service_account() -> tuple[str, list[str]]:
    """A GCP service-account JSON (fake) and its 26 base64 key lines."""
    lines = [_r(64, B64) for _ in range(25)] + [_r(24, B64) + "=="]
    key = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(lines) + "\n-----END PRIVATE KEY-----\n"
    doc = {"type": "service_account", "project_id": "demo", "private_key_id": _r(40, HEX), "private_key": key}
    return json.dumps(doc, indent=2), lines


# --- finding 7: redaction before any cut -----------------------------------------------------------


def test_a_key_pasted_after_30_lines_never_reaches_the_activity_block() -> None:
    doc, lines = _service_account()
    source = "\n".join(f"x{i} = compute({i})  # an ordinary line of the analysis" for i in range(30))
    source += f"\ncreds = {doc!r}\n"
    record = CellRecord.make(1, 1, source, stdout=doc)
    block = render_activity([record]).text
    for text in (record.source, record.stdout, record.render(limit=2_500), block):
        for line in lines:
            assert line[:16] not in text and line[-16:] not in text
    assert len(source) > 2_000  # the cut (head 1,333, tail 667) would fall inside the key


@pytest.mark.parametrize("at", [0, 500, 1_300, 1_330, 1_340, 2_000, 5_000])
def test_cap_redacts_before_it_cuts_wherever_the_key_falls(at: int) -> None:
    doc, lines = _service_account()
    text = "a" * at + doc + "b" * 3_000
    out = cap(text, 2_000)
    assert all(line[:16] not in out and line[-16:] not in out for line in lines)


def test_a_printed_key_cut_by_the_bounded_output_is_redacted_first() -> None:
    token = "ghp_" + _r(36)
    for at in range(1_980, 2_010):
        sink = BoundedText(2_000, 1_000)
        sink.write("p" * at + " " + token + "\n" + "q" * 9_000)
        out = sink.value()
        assert token[:12] not in out and token[-12:] not in out, at
    secret = _r(40, B64)
    for after in range(1_000 - 70, 1_000 - 35):  # the tail's cut falls in the label, before the value
        sink = BoundedText(2_000, 1_000)
        sink.write("q" * 9_000 + f"\nAWS_SECRET_ACCESS_KEY={secret}\n" + "r" * after)
        out = sink.value()
        assert secret[:12] not in out and secret[-12:] not in out, after


def test_an_error_message_is_redacted_before_it_is_capped() -> None:
    from pseudoclaude_nb.notebook import error_info

    token = "glpat-" + _r(20)
    info = error_info(ValueError("x" * 494 + " " + token))
    assert token[:10] not in info.message


# --- finding 8: the kinds found by context, and glued tokens --------------------------------------

AWS_ID, AWS_SECRET = "AKIA" + _r(16, string.ascii_uppercase + string.digits), "wJ" + _r(36, B64) + "9k"
TWILIO_SID, TWILIO_TOKEN = "AC" + _r(32, HEX), _r(32, HEX)
CONTEXT_KINDS = [
    ("aws-secret-key", f"{AWS_ID} {AWS_SECRET}", AWS_SECRET),
    ("aws-secret-key", f"Access key ID,Secret access key\n{AWS_ID},{AWS_SECRET}\n", AWS_SECRET),
    ("aws-secret-key", f'creds = ("{AWS_ID}", "{AWS_SECRET}")', AWS_SECRET),
    ("aws-secret-key", f"[default]\naws_secret_access_key={AWS_SECRET}", AWS_SECRET),
    ("slack-webhook", "https://hooks.slack.com/services/T0ABC1234/B0DEF5678/" + _r(24), None),
    ("discord-webhook", f"https://discord.com/api/webhooks/1234567890123456789/{_r(68, ALNUM + '_-')}", None),
    ("azure-key", f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={_r(86, B64)}==;", None),
    ("pypi", "twine upload -u __token__ -p pypi-AgEIcHlwaS5vcmc" + _r(70, ALNUM + "_-") + " dist/*", None),
    ("huggingface", "huggingface-cli login --token hf_" + _r(34, string.ascii_letters), None),
    ("twilio", f"client = Client('{TWILIO_SID}', '{TWILIO_TOKEN}')", TWILIO_TOKEN),
    ("cli-password", "mysql -h db -u root -pS3cr3tPassw0rd app", "S3cr3tPassw0rd"),
    ("cli-password", "pg_dump --password=Tr1cky!Pass app", "Tr1cky!Pass"),
    ("authorization", "curl -H 'Authorization: Basic " + _r(24, B64) + "==' https://x", None),
    ("authorization", "Authorization: Bot " + _r(24) + "." + _r(6) + "." + _r(38), None),
    ("docker-auth", '{"auths": {"ghcr.io": {"auth": "' + _r(40, B64) + '"}}}', None),
    ("url-password", "curl -u deploy:Zk8" + _r(13) + " https://api.example.com", None),
    ("password", "by the way my password is hunter2!! so use that", "hunter2!!"),
    ("assigned-secret", "db password: c0rrect-h0rse", "c0rrect-h0rse"),
    ("telegram", "bot = Bot('1234567890:AA" + _r(33, ALNUM + "_-") + "')", None),
    ("discord", "bot.run('MTA" + _r(23) + "." + _r(6) + "." + _r(38) + "')", None),
]


@pytest.mark.parametrize(("kind", "text", "secret"), CONTEXT_KINDS, ids=[k for k, _, _ in CONTEXT_KINDS])
def test_kinds_found_by_their_context_are_redacted(kind: str, text: str, secret: str | None) -> None:
    out = redact_text(text)
    assert f"[REDACTED:{kind}]" in out, out
    if secret is not None:
        assert secret not in out
    entry = {"content": text}
    line = Redactor().line(entry, json.dumps(entry).encode() + b"\n")
    assert json.loads(line)["content"] == out


@pytest.mark.parametrize("glue", ["api-", "key_", "TOKEN_", "x-"])
@pytest.mark.parametrize(
    "token",
    ["sk_live_" + _r(24), "ghp_" + _r(36), "xoxb-" + _r(12, "0123456789") + "-" + _r(24), "glpat-" + _r(20)],
)
def test_a_token_glued_after_a_dash_or_underscore_is_still_redacted(glue: str, token: str) -> None:
    assert token not in redact_text(f"value {glue}{token} end")


def test_a_value_split_across_two_outputs_is_a_known_limit() -> None:
    # Documented in the README: each output is redacted on its own; half a token is no token.
    token = "ghp_" + _r(36)
    halves = [redact_text(token[:20]), redact_text(token[20:])]
    assert halves == [token[:20], token[20:]]


def test_the_pre_check_stays_on_its_fast_path() -> None:
    # The automaton's SIMD search takes at most 64 literals; a 2-character literal or one led by
    # a quote (JSON lines are full of them) makes every clean line pay ~2-3x (redact.rules).
    from pseudoclaude_nb.redact import _TRIGGERS

    assert len(_TRIGGERS) <= 64
    assert all(len(t) >= 3 and t[0] not in "\"'" for t in _TRIGGERS if t != '"auth')


# --- false positives: ordinary text comes back as the very same object ----------------------------

ORDINARY = [
    "commit 4b825dc642cb6eb9a60e54bf8d69288fbee4904\nAuthor: A <a@b.c>\n",
    "sha256:" + "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" + " layer pulled",
    "run 123e4567-e89b-12d3-a456-426614174000 finished; request 9f1c2b3a-0d4e-4f5a-8b6c-7d8e9f0a1b2c",
    "data:image/png;base64," + "iVBORw0KGgoAAAANSUhEUgAA" + _r(4_000, B64) + "==",
    "MD5 (file) = d41d8cd98f00b204e9800998ecf8427e; SKU 12345; ACME Corp; OK key-value store",
    "the password is required; your password is too short; PASSWORD is set in the vault",
    "def load(model_id: str, hf_hub_download=None):\n    return AutoModel.from_pretrained(model_id)",
    "df.groupby('region').agg(total=('sales', 'sum')).sort_values('total')\nprint(df.head())",
    "mysql -h db -u root -p app  # asks for the password",
    "curl -u $USER:$PASS https://example.org; curl -u user https://x",
    "TASK SKIPPED; ACCEPTED; NTP MDNS ODBC; Mjölnir; NTLM MTU",
    "AKIAIOSFODNN7EXAMPL is short, and git SHA 3f786850e387550fdab836ed7e6dc881de23001b",
]


@pytest.mark.parametrize("text", ORDINARY, ids=range(len(ORDINARY)))
def test_hashes_uuids_image_data_and_code_stay_as_they_are(text: str) -> None:
    assert redact_text(text) is text


# --- finding 7 end to end: the cell, the request, the log, the index, every byte on disk ----------


def test_a_service_account_pasted_into_a_long_cell_reaches_no_request_and_no_disk(ip, workspace) -> None:
    import os
    from pathlib import Path

    from IPython.utils.capture import capture_output

    from pseudoclaude_nb.magics import current_agent
    from tests.scripts import script, turn
    from tests.test_secrets_corpus import assert_nowhere

    doc, lines = _service_account()
    ordinary = "\n".join(f"x{i} = {i} * 2  # an ordinary line of the analysis" for i in range(30))
    with capture_output():
        ip.run_cell(f"{ordinary}\ncreds = {doc!r}\nprint(creds)", store_history=True)
    path = workspace / "s.json"
    path.write_text(json.dumps(script(turn("noted"))), encoding="utf-8")
    with capture_output():
        ip.run_line_magic("agent", f"--provider scripted --script {path} what is in my last cell?")
    agent = current_agent(ip)
    sent = agent.last_runner.last_request.messages[0].content
    assert "<notebook-activity>" in sent and "[REDACTED:private-key]" in sent
    assert all(line[:16] not in sent and line[-16:] not in sent for line in lines)
    agent.history.search("ordinary")  # the index is built and queried
    path.unlink()
    assert assert_nowhere(lines, workspace, Path(os.environ["PSEUDOCLAUDE_HOME"])) > 1


def test_a_long_line_read_from_a_file_is_redacted_before_it_is_cut(workspace) -> None:
    from pseudoclaude_nb.tools.files import ReadFileArgs, read_file

    token = "glpat-" + _r(24)
    doc, lines = _service_account()
    minified = " " * 900 + json.dumps(
        json.loads(doc)
    )  # one line of ~2,760 characters: the key crosses the cut
    (workspace / "creds.json").write_text(
        "p" * 1_990 + " " + token + "\n" + minified + "\n", encoding="utf-8"
    )
    out = read_file(workspace, ReadFileArgs(path="creds.json"))
    assert token[:12] not in out and token[-12:] not in out
    assert all(line[:16] not in out and line[-16:] not in out for line in lines)


@pytest.mark.parametrize("where", ["grep", "tool-str", "tool-repr", "run-python"])
def test_a_key_across_every_other_cut_is_redacted_first(workspace, where: str) -> None:
    """grep's 500-character line, a @tool's str and repr caps, run_python's value cap: each
    place that cuts redacts first, so a token crossing the cut leaves no recognisable half."""
    from pseudoclaude_nb.redact import redacted_head

    token = "glpat-" + _r(24)

    def across(limit: int) -> str:
        return "p" * (limit - 10) + " " + token + " tail"  # the cut falls inside the token

    if where == "grep":
        from pseudoclaude_nb.tools.search import MAX_GREP_LINE_CHARS, GrepArgs, grep

        (workspace / "notes.txt").write_text(across(MAX_GREP_LINE_CHARS) + "\n", encoding="utf-8")
        out = grep(workspace, GrepArgs(pattern="ppp"))
    elif where == "tool-str":
        from pseudoclaude_nb.tools.user import RESULT_CAP, make_user_tool

        def big() -> str:
            """Returns a lot."""
            return across(RESULT_CAP)

        made = make_user_tool(big).as_tool()
        out = made.handler(made.args())
    elif where == "tool-repr":
        from pseudoclaude_nb.tools.user import bounded_repr

        out = bounded_repr([across(200)], 200)
    else:
        from pseudoclaude_nb.magics.python_exec import VALUE_CAP

        out = redacted_head(repr(across(VALUE_CAP)), VALUE_CAP)
    assert "glpat" not in out and token[-8:] not in out
    # Without redaction first, the head would keep the token's start: the test can fail.
    assert "glpat-" + token[6:9] in across(200)[:200]
