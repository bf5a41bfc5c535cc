"""Structural rules that keep the code base honest: lint, and a core free of IPython."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "pseudoclaude_nb"
# Everything except the IPython face (magics, widgets) and the terminal entry point.
UI_PARTS = {"magics", "widgets", "cli", "__main__"}


def core_modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        if rel.parts[0] in UI_PARTS:
            continue
        parts = [p for p in rel.parts if p != "__init__"]
        names.append(".".join(["pseudoclaude_nb", *parts]))
    return names


def test_core_never_imports_ipython_or_widgets() -> None:
    modules = core_modules()
    assert "pseudoclaude_nb.runner" in modules and "pseudoclaude_nb.session.writer" in modules
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('IPython', 'ipywidgets', 'ipykernel'))\n"
        "print(','.join(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "", f"core modules pulled in: {proc.stdout.strip()}"


def test_ruff_is_clean() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "pseudoclaude_nb", "tests", "bench"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_ruff_format_leaves_every_file_as_it_is() -> None:
    # issue 33: one format, applied and checked (a diff here means `ruff format` was not run)
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "pseudoclaude_nb", "tests", "bench"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
