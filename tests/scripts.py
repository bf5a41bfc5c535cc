"""Small scripted-provider scripts shared by tests (data, not fake models)."""

from __future__ import annotations

from typing import Any


def turn(text: str = "", *calls: tuple[str, dict[str, Any]] | tuple[str, dict[str, Any], str]) -> dict[str, Any]:
    tool_calls = []
    for call in calls:
        entry: dict[str, Any] = {"name": call[0], "arguments": call[1]}
        if len(call) > 2:
            entry["id"] = call[2]  # type: ignore[misc]
        tool_calls.append(entry)
    return {"text": text, "tool_calls": tool_calls}


def script(*turns: dict[str, Any], context_window: int = 200_000, **extra: Any) -> dict[str, Any]:
    return {"model": "scripted-test", "context_window": context_window, "turns": list(turns), **extra}
