"""``envguard`` as a process: what a snapshot loads (its speed is what it does not import),
and the one error line when stdout cannot be written. The plain forms of ``snapshot`` and
``diff`` once had a second parser that skipped click; bench/ measured what it saved (99 against
118 ms for ``snapshot -q`` of this checkout's venv, 106 against 129 ms for ``diff -q``) and it
went (#22): 20 ms no one sees, for a parser and 250 lines of tests kept in step with click."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_venv


@pytest.fixture(scope="module")
def small_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = make_venv(tmp_path_factory.mktemp("entry") / "train")
    site = next(venv.glob("lib/python*/site-packages"))
    info = site / "demo_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo_pkg\nVersion: 1.0\n")
    (info / "INSTALLER").write_text("uv\n")
    return venv


def test_a_snapshot_leaves_the_engines_unimported(small_venv: Path, tmp_path: Path) -> None:
    """No GitPython outside a repository, none of the drift rules, restore, preflight, fleet."""
    listing = tmp_path / "modules.txt"
    code = (
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(listing)!r}, 'w').write('\\n'.join(sys.modules)))\n"
        "from envguard.__main__ import main\n"
        "main()\n"
    )
    args = ["snapshot", "--venv", str(small_venv), "--no-default-caches", "-q"]
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    loaded = set(listing.read_text().split())
    assert "envguard.snapshot" in loaded  # it did run the snapshot
    for heavy in (
        "git", "psutil", "envguard.drift.packages", "envguard.restore", "envguard.preflight",
        "envguard.fleet", "envguard.results.diff",
    ):  # fmt: skip
        assert heavy not in loaded, heavy


def test_version_is_answered_before_click(tmp_path: Path) -> None:
    code = "import sys\nfrom envguard.__main__ import main\nmain()\nprint('click' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code, "--version"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout.split()[-1] == "False", done.stdout


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("as_json", [False, True])
def test_a_stdout_that_cannot_be_written_is_one_line(
    as_json: bool, small_venv: Path, tmp_path: Path
) -> None:
    args = ["snapshot", "--venv", str(small_venv), "--no-default-caches", "-o", "x.toml"]
    with Path("/dev/full").open("w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "envguard", *args, *(["--json"] if as_json else [])],
            cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
    assert (done.returncode, done.stderr) == (2, "error: No space left on device\n")
