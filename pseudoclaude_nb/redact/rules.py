"""Well-known token shapes: a literal prefix and what follows it (data for ``redact.patterns``).

Adapted from the rules of gitleaks (``config/gitleaks.toml`` at commit b58d3f1, 2026-07-22,
https://github.com/gitleaks/gitleaks), whose token shapes are maintained against the
providers' published formats. Only rules whose token begins with a fixed prefix are taken:
the prefix is the literal trigger that redaction's Aho-Corasick pre-check looks for, so a
rule costs nothing on a line without it. Rules that need a label or an entropy measure
(gitleaks' "generic" and keyword-gated rules) are not taken; labelled values are the
``assigned-secret`` pattern's job. Changes from gitleaks: Python syntax, the prefix first,
and lengths widened to ``{n,}`` where providers have lengthened tokens before.

gitleaks is under the MIT licence:

    Copyright (c) 2019 Zachary Rice

    Permission is hereby granted, free of charge, to any person obtaining a copy of this
    software and associated documentation files (the "Software"), to deal in the Software
    without restriction, including without limitation the rights to use, copy, modify,
    merge, publish, distribute, sublicense, and/or sell copies of the Software, and to
    permit persons to whom the Software is furnished to do so, subject to the following
    conditions:

    The above copyright notice and this permission notice shall be included in all copies
    or substantial portions of the Software.

    THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED,
    INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A
    PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT
    HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF
    CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR
    THE USE OR OTHER DEALINGS IN THE SOFTWARE.
"""

from __future__ import annotations

from typing import NamedTuple


class Shape(NamedTuple):
    kind: str
    prefixes: tuple[str, ...]  # literal; the token starts with one (not glued to a letter or digit)
    body: str  # a regex for what follows the prefix; the token must end after it
    # The prefix is not secret (a webhook's host, "AccountKey="): it stays, and it may follow
    # anything (a token prefix may not continue a word: "xsk-", but "api-sk_live_" is a token).
    keep_prefix: bool = False
    # Fewer literals standing for the prefixes. The pre-check's SIMD search (Teddy) takes at
    # most 64 literals: past that it falls back to a search ~3x slower on every line. A
    # literal of 2 characters ("SK", "MT") or one led by a quote costs as much: none here.
    triggers: tuple[str, ...] = ()


_HEX32 = "[0-9a-fA-F]{32}"

SHAPES: tuple[Shape, ...] = (
    # gitleaks gitlab-*: personal, deploy, runner, pipeline-trigger, feed, CI job, mail,
    # agent, SCIM and OAuth tokens; GR1348941 runner registration tokens.
    Shape(
        "gitlab",
        ("glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glcbt-", "GR1348941"),
        "[0-9A-Za-z_.-]{20,}",
        triggers=("glp", "gldt-", "glrt-", "glft-", "glcbt-", "GR1348941"),
    ),  # fmt: skip
    # slack-webhook-url: the path is the secret; the host stays.
    Shape(
        "slack-webhook", ("hooks.slack.com/",), "(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,}", True
    ),
    Shape(
        "discord-webhook",
        ("/api/webhooks/",),  # discord.com, discordapp.com
        "[0-9]{15,21}/[A-Za-z0-9_-]{40,}",
        True,
    ),
    # Azure storage / Service Bus connection strings.
    Shape("azure-key", ("AccountKey=", "SharedAccessKey="), "[A-Za-z0-9+/]{40,}={0,2}", True),
    Shape("pypi", ("pypi-AgE",), "[A-Za-z0-9_-]{50,}"),
    Shape("huggingface", ("hf_",), "[A-Za-z0-9]{30,}"),
    Shape("sendgrid", ("SG.",), "[A-Za-z0-9_-]{16,32}\\.[A-Za-z0-9_-]{30,}"),
    Shape("digitalocean", ("dop_v1_", "doo_v1_", "dor_v1_"), "[a-f0-9]{64}", triggers=("_v1_",)),
    Shape("mailgun", ("key-",), "[0-9a-f]{32}"),
    Shape("npm", ("npm_",), "[A-Za-z0-9]{36}"),
    Shape("shopify", ("shpat_", "shpca_", "shppa_", "shpss_"), _HEX32, triggers=("shp",)),
    Shape("square", ("EAAA", "sq0atp-", "sq0csp-"), "[A-Za-z0-9_-]{22,}", triggers=("EAAA", "sq0")),
    Shape("heroku", ("HRKU-",), "[A-Za-z0-9_-]{30,}"),
    Shape("new-relic", ("NRAK-", "NRII-"), "[A-Za-z0-9-]{27,}"),
    Shape("atlassian", ("ATATT3",), "[A-Za-z0-9_=-]{100,}"),
    Shape("linear", ("lin_api_", "lin_oauth_"), "[A-Za-z0-9]{40,}", triggers=("lin_",)),
    Shape("databricks", ("dapi",), "[a-f0-9]{32}(?:-[0-9]+)?"),
    # telegram-bot-api-token: <bot id>:AA<33>; the id before the colon is not secret.
    Shape("telegram", (":AA",), "(?<=[0-9]{5}:AA)[A-Za-z0-9_-]{33}", True),
)
