"""Issue 30 item 10, "Start fast": ``%load_ext`` imports what registering needs and no more.

In a fresh process, as a user's kernel starts: ``import IPython``, a shell, ``%load_ext``.
The agent, the providers, the widgets, MCP, pydantic and the HTTP and SDK libraries must
not be imported yet; the first magic call brings them, and everything still works then —
the offline explainer answers about a failed cell, the demo runs, ``%sessions`` sees its
session, ``%agent?`` shows the full help. The speed itself is a ratio in
``bench/startup.py`` (no timed assertion here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pseudoclaude_nb
from pseudoclaude_nb.magics import deferred

ROOT = Path(pseudoclaude_nb.__file__).resolve().parents[1]

# Libraries a run may need and ``%load_ext`` must not pay for (sqlite3: the history index;
# IPython's own history has it loaded already in a real kernel).
HEAVY = (
    "anthropic",
    "openai",
    "httpx",
    "httpx2",
    "mcp",
    "mcp_types",
    "ipywidgets",
    "pydantic",
    "jsonschema",
    "regex",
    "sqlite3",
    "orjson",
    "ahocorasick_rs",
)
# The package's own modules ``%load_ext`` may import: the settings, the magic names, the cell
# recorder and what it records with. A module added here is paid for by every kernel that
# loads the extension; see docs/development.md ("Keep startup lean") before adding one.
AT_LOAD = {
    "pseudoclaude_nb",
    "pseudoclaude_nb.config",
    "pseudoclaude_nb.envtrust",
    "pseudoclaude_nb.errors",
    "pseudoclaude_nb.lazy",
    "pseudoclaude_nb.magics",
    "pseudoclaude_nb.magics.deferred",
    "pseudoclaude_nb.magics.notebook",
    "pseudoclaude_nb.magics.stream_tap",
    "pseudoclaude_nb.notebook",
    "pseudoclaude_nb.notebook.activity",
    "pseudoclaude_nb.notebook.record",
    "pseudoclaude_nb.notebook.skip",
    "pseudoclaude_nb.notebook.store",
}

SESSION = r"""
import json, sys
import IPython

def loaded():  # what the extension brought in: IPython's own (its sqlite3 history) is there before
    return sorted(set(sys.modules) - before)

shell = IPython.core.interactiveshell.InteractiveShell.instance()
before = set(sys.modules)
shell.run_line_magic("load_ext", "pseudoclaude_nb")
found = {"load_ext": loaded()}
shell.run_cell("revenue = [120, 95, 143]")
shell.run_cell("count = 0\nsum(revenue) / count")
found["cells"] = loaded()
print("=== offline", flush=True)
shell.run_cell("%agent why did my last cell fail?")  # no key: the offline explainer
print("=== demo", flush=True)
shell.run_cell("%agent --provider demo --mode auto add a stats module with a test")
found["first_agent"] = loaded()
print("=== sessions", flush=True)
shell.run_cell("%sessions list")
from IPython.core.oinspect import getdoc
found["help"] = getdoc(shell.find_line_magic("agent"))
from pseudoclaude_nb.magics import current_agent
found["session"] = current_agent(shell).session.id
with open(sys.argv[1], "w", encoding="utf-8") as out:
    json.dump(found, out)
"""


def _heavy(modules: list[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


@pytest.fixture(scope="module")
def fresh_session(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """One fresh interpreter through load_ext, two cells, two runs and %sessions."""
    tmp = tmp_path_factory.mktemp("startup")
    workspace = tmp / "ws"
    workspace.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(PYTHONPATH=str(ROOT), PSEUDOCLAUDE_HOME=str(tmp / "home"), PSEUDOCLAUDE_DEMO_PACE="0")
    env.pop("JPY_SESSION_NAME", None)
    result_file = tmp / "found.json"
    done = subprocess.run(
        [sys.executable, "-c", SESSION, str(result_file)],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(result_file.read_text(encoding="utf-8")), done.stdout


def test_load_ext_imports_none_of_the_heavy_libraries(fresh_session: tuple[dict, str]) -> None:
    found, _ = fresh_session
    assert _heavy(found["load_ext"]) == []


def test_load_ext_imports_only_the_registering_part_of_the_package(fresh_session: tuple[dict, str]) -> None:
    found, _ = fresh_session
    own = {m for m in found["load_ext"] if m.split(".")[0] == "pseudoclaude_nb"}
    assert own - AT_LOAD == set(), "imported by %load_ext: the agent's world belongs to the first magic call"


def test_recording_cells_does_not_load_the_agent(fresh_session: tuple[dict, str]) -> None:
    found, _ = fresh_session
    assert "pseudoclaude_nb.agent" not in found["cells"]
    assert "pseudoclaude_nb.providers" not in found["cells"]
    assert _heavy(found["cells"]) == ["ahocorasick_rs", "ahocorasick_rs.ahocorasick_rs"]  # the redactor


def test_the_first_runs_work_after_a_lean_load(fresh_session: tuple[dict, str]) -> None:
    found, out = fresh_session
    offline = out.split("=== offline", 1)[1].split("=== demo", 1)[0]
    demo = out.split("=== demo", 1)[1].split("=== sessions", 1)[0]
    listed = out.split("=== sessions", 1)[1]
    assert "ZeroDivisionError" in offline
    assert "✓ done" in demo
    assert found["session"] in listed
    assert "pseudoclaude_nb.agent" in found["first_agent"]


def test_a_terminal_run_loads_no_widgets_mcp_or_sdk(fresh_session: tuple[dict, str]) -> None:
    """No widget is shown in a terminal; no MCP server is configured; the demo needs no SDK."""
    found, _ = fresh_session
    loaded = set(found["first_agent"])
    assert {"ipywidgets", "mcp", "anthropic", "openai"} & loaded == set()


def test_help_shows_the_real_magic_with_every_option(fresh_session: tuple[dict, str]) -> None:
    found, _ = fresh_session
    assert "Run the coding agent on PROMPT" in found["help"]
    assert "--provider" in found["help"] and "--max-steps" in found["help"]


@pytest.mark.parametrize("class_name", sorted(deferred.MAGICS))
def test_the_deferred_table_matches_the_magics_classes(class_name: str) -> None:
    """``%load_ext`` registers names from the table without importing the classes: it must
    say what each class has, and which magic takes its line as typed."""
    from IPython.core.magic import MAGIC_NO_VAR_EXPAND_ATTR

    cls = deferred.magics_class(class_name)
    _, kinds = deferred.MAGICS[class_name]
    real = {kind: tuple(sorted(names)) for kind, names in cls.magics.items() if names}
    assert {kind: tuple(sorted(names)) for kind, names in kinds.items()} == real
    for kind, names in cls.magics.items():
        for name, method in names.items():
            as_typed = getattr(getattr(cls, method), MAGIC_NO_VAR_EXPAND_ATTR, False)
            assert as_typed == (name in deferred.AS_TYPED), f"%{name} ({kind})"
