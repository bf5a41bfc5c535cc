"""Replays of the real llama.cpp recordings in ``../shared/recorded/llamacpp`` (issue 32).

Each case is a request body the project sent, the response bytes exactly as ``llama-server``
sent them, and its status line. ``stream`` cuts the bytes into SSE events, as the server
wrote them, for ``FakeServer``; ``reply`` gives a recorded error as a JSON answer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import Reply, Stream

RECORDED = Path(os.environ.get("PSEUDOCLAUDE_LLAMACPP_RECORDED", "/work/shared/recorded/llamacpp"))
MODEL = "bin/gemma-3-270m-q4_k_m.gguf"


def _path(name: str, suffix: str) -> Path:
    path = RECORDED / f"{name}{suffix}"
    if not path.exists():
        pytest.skip(f"the llama.cpp recording {path} is not on this machine")
    return path


def raw(name: str) -> bytes:
    return _path(name, ".sse").read_bytes()


def status(name: str) -> dict[str, Any]:
    return json.loads(_path(name, ".status").read_text())


def request(name: str) -> dict[str, Any]:
    return json.loads(_path(name, ".req.json").read_text())


def events(name: str) -> list[bytes]:
    """The recorded body as its SSE events (each ending with a blank line), byte for byte."""
    body = raw(name)
    pieces = body.split(b"\n\n")
    out = [piece + b"\n\n" for piece in pieces[:-1]]
    if pieces[-1]:
        out.append(pieces[-1])
    assert b"".join(out) == body
    return out


def stream(name: str, frames: list[bytes] | None = None) -> Stream:
    return Stream(events(name) if frames is None else frames)


def reply(name: str) -> Reply:
    """A recorded non-streamed answer (an error) with its status and JSON body."""
    return Reply(status(name)["status"], json.loads(raw(name)))
