"""Running ``python -m pseudoclaude_nb demo`` as a user does: a subprocess, paced at full speed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_demo(cwd: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The demo with ``args`` in ``cwd``; it must exit 0 (its output's tail is the failure's text)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pseudoclaude_nb", "demo", *args],
        cwd=cwd,
        env={**env, "PSEUDOCLAUDE_DEMO_PACE": "0"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc
