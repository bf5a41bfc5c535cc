"""A fake llama.cpp server that counts like one (issue 32): a small window, real limits.

Unlike ``FakeServer`` (scripted usage), this server works out each answer's usage itself,
the way ``llama-server`` does: the prompt is rendered through a Gemma-like chat template
(turn markers, the tool preamble, the schemas as JSON) and counted with a tokenizer
stand-in that is *denser* than the project's estimate (digits and marks one token each,
words ~4 bytes), so the estimate runs under the real count as it did live. A prompt over
``n_ctx`` gets llama.cpp's 400 (``exceed_context_size_error`` with ``n_prompt_tokens`` and
``n_ctx``); an answer stops at ``min(max_tokens, n_ctx - prompt)`` with
``finish_reason: "length"``, usage on the finish chunk. ``/props`` and ``/v1/models``
report ``n_ctx``. The model's moves are scripted: a tool call ``(name, arguments)``, a plain
answer (any other text), or ``BABBLE`` — text until the output cap or the window ends it,
as the 270M base model did (also what it does when a call is not offered).
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes import openai_server as wire

BABBLE = "babble"
TOOL_PREAMBLE = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
    "provided with function signatures within <tools></tools> XML tags:\n<tools>"
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    'within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
    "<args-json-object>}\n</tool_call>"
)
_PIECE = re.compile(r" ?[A-Za-z]{1,7}|[0-9]|[^\sA-Za-z0-9]{1,3}|\s+")


def count_tokens(text: str) -> int:
    """The stand-in tokenizer: every digit, each run of up to three marks, each word (7 letters a piece)
    with its leading space, each other run of whitespace. Within ±20 % of Gemma 3's counts on
    ``live/gemma_counts.json`` (``test_llamacpp_fake_counts_like_gemma``)."""
    return len(_PIECE.findall(text))


def render(body: dict[str, Any]) -> str:
    """The prompt as a Gemma 3 template with Hermes-style tools would render it."""
    messages = list(body.get("messages") or [])
    system = messages.pop(0)["content"] if messages and messages[0]["role"] == "system" else ""
    if body.get("tools"):
        system += TOOL_PREAMBLE + "".join("\n" + json.dumps(t) for t in body["tools"])
    out, first = ["<bos>"], True
    for m in messages:
        content = m.get("content") or ""
        if m["role"] == "assistant":
            calls = "".join(
                f'\n<tool_call>\n{{"name": "{c["function"]["name"]}", "arguments": {c["function"]["arguments"]}}}\n</tool_call>'
                for c in m.get("tool_calls") or []
            )
            out.append(f"<start_of_turn>model\n{content}{calls}<end_of_turn>\n")
        elif m["role"] == "tool":
            out.append(f"<start_of_turn>user\n<tool_response>\n{content}\n</tool_response><end_of_turn>\n")
        else:
            head = f"{system}\n\n" if first and system else ""
            out.append(f"<start_of_turn>user\n{head}{content}<end_of_turn>\n")
            first = False
    out.append("<start_of_turn>model\n")
    return "".join(out)


class LlamaCppLike:
    def __init__(self, n_ctx: int, moves: list[Any]) -> None:
        self.n_ctx = n_ctx
        self.moves: deque[Any] = deque(moves)
        self.bodies: list[dict[str, Any]] = []
        self.prompts: list[int] = []  # the real count of every chat request, 400s included
        self.statuses: list[int] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01})
        self._thread.daemon = True
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> LlamaCppLike:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def chat(self, body: dict[str, Any]) -> tuple[int, bytes]:
        self.bodies.append(body)
        prompt = count_tokens(render(body))
        self.prompts.append(prompt)
        if prompt > self.n_ctx:
            self.statuses.append(400)
            error = {
                "code": 400,
                "message": f"request ({prompt} tokens) exceeds the available context size "
                f"({self.n_ctx} tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": prompt,
                "n_ctx": self.n_ctx,
            }
            return 400, json.dumps({"error": error}).encode()
        self.statuses.append(200)
        room = min(int(body.get("max_tokens") or self.n_ctx), self.n_ctx - prompt)
        move = self.moves.popleft() if self.moves else BABBLE
        offered = {t["function"]["name"] for t in body.get("tools") or []}
        if isinstance(move, tuple) and move[0] not in offered:
            move = BABBLE  # the model calls what it is offered or rambles (the fallback step)
        if isinstance(move, str) and move != BABBLE:
            used = count_tokens(move)
            frames = wire.frames(move, usage=_usage(prompt, used), dialect="llamacpp")
        elif move == BABBLE:
            text = " ".join(["word"] * room)  # one token a word
            used = count_tokens(text)
            finish = "length"
            frames = wire.frames(text, usage=_usage(prompt, used), finish=finish, dialect="llamacpp")
        else:
            name, args = move
            call = json.dumps(args)
            used = count_tokens(call) + 10
            frames = wire.frames(
                "", [(f"c{len(self.bodies)}", name, args)], usage=_usage(prompt, used), dialect="llamacpp"
            )
        return 200, b"".join(frames)


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Server", "llama.cpp")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        fake: LlamaCppLike = self.server.fake
        if self.path.startswith("/props"):
            props = {
                "default_generation_settings": {"n_ctx": fake.n_ctx},
                "chat_template_caps": {"supports_tools": True},
            }
            return self._send(200, json.dumps(props).encode())
        if self.path.startswith("/v1/models"):
            models = {"data": [{"id": "gemma", "meta": {"n_ctx_train": 32768}}], "n_ctx": fake.n_ctx}
            return self._send(200, json.dumps(models).encode())
        self._send(404, b'{"error": "not found"}')

    def do_POST(self) -> None:
        fake: LlamaCppLike = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if not self.path.startswith("/v1/chat/completions"):
            return self._send(404, b'{"error": "not found"}')
        status, data = fake.chat(body)
        self._send(status, data, "application/json" if status != 200 else "text/event-stream")

    def log_message(self, format: str, *args: Any) -> None:
        return
