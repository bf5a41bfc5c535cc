"""The first ``%agent`` of a fresh kernel, to its first request byte (issue 47).

A real ipykernel (``bench.kernel_wire``) with the extension loaded runs, as its first
``%agent``, ``%agent --provider openai "…"`` against a local OpenAI-compatible server in
another process (``127.0.0.1``; it answers the model list a local server's window probe asks
for, then a one-line streamed answer). The server notes the time each request's first line
arrives; the kernel notes when the cell starts (a ``pre_run_cell`` hook registered in an
earlier cell). ``first_request`` is the median over ``KERNELS`` fresh kernels of the time from
the cell's start to the run's model request (the server's window probes before it are in the
detail, with the first byte any of them put on the wire), target ≤ 0.25 s, with the ``%agent``
cell run right after ``%load_ext``'s; ``first_request_after_pause`` the same with a person's
pause between the two cells (the kernel, idle, imports the agent's world then:
``magics.warm``); the detail has the kernel's CPU over the same span and
what each kernel added to ``sys.modules``.

``python -m bench.first_request [--against PATH]`` prints it (with ``--against``, the other
checkout's kernels run in turns with this one's); ``python -m bench --only startup`` runs it
with the startup rows.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import Row
from .kernel_wire import HERE, Wire

KERNELS = 5
TARGET = 0.25

_SERVER = r"""
import json, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
LOG = sys.argv[1]
def note(what):
    with open(LOG, "a") as f:
        f.write(json.dumps([time.time(), what]) + "\n")
def chunk(delta, finish=None):
    return {"id": "c", "object": "chat.completion.chunk", "model": "bench", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def log_message(self, *a): pass
    def parse_request(self):
        note(self.raw_requestline.decode(errors="replace").strip())  # the request's first line is in
        return super().parse_request()
    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            body = json.dumps({"object": "list", "data": [{"id": "bench", "object": "model", "meta": {"n_ctx_train": 32768}}]}).encode()
            self.send_response(200); self.send_header("Content-Type", "application/json")
        else:
            body = b""
            self.send_response(404)
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        frames = [chunk({"role": "assistant", "content": ""}), chunk({"content": "Hello."}), chunk({}, "stop")]
        body = b"".join(b"data: " + json.dumps(f).encode() + b"\n\n" for f in frames)
        body += b'data: {"id": "c", "object": "chat.completion.chunk", "model": "bench", "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}\n\n'
        body += b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
httpd.request_queue_size = 128
print(httpd.server_address[1], flush=True)
httpd.serve_forever(poll_interval=0.01)
"""

_HOOK = (
    "import time as _time, resource as _resource, sys as _sys\n"
    "_marks = []\n"
    "def _cell_start(*_):\n"
    "    _u = _resource.getrusage(_resource.RUSAGE_SELF)\n"
    "    _marks.append((_time.time(), _u.ru_utime + _u.ru_stime, len(_sys.modules)))\n"
    "get_ipython().events.register('pre_run_cell', _cell_start)\n"
)


def _bytecode(scratch: Path) -> dict[str, str]:
    """An installed package's kernels read its compiled bytecode (pip compiles it; a source
    checkout writes it on its first import). Where this environment writes none
    (``PYTHONDONTWRITEBYTECODE``), every kernel would compile the package from source, which no
    user's kernel does: the kernels then keep their bytecode in the scratch folder instead
    (``PYTHONPYCACHEPREFIX``), written by an untimed first kernel."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return {}
    return {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(scratch / "pycache")}


def one_kernel(scratch: Path, port: int, log: Path, package: Path, pause: float = 0.0) -> dict:
    ws = Path(tempfile.mkdtemp(dir=scratch, prefix="first-"))
    env = {
        "PSEUDOCLAUDE_HOME": str(ws / ".home"),
        "IPYTHONDIR": str(ws / ".ipython"),
        "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
        "OPENAI_API_KEY": "bench-key",
        **_bytecode(scratch),
    }
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        env[name] = ""
    with Wire(ws, env=env, package=package) as wire:
        wire.run("%load_ext pseudoclaude_nb")
        wire.run(_HOOK)
        time.sleep(pause)  # a person between the two cells (reading, typing the prompt)
        log.write_text("")
        cell = wire.run('%agent --provider openai --model bench --mode auto "Say hello."')
        # This cell's own start is the last mark; the %agent cell's the one before it.
        start, cpu, modules = json.loads(
            wire.run(
                "import json\n(_w0, _c0, _m0), (_w1, _c1, _m1) = _marks[-2:]\n"
                "print(json.dumps([_w0, _c1 - _c0, _m1 - _m0]))"
            ).outputs[-1]["text"]
        )
    seen = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    if not seen:
        text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)
        raise RuntimeError(f"the run sent no request: {text[-2000:]}")
    posts = [t for t, what in seen if what.startswith("POST /v1/chat")]
    if not posts:
        raise RuntimeError(f"the run sent no model request: {seen}")
    return {
        "first_request_s": posts[0] - start,  # the run's model request
        "first_byte_s": seen[0][0] - start,  # anything on the wire (a local server's window probe)
        "requests": [what for _, what in seen],
        "cell_s": cell.seconds,
        "cell_cpu_s": cpu,
        "modules_added": modules,
    }


PAUSE = 2.0  # seconds between %load_ext and %agent in the second row


def first_request_rows(scratch: Path, *, kernels: int = KERNELS, package: Path = HERE.parent) -> list[Row]:
    return compared_rows(scratch, {"this": package}, kernels=kernels)["this"]


def compared_rows(
    scratch: Path, packages: dict[str, Path], *, kernels: int = KERNELS
) -> dict[str, list[Row]]:
    """The two rows for each checkout in ``packages``, their kernels in turns (one of each kind
    of each checkout, then again), so a change in the machine's load falls on all of them."""
    log = scratch / "first-request.log"
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(log)], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    runs: dict[str, tuple[list[dict], list[dict]]] = {label: ([], []) for label in packages}
    try:
        port = int(server.stdout.readline())  # type: ignore[union-attr]
        if _bytecode(scratch):
            for package in packages.values():
                one_kernel(scratch, port, log, package)  # untimed: writes the kernels' bytecode
        for _ in range(kernels):  # the two kinds in turns
            for label, package in packages.items():
                back_to_back, paused = runs[label]
                back_to_back.append(one_kernel(scratch, port, log, package))
                paused.append(one_kernel(scratch, port, log, package, pause=PAUSE))
    finally:
        server.terminate()
        server.wait(timeout=10)
    return {
        label: [
            _row(
                "first_request",
                "the first %agent of a fresh kernel, run right after %load_ext: cell start to its model request",
                back_to_back,
            ),
            _row(
                "first_request_after_pause",
                f"… the same with {PAUSE:.0f} s between the %load_ext cell and the %agent cell (a person's pause)",
                paused,
            ),
        ]
        for label, (back_to_back, paused) in runs.items()
    }


def _row(key: str, what: str, runs: list[dict]) -> Row:
    first = statistics.median(r["first_request_s"] for r in runs)
    return Row(
        key,
        what,
        f"≤ {TARGET} s",
        round(first, 3),
        "s",
        first <= TARGET,
        {
            "first_request_s": [round(r["first_request_s"], 3) for r in runs],
            "first_byte_s": [round(r["first_byte_s"], 3) for r in runs],
            "cell_cpu_s": [round(r["cell_cpu_s"], 3) for r in runs],
            "modules_added_by_the_cell": [r["modules_added"] for r in runs],
            "requests": runs[0]["requests"],
            "method": "median over fresh kernels (a fresh PSEUDOCLAUDE_HOME each: the server's window probed "
            "anew); the cell's start from a pre_run_cell hook (kernel clock), the model request's first line "
            "from the server (same machine clock); CPU: the kernel's, for the whole cell; the package's "
            "bytecode compiled, as installed (in the scratch folder where the environment writes none)",
        },
        note=f"first byte on the wire (the window probe) at {statistics.median(r['first_byte_s'] for r in runs):.3f} s; "
        f"kernel CPU for the cell {statistics.median(r['cell_cpu_s'] for r in runs):.3f} s",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.first_request", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--kernels", type=int, default=KERNELS)
    parser.add_argument(
        "--against", type=Path, help="another checkout of the package, its kernels in turns with this one's"
    )
    args = parser.parse_args(argv)
    packages = {"this": HERE.parent, **({"against": args.against.resolve()} if args.against else {})}
    with tempfile.TemporaryDirectory(prefix="pseudoclaude-first-") as tmp:
        compared = compared_rows(Path(tmp), packages, kernels=args.kernels)
    for label, rows in compared.items():
        for row in rows:
            mark = {True: "met", False: "MISSED", None: ""}[row.ok]
            print(f"{label:<8} {row.key:<16} {row.value} {row.unit} ({row.target}) {mark}  {row.note}")
            print(f"{'':<8} {json.dumps(row.detail)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
