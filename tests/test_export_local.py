"""export never writes a path of the machine it ran on for a package installed from a local
folder (a teammate's checkout, ``pip install -e .``): a pylock's ``directory`` names that
folder, which no runner has. It refuses in one line naming the package and how to ship it (a
wheel, passed with --find-links), exit 2; given that wheel, the pylock installs it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envguard.demo.wheels import build_wheel
from tests.conftest import make_venv, uv_bin
from tests.project import Project, invoke
from tests.test_hostile_lock import _BACKEND, _PYPROJECT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - 3.10 only
    import tomli as tomllib


def _install_folder(project: Project, root: Path, *, editable: bool) -> Path:
    """A teammate's project ``legit`` 1.0, installed from its folder, then the lock taken."""
    legit = root / "legit"
    legit.mkdir(parents=True)
    (legit / "pyproject.toml").write_text(_PYPROJECT)
    (legit / "backend.py").write_text(_BACKEND)
    python = str(project.venv / "bin" / "python")
    subprocess.run(
        [uv_bin(), "pip", "install", "-q", "--offline", "--no-index", "--python", python,
         *(["-e"] if editable else []), str(legit)], check=True,
    )  # fmt: skip
    project.snapshot()
    return legit


def _export(project: Project, out: Path, *links: Path) -> tuple[int, str, str]:
    flags = [f"--find-links={p}" for p in (project.house, *links)]
    return invoke("export", str(project.lock), *flags, "--offline", "-o", str(out))


def _refused(done: tuple[int, str, str], out: Path) -> str:
    code, stdout, err = done
    assert code == 2 and stdout == "", (code, stdout, err)
    assert err.strip().count("\n") == 0 and "Traceback" not in err, err
    assert not out.exists()
    return err


@pytest.mark.parametrize("editable", [True, False], ids=["editable", "folder"])
def test_a_package_from_a_local_folder_is_refused(
    project: Project, tmp_path: Path, editable: bool
) -> None:
    legit = _install_folder(project, tmp_path / "team", editable=editable)
    out = tmp_path / "pylock.toml"
    err = _refused(_export(project, out), out)
    assert "legit 1.0" in err and str(legit) in err
    assert "pip wheel" in err and "--find-links" in err


def test_on_a_runner_without_the_folder_the_refusal_is_the_same(
    project: Project, tmp_path: Path
) -> None:
    """The lock exported elsewhere (a CI runner): the folder is not there either."""
    legit = _install_folder(project, tmp_path / "team", editable=True)
    shutil.rmtree(legit)
    out = tmp_path / "pylock.toml"
    err = _refused(_export(project, out), out)
    assert "legit 1.0" in err and "--find-links" in err and "no longer exists" not in err


@pytest.mark.slow
def test_a_wheel_in_find_links_ships_it(project: Project, tmp_path: Path) -> None:
    _install_folder(project, tmp_path / "team", editable=True)
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "legit", "1.0", files={"legit/__init__.py": ""})
    out = tmp_path / "pylock.toml"
    code, _, err = _export(project, out, wheels)
    assert code == 0, err
    doc = tomllib.loads(out.read_text())
    legit = next(p for p in doc["packages"] if p["name"] == "legit")
    assert "directory" not in legit and str(tmp_path / "team") not in out.read_text()
    fresh = make_venv(tmp_path / "fresh")
    subprocess.run([uv_bin(), "pip", "sync", "-q", "--offline", "--python",
                    str(fresh / "bin" / "python"), str(out)], check=True)  # fmt: skip
    assert any((fresh / "lib").glob("python*/site-packages/legit-1.0.dist-info"))


def test_a_wheel_of_another_version_does_not_ship_it(project: Project, tmp_path: Path) -> None:
    _install_folder(project, tmp_path / "team", editable=False)
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "legit", "2.0", files={"legit/__init__.py": ""})
    out = tmp_path / "pylock.toml"
    err = _refused(_export(project, out, wheels), out)
    assert "legit 1.0" in err and str(wheels) in err
