"""The documentation: the MkDocs site builds with --strict (a broken link or anchor, or a page
left out of the navigation, fails), and the README stays a short page whose links resolve."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import unavailable

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "docs" / "mkdocs.yml"
README_MAX_LINES = 200
# Markdown links and images with a relative target: [text](target) or [text](target#anchor).
RELATIVE_LINK = re.compile(r"\]\((?![a-z]+:|#)([^)#\s]+)(?:#[^)\s]*)?\)")


def test_site_builds_strict(tmp_path: Path) -> None:
    for module in ("mkdocs", "material"):
        if importlib.util.find_spec(module) is None:
            unavailable(f"{module} is not installed (pip install -e '.[test]')")
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(CONFIG), "-d", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert (site / "index.html").is_file()


def test_readme_is_short_and_its_links_resolve() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    targets = RELATIVE_LINK.findall(text)
    assert targets, "the README links into the docs"
    missing = [target for target in targets if not (REPO / target).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
