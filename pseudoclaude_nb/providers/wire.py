"""What the wire providers share: reading keys, grouping turns, wording errors.

Both providers tell the user the same things in the same words: which variable to set,
which URL could not be reached, when to try again. Every message is one line and
never contains a key (server messages are scrubbed before they are quoted).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from .. import image_fit
from ..envtrust import check_endpoint, lookup
from ..errors import ConfigError, ProviderError
from ..messages import ImagePart, Message
from .base import cap_images

# Server messages are quoted for the details, but a page of HTML from a proxy is not one line.
QUOTE_LIMIT = 300
# A value this short is no secret (``OPENAI_API_KEY=x`` is normal for local servers) and
# scrubbing it would mangle words: "This model's ma***imum conte***t length".
MIN_SECRET = 8


def env(name: str) -> str | None:
    """A provider variable from the environment, else from the workspace's ``.env`` (which
    never enters ``os.environ``: ``envtrust``), with empty or blank treated as unset."""
    return lookup(name)


def endpoint(
    key_var: str, url_var: str, api_key: str | None, base_url: str | None
) -> tuple[str | None, str | None]:
    """The key and the base URL a provider uses, from one source (SPEC §19 workspace trust).

    A base URL a workspace's ``.env`` set is never paired with a key from elsewhere (nor the
    other way round): ``ConfigError`` before any client exists, so no request is sent.
    """
    check_endpoint(key_var, url_var, key_given=bool(api_key), url_given=bool(base_url))
    return api_key or env(key_var), base_url or env(url_var)


@functools.cache
def tls() -> Any:
    """httpx's default TLS context, made once per process: loading the CA bundle took ~150 ms,
    and every ``%agent`` run makes its provider (and client) anew."""
    import httpx

    return httpx.create_ssl_context()


def tls_for(base_url: str) -> Any:
    """What a client for ``base_url`` verifies TLS with: the default context for ``https``; for a
    plain ``http`` server (a local one) none is made — loading the CA bundle it would never use
    was most of a kernel's first request to it (issue 47). Such a client follows no redirect
    (httpx's default), so it never reaches an ``https`` address."""
    return tls() if not base_url.lower().startswith("http://") else False


def turns(messages: list[Message]) -> list[list[Message]]:
    """Consecutive messages of one role, grouped: each group becomes one wire turn.

    A tool result is a user message, so the results of one step and any user text
    after them form one user turn, as the Messages API requires. Messages with nothing
    to send are left out first, so they cannot split a turn in two. Only the newest
    ``MAX_IMAGES`` image parts are kept (``cap_images``): here, in the one pass both wire
    providers make over the messages, not per ``Request`` (a second pass over the whole
    history on every step, ~4.5 ms at 10,000 messages).
    """
    groups: list[list[Message]] = []
    for msg in cap_images(messages):
        if not sendable(msg):
            continue
        if groups and groups[-1][0].role == msg.role:
            groups[-1].append(msg)
        else:
            groups.append([msg])
    return groups


def sendable(msg: Message) -> bool:
    """Whether a message has anything to send (one that has not is left out of its turn). A
    provider's compaction alone is something (issue 43: an on-demand block, a paused compaction)."""
    return bool(
        msg.content.strip()
        or msg.tool_calls
        or msg.tool_result is not None
        or msg.parts
        or any(r.kind == "compaction" for r in msg.reasoning)
    )


def quote(text: object, secret: str | None = None) -> str:
    """A server's message as one short line, with the key scrubbed if it was echoed."""
    line = " ".join(str(text).split())
    if secret and len(secret) >= MIN_SECRET:
        # Only the key as a whole token, never inside a longer word or key.
        line = re.sub(rf"(?<![\w-]){re.escape(secret)}(?![\w-])", "***", line)
    if len(line) > QUOTE_LIMIT:
        line = line[: QUOTE_LIMIT - 1] + "…"
    return line


# --- the errors both providers raise, worded once ----------------------------------------------


def missing_key(service: str, variable: str) -> ConfigError:
    return ConfigError(
        f"{variable} is not set: set it to your {service} API key in the environment or in the "
        "workspace's .env file (or try the agent offline with --provider demo)"
    )


def key_rejected(service: str, variable: str, status: int) -> ProviderError:
    what = "rejected the API key" if status == 401 else "refused this API key access"
    return ProviderError(
        f"{service} {what} ({status}): check {variable} — it must be a valid, active key for this endpoint",
        status=status,
    )


def model_missing(service: str, model: str, base_url: str, status: int, detail: str) -> ProviderError:
    return ProviderError(
        f"{service} at {base_url} does not know model {model!r} ({status}: {detail}): pass "
        "--model NAME or set %config PseudoClaude.model = 'NAME'",
        status=status,
    )


def busy(service: str, status: int, retries: int, detail: str) -> ProviderError:
    after = f" even after {retries} retries" if retries else ""
    if status == 429:
        advice = "try again later, or check your plan's rate limits and credit"
    else:
        advice = "the service is overloaded or failing; try again later"
    return ProviderError(f"{service} answered {status} ({detail}){after}: {advice}", status=status)


def unreachable(service: str, base_url: str, variable: str, reason: str) -> ProviderError:
    return ProviderError(
        f"cannot reach {service} at {base_url} ({reason}): check {variable} and that the "
        "server is running and reachable"
    )


def refused(service: str, status: int, detail: str) -> ProviderError:
    return ProviderError(f"{service} refused the request ({status}: {detail})", status=status)


# --- images (issue-14): what of a message's image parts goes on the wire ----------------------

SEND_IMAGES = ("auto", "always", "never")


def send_images_setting(value: str) -> str:
    if value not in SEND_IMAGES:
        raise ConfigError(f"send_images must be one of {', '.join(SEND_IMAGES)}; got {value!r}")
    return value


def images_for(
    msg: Message,
    source: Any,
    *,
    accepts: bool,
    setting: str,
    service: str,
    model: str,
    limit: int,
    max_side: int = 0,
) -> tuple[list[tuple[ImagePart, bytes]], list[str]]:
    """(part, bytes) for each image part that is sent, and the text notes for the others.

    ``setting`` is ``send_images``: ``auto`` follows the model table (``accepts``), ``always``
    sends to any model, ``never`` sends none. Bytes come from ``source`` (the session's own
    copy, checked). An image over ``limit`` bytes (or ``max_side`` pixels) is downscaled when
    Pillow is installed, else refused with a note.
    """
    sent: list[tuple[ImagePart, bytes]] = []
    notes: list[str] = []
    for part in msg.parts:
        if setting == "never":
            notes.append(part.note("not sent (send_images is 'never')"))
            continue
        if setting != "always" and not accepts:
            notes.append(part.note(f"not sent: {model} takes no images (set send_images = 'always' to try)"))
            continue
        if source is None:
            notes.append(part.note("not sent: no session to read it from"))
            continue
        try:
            data = source(part)
        except Exception as exc:  # noqa: BLE001 - a missing or altered file is a note, not a failed run
            notes.append(part.note(f"not sent: {exc}"))
            continue
        # The bytes' own header decides, not the log's claim; a bomb is refused, never decoded.
        why = image_fit.refusal(data)
        if why is not None:
            notes.append(part.note(f"not sent: {why}"))
            continue
        found = image_fit.sniff(data)
        width, height = (found[1], found[2]) if found else (part.width, part.height)
        too_big = len(data) > limit or (max_side and max(width, height) > max_side)
        if too_big:
            smaller = _downscale(data, limit, max_side)
            if smaller is None:
                notes.append(
                    part.note(
                        f"not sent: over {service}'s limit of {limit:,} bytes"
                        + (f" or {max_side:,} pixels a side" if max_side else "")
                        + " per image (install Pillow to have it downscaled)"
                    )
                )
                continue
            data, media_type = smaller
            part = part.model_copy(update={"media_type": media_type})
        sent.append((part, data))
    return sent, notes


def _downscale(data: bytes, limit: int, max_side: int) -> tuple[bytes, str] | None:
    """A smaller JPEG of ``data`` within the limits, with Pillow if it is installed; else None.

    Made once per image and kept (``image_fit.fit``), not once per request."""
    return image_fit.fit(data, limit, max_side)


def b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode("ascii")
