"""Per step through the OpenAI-compatible provider (SPEC §15 third wave, issue 34): 10,000 messages vs 100.

The scripted provider of ``agent_steps`` never builds a request body; a real provider sends
the whole history on every step (~18 MB at 10,000 messages). Here ``%agent`` runs with
``--provider openai`` against a local server on 127.0.0.1 in *another process* (so reading
the body does not take this process's GIL): real httpx, the real body built and encoded by
the provider, streamed answers in the chat-completions format. The server reads each body
whole and throws it away, then answers a ``read_file`` tool call (the last step of a run:
text). GC on, fsync on, the history index on, as a user runs it; sizes interleaved, each
timed run on a fresh copy of the warmed workspace; the median per-step time of the runs.

What stays above 1× at 10,000 messages is the body itself: joining and sending ~18 MB and
the server reading it, every step. The bench also reports the encode share per step.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .agent_steps import WINDOW, _session, _Shell
from .common import Row, Sizes

TARGET = 1.2
STEPS = 12  # model requests per timed %agent run

# A chat-completions server that reads and discards each body; a run of STEPS requests is
# STEPS - 1 tool calls and a final text. Usage says the body's size in tokens (bytes / 4).
_SERVER = r"""
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
STEPS = int(sys.argv[1])
count = [0]
def data(obj): return b"data: " + json.dumps(obj).encode() + b"\n\n"
def chunk(delta, finish=None, **extra):
    return {"id": "c", "object": "chat.completion.chunk", "model": "bench", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers()
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        left = n
        while left:
            left -= len(self.rfile.read(min(left, 1 << 20)))
        count[0] += 1
        last = count[0] % STEPS == 0
        frames = [data(chunk({"role": "assistant", "content": ""}))]
        if last:
            frames += [data(chunk({"content": "Finished."})), data(chunk({}, "stop"))]
        else:
            call = {"index": 0, "id": f"call_{count[0]}", "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": "src/small.py", "limit": 40})}}
            frames += [data(chunk({"content": "Reading the module again."})), data(chunk({"tool_calls": [call]})),
                       data(chunk({}, "tool_calls"))]
        usage = {"prompt_tokens": n // 4, "completion_tokens": 20, "total_tokens": n // 4 + 20}
        frames += [data({"id": "c", "object": "chat.completion.chunk", "model": "bench", "choices": [], "usage": usage}),
                   b"data: [DONE]\n\n"]
        body = b"".join(frames)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(httpd.server_address[1], flush=True)
httpd.serve_forever()
"""


def _agent_line() -> str:
    return f'--mode auto --context-window {WINDOW} "go on"'


class _Server:
    def __init__(self, steps: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER, str(steps)], stdout=subprocess.PIPE, text=True
        )
        self.url = f"http://127.0.0.1:{int(self.proc.stdout.readline())}/v1"  # type: ignore[union-attr]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def _use(shell: _Shell, ws: Path) -> None:
    shell.agent.close()
    settings = shell.agent.settings
    settings.workspace, settings.provider, settings.fsync = str(ws), "openai", True
    settings.model = "bench-model"


def _prepare(root: Path, shell: _Shell, count: int) -> tuple[Path, str]:
    ws = Path(tempfile.mkdtemp(dir=root, prefix=f"wire-{count}-"))
    (ws / "src").mkdir()
    (ws / "src" / "small.py").write_text("".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(30)))
    sid = _session(ws, count)
    _use(shell, ws)
    shell.magic("sessions", f"resume {sid}")
    shell.magic("agent", _agent_line())  # resumes the log, indexes it, anchors the estimate
    shell.agent.close()
    return ws, sid


def _timed_run(root: Path, shell: _Shell, template: Path, sid: str) -> float:
    ws = Path(tempfile.mkdtemp(dir=root, prefix="wire-run-"))
    shutil.rmtree(ws)
    shutil.copytree(template, ws)
    _use(shell, ws)
    shell.magic("sessions", f"resume {sid}")
    shell.magic("agent", _agent_line())  # as in a kernel: not the first run (the provider's cache is warm)
    started = time.perf_counter()
    shell.magic("agent", _agent_line())
    seconds = time.perf_counter() - started
    shell.agent.close()
    shutil.rmtree(ws, ignore_errors=True)
    return seconds / STEPS


def per_step_through_openai(root: Path, sizes: Sizes) -> list[Row]:
    small, big = sizes.overhead_small, sizes.magic_big
    server = _Server(STEPS)
    saved = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY")}
    os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"] = server.url, "sk-bench-local"
    shell = _Shell()
    try:
        ws_small, sid_small = _prepare(root, shell, small)
        ws_big, sid_big = _prepare(root, shell, big)
        at_small, at_big = [], []
        for _ in range(max(2, sizes.repeat)):
            at_small.append(_timed_run(root, shell, ws_small, sid_small))
            at_big.append(_timed_run(root, shell, ws_big, sid_big))
        body_mb = _body_mb(shell, ws_big, sid_big)
    finally:
        shell.close()
        server.close()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    s, b = statistics.median(at_small), statistics.median(at_big)
    ratio = b / s
    return [
        Row(
            key="overhead_openai",
            what=f"per step through %agent --provider openai (local server, real httpx) at {big:,} messages vs {small:,}",
            target=f"≤ {TARGET}×",
            value=round(ratio, 3),
            unit="×",
            ok=ratio <= TARGET if big >= 10_000 else None,
            detail={
                f"ms_per_step_at_{small}": round(s * 1e3, 2),
                f"ms_per_step_at_{big}": round(b * 1e3, 2),
                f"min_max_ms_at_{small}": [round(min(at_small) * 1e3, 2), round(max(at_small) * 1e3, 2)],
                f"min_max_ms_at_{big}": [round(min(at_big) * 1e3, 2), round(max(at_big) * 1e3, 2)],
                "request_body_mb_at_big": body_mb,
                "steps_per_run": STEPS,
                "runs_timed_each": len(at_small),
                "method": "wall time of one %agent run / its requests (median of fresh copies, interleaved, GC on); "
                "the server, in another process, reads each body whole, answers a read_file call",
            },
            note="" if big >= 10_000 else f"quick mode: {big:,} messages, no verdict",
        )
    ]


def _body_mb(shell: _Shell, ws: Path, sid: str) -> float | None:
    """The size of one request body at the large end, as the provider encodes it."""
    try:
        from pseudoclaude_nb.conversation import Conversation  # noqa: F401 - the same session, loaded
        from pseudoclaude_nb.providers.base import Request
        from pseudoclaude_nb.providers.openai_compat import OpenAIProvider
        from pseudoclaude_nb.session import load_session

        loaded = load_session(ws / ".pseudoclaude" / "sessions" / sid)
        provider = OpenAIProvider(base_url="http://127.0.0.1:9/v1", model="bench-model")
        body = provider._body(Request(system="", messages=list(loaded.messages)))  # noqa: SLF001
        try:
            from pseudoclaude_nb.providers.wire_prefix import dumps
        except ImportError:  # the code before issue 34
            import json

            return round(len(json.dumps(body, ensure_ascii=False).encode()) / 1e6, 1)
        return round(len(dumps(body)) / 1e6, 1)
    except Exception:  # noqa: BLE001 - a figure for the reader only
        return None
