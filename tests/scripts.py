"""Helpers shared by tests: scripted-provider scripts (data, not fake models) and magics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def turn(
    text: str = "", *calls: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str]
) -> dict[str, Any]:
    tool_calls = []
    for call in calls:
        entry: dict[str, Any] = {"name": call[0], "arguments": call[1]}
        if len(call) > 2:
            entry["id"] = call[2]  # type: ignore[misc]
        tool_calls.append(entry)
    return {"text": text, "tool_calls": tool_calls}


def script(*turns: dict[str, Any], context_window: int = 200_000, **extra: Any) -> dict[str, Any]:
    return {"model": "scripted-test", "context_window": context_window, "turns": list(turns), **extra}


def save_script(path: Path, *turns: dict[str, Any], **extra: Any) -> Path:
    """Write ``script(*turns, **extra)`` to ``path`` as JSON; returns the path."""
    path.write_text(json.dumps(script(*turns, **extra)), encoding="utf-8")
    return path


def write_script(workspace: Path, name: str, *turns: dict[str, Any], **extra: Any) -> str:
    """Save a script as ``<name>.json`` beside the workspace (not a file the agent sees); its path."""
    return str(save_script(workspace.parent / f"{name}.json", *turns, **extra))


def run_magic(ip: Any, line: str, cell: str | None = None) -> str:
    """Run ``%line`` (or ``%%line`` with ``cell``) in the shell; return what it printed."""
    from IPython.utils.capture import capture_output

    name, _, rest = line.partition(" ")
    with capture_output() as out:
        if cell is None:
            ip.run_line_magic(name, rest)
        else:
            ip.run_cell_magic(name, rest, cell)
    return out.stdout


def scripted_agent(workspace: Path, script_path: str = "", **settings: Any) -> Any:
    """An ``Agent`` on the scripted provider in ``workspace``: tools allowed, fsync off."""
    from pseudoclaude_nb.agent import Agent
    from pseudoclaude_nb.config import PseudoClaude

    config: dict[str, Any] = dict(
        workspace=str(workspace), provider="scripted", script=script_path, permission_mode="auto", fsync=False
    )
    config.update(settings)
    return Agent(PseudoClaude(**config))


def read_log(session_dir: Path) -> list[dict[str, Any]]:
    """Every readable entry of a session's log, in order."""
    text = (Path(session_dir) / "conversation.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]
