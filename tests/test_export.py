"""export --format pylock: a PEP 751 file that uv pip sync installs, offline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envguard import lockfile, snapshot
from envguard.demo.incident import known_good
from tests.conftest import make_venv, uv_bin, uv_install
from tests.test_cli import cli

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


@pytest.mark.slow
def test_pylock_installs_with_uv_and_carries_envguard_facts(tmp_path: Path) -> None:
    venv = make_venv(tmp_path / "venv")
    house = tmp_path / "house"
    uv_install(venv, house, *known_good(house))
    lock = tmp_path / "train.envguard.toml"
    lockfile.write(lock, snapshot.take(venv, with_code=False, name="train"))
    out = tmp_path / "pylock.toml"
    done = cli("export", str(lock), "-o", str(out), "--find-links", str(house), "--offline")
    assert done.returncode == 0, done.stderr
    doc = tomllib.loads(out.read_text())
    assert doc["lock-version"] == "1.0"
    torch = next(p for p in doc["packages"] if p["name"] == "torch")
    assert torch["version"] == "2.11.0+cu128" and torch["wheels"][0]["hashes"]["sha256"]
    # a wheelhouse's torch: where it came from is unknown, and TOML has no null
    assert doc["tool"]["envguard"]["torch"]["variant"] == "cu128"
    assert "index" not in doc["tool"]["envguard"]["torch"]
    assert doc["tool"]["envguard"]["cuda"] == {
        "cudart": "12.8",
        "cudnn": "9.10.2",
        "nccl": "2.27.3",
    }
    fresh = make_venv(tmp_path / "fresh")
    subprocess.run(
        [
            uv_bin(),
            "pip",
            "sync",
            "-q",
            "--python",
            str(fresh / "bin" / "python"),
            "--offline",
            str(out),
        ],
        check=True,
    )
    again = snapshot.take(fresh, with_code=False)
    assert again.torch and again.torch.version == "2.11.0+cu128"
    assert {d.name: d.version for d in again.packages} == {
        d.name: d.version for d in lockfile.read(lock).packages
    }


def test_without_wheel_sources_it_says_what_to_pass(tmp_path: Path) -> None:
    lock = tmp_path / "l.envguard.toml"
    lockfile.write(lock, snapshot.take(make_venv(tmp_path / "v"), with_code=False))
    done = cli("export", str(lock), "-o", str(tmp_path / "pylock.toml"))
    assert done.returncode == 2 and "pass --resolve" in done.stderr
    bad = cli("export", str(lock), "-o", str(tmp_path / "out.toml"), "--offline")
    assert bad.returncode == 2 and "pylock.toml or pylock.NAME.toml" in bad.stderr
