"""The pytest markers of the test tiers are applied by file (tests/conftest.py).

Collected in a subprocess as a developer would select them, on a few files of each kind.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
FILES = [
    "tests/test_browser.py",  # browser, slow
    "tests/test_notebook_kernel.py",  # kernel (imports nbclient), slow
    "tests/test_steer_cells.py",  # kernel (imports nbclient inside a test), slow
    "tests/test_cli.py",  # unit, slow
    "tests/test_messages.py",  # unit
    "tests/test_docs.py",  # unit
]


def collected(marks: str) -> set[str]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            marks,
            *FILES,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 5), done.stdout[-3000:] + done.stderr[-3000:]
    return {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}


def test_each_file_lands_in_its_tiers() -> None:
    assert collected("browser") == {"tests/test_browser.py"}
    assert collected("kernel") == {"tests/test_notebook_kernel.py", "tests/test_steer_cells.py"}
    # unit is everything without a kernel or a browser; slow comes on top of it, by file.
    assert collected("unit and slow") == {"tests/test_cli.py"}


def test_the_quick_tier_leaves_out_slow_and_browser_tests() -> None:
    assert collected("not slow and not browser") == {"tests/test_messages.py", "tests/test_docs.py"}
