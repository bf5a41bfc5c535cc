"""Types and lint in the test command: mypy over the package with pyproject's ``[tool.mypy]``
(default mode everywhere, strict on messages, conversation, workspace, safeio, session,
history and context), and every broad except saying why (ruff's BLE; ``test_structure``
runs ruff itself).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10: mypy's own dependency reads TOML there
    import tomli as tomllib

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "pseudoclaude_nb"
STRICT_CORE = {
    "pseudoclaude_nb.messages",
    "pseudoclaude_nb.conversation",
    "pseudoclaude_nb.safeio",  # moved out of session/ by issue 33, still strict
    "pseudoclaude_nb.workspace",
    "pseudoclaude_nb.session.*",
    "pseudoclaude_nb.history.*",
    "pseudoclaude_nb.context.*",
}


def test_the_package_type_checks() -> None:
    # The config is pyproject's (found from cwd); the cache is mypy's own, so a second run
    # checks only what changed.
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--show-error-codes"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, f"mypy found problems:\n{proc.stdout[-6000:]}{proc.stderr[-3000:]}"


def test_the_core_is_checked_strictly() -> None:
    """The strict override names the core, with the flags of --strict (``strict = true`` is
    global-only: in an override it would make every module strict, or none)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["files"] == ["pseudoclaude_nb"]
    assert not config.get("ignore_missing_imports"), "stub-less libraries are named one by one"
    (strict,) = [o for o in config["overrides"] if set(o["module"]) == STRICT_CORE]
    for flag in (
        "disallow_untyped_defs",
        "disallow_incomplete_defs",
        "disallow_untyped_calls",
        "disallow_any_generics",
        "check_untyped_defs",
        "warn_return_any",
        "strict_equality",
    ):
        assert strict.get(flag) is True, flag
    assert strict.get("implicit_reexport") is False


def test_every_broad_except_says_why() -> None:
    """``# noqa: BLE001`` silences the linter only with a reason a reader sees next to it."""
    bare = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found = re.search(r"noqa: BLE001(.*)$", line)
            if found and len(re.sub(r"[\s,:\-–—]|S110", "", found.group(1))) < 10:
                bare.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not bare, "broad excepts without a reason:\n" + "\n".join(bare)
