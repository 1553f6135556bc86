"""How envguard is installed, as every page says it: the distribution is envguard-ml (the
package index's ``envguard`` is another project, a .env checker), the command and the import
``envguard``. No page, recipe or error hint installs the index's ``envguard``."""

from __future__ import annotations

import re
import shlex
import zipfile
from pathlib import Path

import pytest

from tests.runner import ROOT, WHEEL, build_wheel

# every page a user copies an install line from: the README, docs/ and the CI recipes
PAGES = sorted(
    [ROOT / "README.md", *(p for p in (ROOT / "docs").rglob("*") if p.is_file())],
    key=str,
)
_INSTALL = re.compile(r"(?:pip|pipx|uv tool|uv pip) install ([^\n`]*)")


def _installed(line: str) -> list[str]:
    """The distributions an install line names (options, paths and URLs aside)."""
    try:
        words = shlex.split(line.split(" #", 1)[0].split(" && ", 1)[0])
    except ValueError:  # an unbalanced quote in prose
        words = line.split()
    return [w for w in words if not w.startswith(("-", ".", "/", "$")) and "/" not in w]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_installs_the_index_envguard(page: Path) -> None:
    for found in _INSTALL.finditer(page.read_text()):
        for name in _installed(found.group(1)):
            assert re.split(r"[\[<>=!~;]", name, maxsplit=1)[0] != "envguard", found.group(0)


def test_the_published_ways_are_documented() -> None:
    readme = (ROOT / "README.md").read_text()
    for line in (
        "pip install envguard-ml",
        "uv tool install envguard-ml",
        "pipx install envguard-ml",
    ):
        assert line in readme, line


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_wheel_named_is_the_one_this_checkout_builds(page: Path) -> None:
    for name in re.findall(r"envguard_ml-[^\s/'\"`\[\]]+\.whl", page.read_text()):
        assert name == WHEEL, f"{page.name}: {name}, but this checkout builds {WHEEL}"


@pytest.mark.slow
def test_the_wheel_is_envguard_ml_with_the_envguard_command(tmp_path: Path) -> None:
    with zipfile.ZipFile(build_wheel(tmp_path / "dist")) as whl:
        info = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        meta = whl.read(info).decode()
        points = whl.read(info.replace("METADATA", "entry_points.txt")).decode()
        assert "envguard/__init__.py" in whl.namelist()
    assert re.search(r"^Name: envguard-ml$", meta, flags=re.M)
    assert re.search(r"^Provides-Extra: mlflow$", meta, flags=re.M)
    assert "envguard = envguard.__main__:main" in points
