"""Issue 47 item 4: the first ``%agent`` of a fresh shell imports what its run needs, no more.

``tests/test_startup.py`` keeps ``%load_ext`` lean; this keeps the first run's way to its
model request lean. In a fresh interpreter, as a user's first cells: ``%load_ext``, then
``%agent`` with the scripted provider or with the OpenAI-compatible provider against a
local fake server whose window it probes: what was imported when the run's model request
was made (the scripted model asked; the chat request at the server). The strategies the run does not use
(rollover, handoff, undo, provider compaction), the session loader (a new session loads
nothing), ``%context``'s views, the history search, MCP with no server configured, the
other providers and the SDKs, the widgets' packages and the lab must not be among them: each
is imported where it is used. The speed is a bench row (``bench/first_request.py``); no
timed assertion here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pseudoclaude_nb

ROOT = Path(pseudoclaude_nb.__file__).resolve().parents[1]

# Imported only where a run needs them; a first run with the default strategy needs none.
NOT_ON_THE_WAY = (
    # libraries: the SDKs (the openai-compatible provider speaks httpx), MCP, the widgets' package
    "anthropic",
    "openai",
    "mcp",
    "ipywidgets",
    # the strategies other than compact, and what undoes a compaction
    "pseudoclaude_nb.context.rollover",
    "pseudoclaude_nb.context.handoff",
    "pseudoclaude_nb.context.undo",
    "pseudoclaude_nb.context.provider_compaction",
    "pseudoclaude_nb.context.on_demand",
    "pseudoclaude_nb.tools.rollover",
    # reading a session back (a new session is written, not loaded)
    "pseudoclaude_nb.session.loader",
    "pseudoclaude_nb.session.fast_load",
    "pseudoclaude_nb.session.replay",
    "pseudoclaude_nb.session.catalog",
    # %context's views and the history search
    "pseudoclaude_nb.agent.views",
    "pseudoclaude_nb.context.manifest",
    "pseudoclaude_nb.history.query",
    # MCP's tools (no server configured), the other providers, the lab
    "pseudoclaude_nb.mcp.tools",
    "pseudoclaude_nb.mcp.hub",
    "pseudoclaude_nb.providers.demo_script",
    "pseudoclaude_nb.providers.anthropic",
    "pseudoclaude_nb.providers.openai_responses",
    "pseudoclaude_nb.lab",
    # the tables of the other magics
    "pseudoclaude_nb.magics.tables",
)

FIRST_RUN = r"""
import json, sys
from pathlib import Path
import IPython

out, case = Path(sys.argv[1]), sys.argv[2]
shell = IPython.core.interactiveshell.InteractiveShell.instance()
shell.run_line_magic("load_ext", "pseudoclaude_nb")
before = set(sys.modules)
found = {}

if case == "scripted":
    # The scripted model's request, as the wire's: what was imported when it is asked. (Its
    # own imports are the run's too: the message models, the estimate, the provider's base.)
    from pseudoclaude_nb.providers.scripted import ScriptedProvider

    asked = ScriptedProvider.stream

    def stream(self, request):
        found.setdefault("imported", sorted(set(sys.modules) - before))
        return asked(self, request)

    ScriptedProvider.stream = stream
    script = Path("script.json")
    script.write_text(json.dumps({"model": "scripted-test", "context_window": 200000,
                                  "turns": [{"text": "Hello.", "tool_calls": []}]}))
    print("=== run", flush=True)
    shell.run_cell(f"%agent --provider scripted --script {script} --mode auto Say hello.")
else:
    from tests.fakes import FakeServer, Reply
    from tests.fakes.openai_server import answer

    def respond(request):
        if request.method == "POST" and request.path.endswith("/chat/completions"):
            found.setdefault("imported", sorted(set(sys.modules) - before))  # the run waits for this
            return answer("Hello.")
        if request.path.endswith("/v1/models"):  # the window probe of a local server
            return Reply(200, {"object": "list", "data": [{"id": "local", "meta": {"n_ctx_train": 32768}}]})
        return Reply(404, {"error": "not found"})

    with FakeServer("local", probes=True, respond=respond) as server:
        import os
        os.environ.update(OPENAI_BASE_URL=server.url + "/v1", OPENAI_API_KEY="local-key")
        print("=== run", flush=True)
        shell.run_cell("%agent --provider openai --model local --mode auto Say hello.")
out.write_text(json.dumps(found), encoding="utf-8")
"""


@pytest.fixture(scope="module", params=["scripted", "openai"])
def first_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[list[str], str]:
    """What a fresh interpreter imported for its first ``%agent`` (before its request, on the wire)."""
    tmp = tmp_path_factory.mktemp(f"first-{request.param}")
    workspace = tmp / "ws"
    workspace.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(PYTHONPATH=str(ROOT), PSEUDOCLAUDE_HOME=str(tmp / "home"), PSEUDOCLAUDE_DEMO_PACE="0")
    env.pop("JPY_SESSION_NAME", None)
    result = tmp / "found.json"
    done = subprocess.run(
        [sys.executable, "-c", FIRST_RUN, str(result), request.param],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(result.read_text(encoding="utf-8"))["imported"], done.stdout


def test_the_first_run_answers(first_run: tuple[list[str], str]) -> None:
    imported, out = first_run
    assert "Hello." in out.split("=== run", 1)[1]
    assert "pseudoclaude_nb.agent.core" in imported and "pseudoclaude_nb.runner" in imported


@pytest.mark.parametrize("module", NOT_ON_THE_WAY)
def test_the_first_run_does_not_import(first_run: tuple[list[str], str], module: str) -> None:
    imported, _ = first_run
    found = [m for m in imported if m == module or m.startswith(module + ".")]
    assert found == [], (
        f"{module} is imported on the first run's way to its request: import it where it is used"
    )
