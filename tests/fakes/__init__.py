"""Fake model servers on 127.0.0.1 for wire tests: real HTTP, real protocols, scripted answers.

``FakeServer`` records every request (method, path, headers, JSON body) and plays a
script of answers in order: a JSON ``Reply``, or an event ``Stream`` that may end early
(cleanly, as when a server stops writing) or drop the connection in the middle of the
body. Like the scripted provider, it fails loudly: a request beyond the script, or an
answer left unplayed, is an error when the server closes. The protocol details live in
``anthropic_server`` (SSE with ``event:`` lines) and ``openai_server`` (``data:`` chunks).

A server made with ``respond`` answers what is beyond the script by calling it with the
recorded request: a model whose answer depends on what it is asked (``lab_player``, which
plays the strategy lab's task, issue 46).
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: Any  # the parsed JSON body, or None
    raw: bytes = b""  # the body's bytes as they arrived


@dataclass(frozen=True)
class Reply:
    """A whole JSON answer: a success or an HTTP error with its body."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Stream:
    """A streamed answer: ``frames`` are written as chunks of a chunked body.

    ``drop_after`` closes the socket after that many frames, halfway through a chunk,
    so the client sees a body that breaks off (not a clean end).
    """

    frames: list[bytes]
    drop_after: int | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


Answer = Reply | Stream


def _window_probe(method: str, path: str) -> bool:
    """A request the OpenAI-compatible provider makes to learn a local server's window (issue 32)."""
    path = path.split("?", 1)[0]
    if method == "POST":
        return path.endswith("/api/show")
    return path.endswith(("/props", "/models")) or "/api/v0/models/" in path


class FakeServer:
    """``probes``: script the window probes too; by default they get a 404, unrecorded, so a
    test about something else sees only its own requests."""

    def __init__(
        self,
        name: str = "fake",
        *,
        probes: bool = False,
        respond: Callable[[Recorded], Answer] | None = None,
    ) -> None:
        self.name = name
        self.probes = probes
        self.respond = respond
        self.requests: list[Recorded] = []
        self.problems: list[str] = []
        self._answers: deque[Answer] = deque()
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def play(self, *answers: Answer) -> FakeServer:
        with self._lock:
            self._answers.extend(answers)
        return self

    @property
    def unplayed(self) -> int:
        return len(self._answers)

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def check(self) -> None:
        """Raise if the script was overrun or not played to its end."""
        problems = list(self.problems)
        if self._answers:
            problems.append(f"{len(self._answers)} scripted answer(s) were never requested")
        assert not problems, f"{self.name} server: " + "; ".join(problems)

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        if exc[0] is None:
            self.check()

    # --- inside the server thread --------------------------------------------------------------

    def _next(self, recorded: Recorded) -> Answer:
        with self._lock:
            self.requests.append(recorded)
            if self._answers:
                return self._answers.popleft()
            if self.respond is not None:
                return self.respond(recorded)
            problem = f"request #{len(self.requests)} ({recorded.method} {recorded.path}) beyond the script"
            self.problems.append(problem)
        # 418: an answer no client retries, so one overrun stays one request.
        return Reply(418, {"error": {"type": "fake_script_overrun", "message": problem}})


def closed_port_url() -> str:
    """A loopback URL where nothing listens: connecting is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    fake: FakeServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked bodies, as real APIs use
    disable_nagle_algorithm = True  # else each small write waits ~40 ms for an ACK
    server: _Server

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError):
            pass  # a client that stopped reading after an error hung up; that is its right

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        if not self.server.fake.probes and _window_probe(self.command, self.path):
            self._reply(Reply(404, {"error": "not found (the fake server answers no window probes)"}))
            return
        recorded = Recorded(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            raw=raw,
        )
        answer = self.server.fake._next(recorded)
        if isinstance(answer, Reply):
            self._reply(answer)
        else:
            self._stream(answer)

    do_GET = do_POST

    def _reply(self, reply: Reply) -> None:
        data = json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, stream: Stream) -> None:
        self.send_response(stream.status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        for name, value in stream.headers.items():
            self.send_header(name, value)
        self.end_headers()
        for i, frame in enumerate(stream.frames):
            if stream.drop_after is not None and i >= stream.drop_after:
                # Announce a chunk, send half of it, and hang up.
                self.wfile.write(f"{len(frame):x}\r\n".encode() + frame[: len(frame) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            self.wfile.write(f"{len(frame):x}\r\n".encode() + frame + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean; the recorded requests say what happened
