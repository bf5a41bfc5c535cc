"""A corpus of realistic FAKE secrets, placed everywhere a session writes, then every byte on disk searched.

Places: the prompt, the model's thinking, tool-call arguments (as JSON keys and as values,
split label/value), tool outputs (whole, spilled, and cut by the bounded buffer at every
offset around a secret), memory topic names and bodies, the history index, and an export
(its members unpacked). The notebook activity block: tests/test_trust_secrets.py.
"""

from __future__ import annotations

import json
import random
import string
import zipfile
from pathlib import Path

import pytest

from pseudoclaude_nb.memory.manager import MemoryManager
from pseudoclaude_nb.memory.store import user_memory_dir
from pseudoclaude_nb.redact import Redactor, redact_text, set_extra_patterns
from pseudoclaude_nb.session.archive import export_session
from pseudoclaude_nb.tools.shell import OutputBuffer
from tests.scripts import script, scripted_agent, turn

_rng = random.Random(19)
ALNUM = string.ascii_letters + string.digits


def _r(n: int, alphabet: str = ALNUM) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


# (kind, how it appears in text, the secret part that must never reach disk): 40 common kinds.
def _corpus() -> list[tuple[str, str, str]]:
    hexa, b64, upper = "0123456789abcdef", ALNUM + "+/", string.ascii_uppercase + string.digits
    slack = f"xoxb-{_r(12, string.digits)}-{_r(13, string.digits)}-{_r(24)}"
    slack_user = f"xoxp-{_r(12, string.digits)}-{_r(12, string.digits)}-{_r(32)}"
    google = "AIza" + _r(35, ALNUM + "_-")
    stripe = "sk_live_" + _r(24)
    restricted = "rk_live_" + _r(24)
    jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIx" + _r(20) + "." + _r(43, ALNUM + "_-")
    db_pass = "Pg" + _r(14)
    env_pass = "Db" + _r(16)
    env_secret = "Se" + _r(30)
    env_token = "Tk" + _r(28)
    aws = _r(40, ALNUM + "/+")
    bearer = _r(40, ALNUM + "._-")
    github = "ghp_" + _r(36)
    aws_id, aws_bare = "AKIA" + _r(16, upper), "wJ" + _r(36, b64) + "9k"
    pem = "\n".join(_r(64, b64) for _ in range(8))
    twilio_token, api_secret, basic = _r(32, hexa), _r(32), _r(28, b64) + "=="
    mysql_pw, curl_pw, prose_pw, mongo_pw = "My" + _r(12), "Cu" + _r(12), "Hu" + _r(10) + "!", "Mo" + _r(14)
    hook, discord_hook = _r(24), _r(68, ALNUM + "_-")
    azure, telegram, docker = _r(86, b64) + "==", _r(33, ALNUM + "_-"), _r(40, b64)
    tokens = {
        "anthropic": "sk-ant-api03-" + _r(93, ALNUM + "_-") + "AA",
        "openai": "sk-proj-" + _r(74, ALNUM + "_-") + "T3BlbkFJ" + _r(74, ALNUM + "_-"),
        "github-oauth": "gho_" + _r(36),
        "github-fine-grained": "github_pat_" + _r(22) + "_" + _r(59),
        "gitlab": "glpat-" + _r(20, ALNUM + "_-"),
        "gitlab-deploy": "gldt-" + _r(20, ALNUM + "_-"),
        "gitlab-runner": "glrt-" + _r(20, ALNUM + "_-"),
        "gitlab-trigger": "glptt-" + _r(40, hexa),
        "pypi": "pypi-AgEIcHlwaS5vcmc" + _r(70, ALNUM + "_-"),
        "huggingface": "hf_" + _r(34, string.ascii_letters),
        "sendgrid": "SG." + _r(22, ALNUM + "_-") + "." + _r(43, ALNUM + "_-"),
        "digitalocean": "dop_v1_" + _r(64, hexa),
        "digitalocean-oauth": "doo_v1_" + _r(64, hexa),
        "mailgun": "key-" + _r(32, hexa),
        "npm": "npm_" + _r(36),
        "shopify": "shpat_" + _r(32, hexa),
        "square": "EAAA" + _r(60, ALNUM + "_-"),
        "heroku": "HRKU-AA" + _r(58, ALNUM + "_-"),
        "new-relic": "NRAK-" + _r(27, upper),
        "atlassian": "ATATT3xFfGF0" + _r(180, ALNUM + "_-"),
        "linear": "lin_api_" + _r(40),
        "databricks": "dapi" + _r(32, hexa),
    }
    discord = "MTA" + _r(23) + "." + _r(6, ALNUM + "_-") + "." + _r(38, ALNUM + "_-")
    # issue 41: four everyday shapes that passed
    docker_repr, header_key, basic_pw, netrc_pw = _r(28, b64) + "==", _r(32), "Tr" + _r(12), "Nt" + _r(14)
    return [
        ("slack", slack, slack),
        ("slack", slack_user, slack_user),
        ("google-api-key", google, google),
        ("stripe", stripe, stripe),
        ("stripe", restricted, restricted),
        ("jwt", jwt, jwt),
        ("url-password", f"postgres://app_user:{db_pass}@db.internal:5432/app", db_pass),
        ("assigned-secret", f"DB_PASSWORD={env_pass}", env_pass),
        ("assigned-secret", f"SESSION_SECRET={env_secret}", env_secret),
        ("assigned-secret", f"GITLAB_TOKEN={env_token}", env_token),
        ("aws-secret-key", f"AWS_SECRET_ACCESS_KEY={aws}", aws),
        ("bearer-token", f"Authorization: Bearer {bearer}", bearer),
        ("github", github, github),
        # Kinds that leaked before (finding 8), and more of the common ones.
        *[(kind.split("-")[0] if kind.startswith(("github", "gitlab", "twilio", "digitalocean")) else kind, t, t)
          for kind, t in tokens.items()],
        ("private-key", f"-----BEGIN PRIVATE KEY-----\n{pem}\n-----END PRIVATE KEY-----", pem.split("\n")[3]),
        ("aws-secret-key", f"{aws_id},{aws_bare}", aws_bare),
        ("twilio", f"Client('AC{_r(32, hexa)}', '{twilio_token}')", twilio_token),
        ("twilio", f'Client("SK{_r(32, hexa)}", "{api_secret}", account_sid)', api_secret),
        ("discord", f'client.run("{discord}")', discord),
        ("slack-webhook", f"https://hooks.slack.com/services/T0{_r(8, upper)}/B0{_r(8, upper)}/{hook}", hook),
        ("discord-webhook", f"https://discord.com/api/webhooks/{_r(19, string.digits)}/{discord_hook}", discord_hook),
        ("azure-key", f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={azure};", azure),
        ("cli-password", f"mysql -u root -p{mysql_pw} shop", mysql_pw),
        ("url-password", f"curl -u admin:{curl_pw} https://api.example.com", curl_pw),
        ("authorization", f"Authorization: Basic {basic}", basic),
        ("docker-auth", '{"auths": {"ghcr.io": {"auth": "' + docker + '"}}}', docker),
        ("password", f"and my password is {prose_pw} for the admin page", prose_pw),
        ("url-password", f"mongodb+srv://svc:{mongo_pw}@cluster0.example.net/db", mongo_pw),
        ("telegram", f"{_r(10, string.digits)}:AA{telegram}", telegram),
        ("docker-auth", "{'auths': {'https://index.docker.io/v1/': {'auth': '" + docker_repr + "'}}}", docker_repr),
        ("api-key", "headers = {'x-api-key': '" + header_key + "'}", header_key),
        ("basic-auth", f"requests.get(url, auth=('alice', '{basic_pw}'))", basic_pw),
        ("netrc-password", f"machine api.example.com login bob password {netrc_pw}", netrc_pw),
    ]  # fmt: skip


CORPUS = _corpus()
KINDS = {kind for kind, _, _ in CORPUS}


def _of(kind: str) -> tuple[str, str, str]:
    return next(c for c in CORPUS if c[0] == kind)


def all_bytes(*roots: Path) -> list[tuple[Path, bytes]]:
    """Every file under ``roots``, and every member of every zip among them."""
    out = []
    for root in roots:
        for p in sorted(root.rglob("*")):
            if p.is_file() and not p.is_symlink():
                data = p.read_bytes()
                out.append((p, data))
                if zipfile.is_zipfile(p):
                    with zipfile.ZipFile(p) as zf:
                        out += [(p / name, zf.read(name)) for name in zf.namelist()]
    return out


def assert_nowhere(secrets: list[str], *roots: Path) -> int:
    files = all_bytes(*roots)
    for path, data in files:
        for secret in secrets:
            for probe in {secret, secret[:16], secret[-16:]}:
                assert probe.encode() not in data, f"{probe!r} reached {path}"
    return len(files)


def test_the_corpus_holds_the_common_kinds():
    assert len(CORPUS) >= 37 and len(KINDS) >= 30


@pytest.mark.parametrize(
    ("kind", "text", "secret"), CORPUS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(CORPUS)]
)
def test_each_secret_is_redacted_in_text_and_in_json(kind, text, secret):
    assert secret not in redact_text(text)
    assert f"[REDACTED:{kind}]" in redact_text(text)
    # As a JSON line, with the label as the key and the value as its value.
    label, sep, value = text.partition("=") if "=" in text else text.partition(": ")
    if sep and value == secret:
        entry = {"args": {label: value}}
        line = Redactor().line(entry, json.dumps(entry).encode() + b"\n")
        assert secret.encode() not in line and json.loads(line)


def test_cut_at_every_offset_around_a_secret_never_keeps_a_part(monkeypatch):
    head = tail = 300
    for _kind, text, secret in CORPUS:
        for at in range(head - len(text) - 5, head + 5):
            buf = OutputBuffer(head, tail, margin=256)
            buf.feed(("a" * at + " " + text + "\n" + "b" * 2000).encode())
            out = buf.text()
            assert secret[:12] not in out and secret[-12:] not in out, (text, at)
        for at in range(tail - 5, tail + len(text) + 5):
            buf = OutputBuffer(head, tail, margin=256)
            buf.feed(("a" * 2000 + "\n" + text + "\n" + "b" * at).encode())
            out = buf.text()
            assert secret[:12] not in out and secret[-12:] not in out, (text, at)


def test_a_session_full_of_secrets_leaves_none_on_disk(workspace: Path, agents, tmp_path):
    secrets = [s for _, _, s in CORPUS]
    everything = "\n".join(t for _, t, _ in CORPUS)
    (workspace / "secrets.env").write_text(everything + "\n", encoding="utf-8")
    (workspace / "big.txt").write_text((everything + "\n") * 400, encoding="utf-8")  # spilled
    args_with_secrets = {
        "command": "cat secrets.env",
        "headers": {"Authorization": f"Bearer {_of('bearer-token')[2]}"},
        "aws_secret_access_key": _of("aws-secret-key")[2],
        _of("slack")[1]: _of("google-api-key")[1],  # a secret as a JSON key, another as its value
        "env": [t for _, t, _ in CORPUS],
    }
    path = tmp_path / "secret-run.json"
    path.write_text(
        json.dumps(
            script(
                turn(f"I see {_of('stripe')[1]}", ("bash", args_with_secrets, "c_args")),
                {
                    **turn("reading", ("bash", {"command": "cat secrets.env"}, "c_small")),
                    "reasoning": everything,
                },
                turn("more", ("bash", {"command": "cat big.txt"}, "c_big")),
                turn(f"done; the token was {_of('jwt')[1]}"),
            )
        ),
        encoding="utf-8",
    )
    agent = scripted_agent(workspace)
    agents.append(agent)
    assert agent.run(f"here are my keys:\n{everything}", script=str(path)).status == "done"
    session = agent.session.dir
    logged = [json.loads(line) for line in (session / "conversation.jsonl").read_text().splitlines()]
    thought = [r["text"] for e in logged for r in e.get("reasoning") or ()]
    assert thought and all("[REDACTED:" in t for t in thought)  # the thinking channel was written
    assert any(p.name.endswith(".txt") for p in (session / "tool-results").iterdir())  # c_big spilled
    memory = MemoryManager(workspace, user_memory_dir())
    memory.add("project", f"deploy key {_of('github')[1]}", "the deploy token", "fact", everything)
    memory.add("user", f"slack {_of('slack')[1]}", "a slack bot", "reference", everything)
    agent.history.search("keys")  # the index is built and queried
    export_session(workspace, session.name, tmp_path / "export.zip")
    (workspace / "secrets.env").unlink()
    (workspace / "big.txt").unlink()
    checked = assert_nowhere(secrets, workspace, user_memory_dir().parent, tmp_path / "export.zip")
    assert checked > 8
    names = [p.name for p in (workspace / ".pseudoclaude" / "memory").iterdir()]
    assert any("redacted" in n for n in names)
    index = (workspace / ".pseudoclaude" / "memory" / "MEMORY.md").read_text()
    for n in names:
        if n != "MEMORY.md":
            assert f"({n})" in index  # the index links to the files that exist


def test_user_patterns_are_added_with_config(workspace, agents, tmp_path):
    try:
        agent = scripted_agent(workspace, redact_patterns=[r"ACME-[0-9]{8}"])
        agents.append(agent)
        path = tmp_path / "s.json"
        path.write_text(json.dumps(script(turn("ok"))), encoding="utf-8")
        agent.run("the badge is ACME-12345678", script=str(path))
        assert b"ACME-12345678" not in (agent.session.dir / "conversation.jsonl").read_bytes()
        assert b"[REDACTED:custom]" in (agent.session.dir / "conversation.jsonl").read_bytes()
    finally:
        set_extra_patterns([])
