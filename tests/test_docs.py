"""The documentation site builds with --strict, and the README's links into it hold.

The README is one screen; everything else is the MkDocs site in docs/. A broken link, a
missing anchor or a page left out of the navigation fails the strict build, and a README link
to a page or heading that does not exist fails here (MkDocs does not read the README).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README_LINK = re.compile(r"\]\((docs/[^)\s]+)\)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"
    return out


def test_the_site_builds_strictly(site: Path) -> None:
    assert (site / "index.html").is_file()
    # Every page of docs/ is in the site (use_directory_urls: steering.md -> steering/index.html).
    for page in (ROOT / "docs").glob("*.md"):
        built = site / "index.html" if page.stem == "index" else site / page.stem / "index.html"
        assert built.is_file(), f"{page.name} was not built"


def _anchors(html: str) -> set[str]:
    return set(re.findall(r'\sid="([^"]+)"', html))


def test_readme_links_into_docs_name_pages_and_headings_that_exist(site: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = README_LINK.findall(readme)
    assert len(links) >= 5, "the README should point into docs/"
    broken = []
    for link in links:
        target, _, anchor = link.partition("#")
        path = ROOT / target
        if not path.exists():
            broken.append(f"{link}: no file {target}")
            continue
        if anchor:
            if path.suffix != ".md":
                broken.append(f"{link}: an anchor into a file that is not a page")
                continue
            stem = path.stem
            built = site / "index.html" if stem == "index" else site / stem / "index.html"
            if anchor not in _anchors(built.read_text(encoding="utf-8")):
                broken.append(f"{link}: no heading #{anchor} in {target}")
    assert not broken, "\n".join(broken)


def test_every_setting_has_its_row_on_the_configuration_page() -> None:
    # The audit found confirm_compaction (used on the steering page) and confirm_default missing.
    from pseudoclaude_nb.config import PseudoClaude

    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(\w+)` \|", page, re.MULTILINE))
    settings = set(PseudoClaude.class_own_traits(config=True))
    assert sorted(settings - rows) == [], "settings with no row in docs/configuration.md"
    assert sorted(rows - settings) == [], "rows of docs/configuration.md that are no setting"


def test_the_layout_table_names_every_module_and_folder_of_the_package() -> None:
    # issue 45: the table named 9 of the 20 modules at the package's root.
    page = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    table = page[page.index("| where | what |") : page.index("Beside the package:")]
    package = ROOT / "pseudoclaude_nb"
    modules = sorted(p.stem for p in package.glob("*.py") if p.stem != "__init__")
    folders = sorted(p.name for p in package.iterdir() if (p / "__init__.py").exists())
    assert [m for m in modules if f"`{m}`" not in table] == []
    assert [f for f in folders if f"`{f}/`" not in table] == []
