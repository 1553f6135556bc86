"""``run`` and ``preflight`` never let an install land outside the target venv.

A venv uv made has no pip: under PATH alone, ``pip`` there is the next one on PATH (envguard's
own venv's, the system's). Every form of pip runs as the target's own, or is refused in one
line naming the command that works. Fake installers earlier on PATH write a marker when run:
an empty marker proves nothing ran outside the target.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from envguard import journal
from tests.conftest import PipVenv, make_venv, offline_install, uv_bin
from tests.project import invoke
from tests.test_cli import envguard

FAKES = ("pip", "pip3", "pip3.11", "pip3.99", "python3.99")
FROM_HOUSE = ("--no-index", "--find-links")


@pytest.fixture
def marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Installers of another environment, first on PATH; each appends its argv to the marker."""
    marker = tmp_path / "ran-outside"
    bin_dir = tmp_path / "elsewhere" / "bin"
    bin_dir.mkdir(parents=True)
    for name in FAKES:
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\n')
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return marker


@pytest.fixture
def uv_venv(tmp_path: Path) -> Path:
    return make_venv(tmp_path / "venv")


@pytest.fixture
def pip_venv(tmp_path: Path, pip_venv_at: PipVenv) -> Path:
    return pip_venv_at(tmp_path / "pip-venv")  # python -m venv: ships pip, offline


def _has(venv: Path, name: str) -> bool:
    return any(venv.glob(f"lib/python*/site-packages/{name}-*.dist-info"))


PIP_FORMS = [
    ["pip"],
    ["pip3"],
    ["pip3.11"],
    ["pip3.99"],
    ["python", "-m", "pip"],
    ["python3", "-m", "pip"],
    ["python3.99", "-m", "pip"],
]


@pytest.mark.parametrize("pip", PIP_FORMS, ids=" ".join)
@pytest.mark.parametrize("command", ["run", "preflight"])
def test_pip_in_a_venv_without_pip_is_refused(
    command: str, pip: list[str], uv_venv: Path, house: Path, marker: Path
) -> None:
    code, _, err = invoke(
        command, "--venv", str(uv_venv), "--", *pip, "install", *FROM_HOUSE, str(house), "harmless"
    )
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"envguard {command} --venv {uv_venv} -- uv pip install --no-index" in err
    assert f"{uv_venv}/bin/python -m ensurepip" in err
    assert not marker.exists() and not _journalled()
    assert not _has(uv_venv, "harmless")


def test_the_uv_pip_it_names_works(uv_venv: Path, house: Path, marker: Path) -> None:
    code, _, err = invoke(
        "run", "--venv", str(uv_venv), "--", "pip", "install", *FROM_HOUSE, str(house), "harmless"
    )
    assert code == 2
    works = shlex.split(err.split("`")[-4])  # the first command of the two named last
    assert works == [
        "envguard", "run", "--venv", str(uv_venv), "--",
        "uv", "pip", "install", *FROM_HOUSE, str(house), "harmless",
    ]  # fmt: skip
    code, _, err = invoke(*works[1:])
    assert code == 0, err
    assert _has(uv_venv, "harmless") and not marker.exists()


@pytest.mark.slow
@pytest.mark.parametrize("pip", PIP_FORMS, ids=" ".join)
def test_any_pip_is_the_venvs_own(
    pip: list[str], pip_venv: Path, house: Path, marker: Path
) -> None:
    code, _, err = invoke(
        "run", "--venv", str(pip_venv), "--", *pip, "install", "-q", *FROM_HOUSE, str(house),
        "harmless",
    )  # fmt: skip
    assert code == 0, err
    assert _has(pip_venv, "harmless") and not marker.exists()
    (entry,) = journal.read(journal.path_for(Path("lockfiles/pip-venv.envguard.toml")))
    assert entry.command[: len(pip)] == tuple(pip)  # the journal keeps what was typed
    assert any(m.name == "harmless" for m in entry.added)


def _fake_venv(root: Path, marker: Path) -> Path:
    """Another venv, whose pip and python are fakes that write the marker."""
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for name in ("pip", "python"):
        (root / "bin" / name).symlink_to(marker.parent / "elsewhere" / "bin" / "pip")
    return root


def _journalled() -> list[Path]:
    return sorted(Path("lockfiles").glob("*journal*"))


@pytest.mark.parametrize("form", ["pip", "python -m pip", "bare"])
def test_another_environments_pip_by_path_is_refused(
    form: str, tmp_path: Path, pip_venv: Path, marker: Path
) -> None:
    other = _fake_venv(tmp_path / "other", marker)
    exe = {
        "pip": [str(other / "bin/pip")],
        "python -m pip": [str(other / "bin/python"), "-m", "pip"],
        "bare": [str(tmp_path / "elsewhere/bin/pip")],  # no venv at all
    }[form]
    code, _, err = invoke("run", "--venv", str(pip_venv), "--", *exe, "install", "harmless")
    assert code == 2, err
    assert err.count("\n") == 1 and f"not {pip_venv}'s" in err
    assert f"envguard run --venv {pip_venv} -- pip install harmless" in err
    assert not marker.exists() and not _journalled()


@pytest.mark.slow
def test_the_venvs_own_pip_by_path_runs(pip_venv: Path, house: Path, marker: Path) -> None:
    pip = os.path.relpath(pip_venv / "bin" / "pip")  # as typed from the project's root
    code, _, err = invoke(
        "run", "--venv", str(pip_venv), "--", pip, "install", "-q", *FROM_HOUSE, str(house),
        "harmless",
    )  # fmt: skip
    assert code == 0, err
    assert _has(pip_venv, "harmless") and not marker.exists()


@pytest.mark.parametrize(
    "flags",
    [
        ["--target", "{tmp}/t"],
        ["--prefix={tmp}/t"],
        ["--root", "{tmp}/t"],
        ["--user"],
        ["--python", "{other}/bin/python"],
    ],
    ids=lambda f: f[0].split("=")[0],
)
@pytest.mark.parametrize("installer", [["pip"], ["uv", "pip"]])
def test_flags_that_install_elsewhere_are_refused(
    installer: list[str], flags: list[str], tmp_path: Path, pip_venv: Path, house: Path
) -> None:
    other = make_venv(tmp_path / "other")
    given = [f.format(tmp=tmp_path, other=other) for f in flags]
    code, _, err = invoke(
        "run", "--venv", str(pip_venv), "--", *installer, "install", *given, *FROM_HOUSE,
        str(house), "harmless",
    )  # fmt: skip
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"`{given[0].split('=')[0]}" in err and "instead" in err
    assert not (tmp_path / "t").exists() and not _has(other, "harmless")
    assert not _has(pip_venv, "harmless") and not _journalled()


def test_uv_pip_lands_in_the_target_whatever_the_shell_says(
    tmp_path: Path, uv_venv: Path, house: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = make_venv(tmp_path / "other")
    # another venv activated, and uv told to use it: envguard run --venv still means uv_venv
    monkeypatch.setenv("VIRTUAL_ENV", str(other))
    monkeypatch.setenv("UV_PYTHON", str(other / "bin" / "python"))
    code, _, err = invoke("run", "--venv", str(uv_venv), "--", *offline_install(house, "harmless"))
    assert code == 0, err
    assert _has(uv_venv, "harmless") and not _has(other, "harmless")


@pytest.mark.slow
@pytest.mark.parametrize("variable", ["PIP_PYTHON", "PIP_TARGET", "PIP_PREFIX"])
def test_pip_lands_in_the_target_whatever_the_shell_says(
    variable: str, tmp_path: Path, pip_venv: Path, house: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = make_venv(tmp_path / "other")
    value = str(other / "bin" / "python") if variable == "PIP_PYTHON" else str(other)
    monkeypatch.setenv(variable, value)
    code, _, err = invoke(
        "run", "--venv", str(pip_venv), "--", "pip", "install", "-q", *FROM_HOUSE, str(house),
        "harmless",
    )  # fmt: skip
    assert code == 0, err
    assert _has(pip_venv, "harmless") and not any(other.rglob("harmless*"))


def test_uv_pip_names_its_venv_and_it_is_the_target(uv_venv: Path, house: Path) -> None:
    python = str(uv_venv / "bin" / "python")
    code, _, err = invoke(
        "run", "--venv", str(uv_venv), "--", *offline_install(house, "--python", python, "harmless")
    )
    assert code == 0, err
    assert _has(uv_venv, "harmless")


def test_uv_without_uv_on_path_is_envguards(
    uv_venv: Path, house: Path, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # only the fake installers and the system's tools: no uv anywhere on PATH
    monkeypatch.setenv("PATH", f"{marker.parent}/elsewhere/bin{os.pathsep}/usr/bin:/bin")
    code, _, err = invoke(
        "run", "--venv", str(uv_venv), "--", *offline_install(house, "harmless", uv="uv")
    )
    assert code == 0, err
    assert _has(uv_venv, "harmless")


def test_envguards_own_venv_on_path_gets_nothing(
    uv_venv: Path, pip_venv: Path, house: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """envguard installed in a venv of its own, activated: its bin, and so its pip, on PATH."""
    own = pip_venv  # a venv with a real pip, standing for envguard's
    monkeypatch.setenv("PATH", f"{own}/bin{os.pathsep}{os.environ['PATH']}")
    for pip in (["pip"], ["pip3"], ["python3", "-m", "pip"]):
        code, _, err = invoke(
            "run", "--venv", str(uv_venv), "--", *pip, "install", *FROM_HOUSE, str(house),
            "harmless",
        )  # fmt: skip
        assert code == 2, (pip, err)
    assert not _has(own, "harmless") and not _has(uv_venv, "harmless")


def test_uv_pip_lands_in_the_target_whatever_uvs_config_says(
    tmp_path: Path, uv_venv: Path, house: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A uv.toml's [pip] python (or system = true) beats VIRTUAL_ENV: run names the venv."""
    monkeypatch.delenv("UV_NO_CONFIG")  # the session's guard against the machine's uv.toml
    other = make_venv(tmp_path / "other")
    Path("uv.toml").write_text(f'[pip]\npython = "{other}/bin/python"\n')
    code, _, err = invoke("run", "--venv", str(uv_venv), "--", *offline_install(house, "harmless"))
    assert code == 0, err
    assert _has(uv_venv, "harmless") and not _has(other, "harmless")


@pytest.mark.slow
def test_the_refusal_is_one_line_from_the_command_line(
    uv_venv: Path, marker: Path, tmp_path: Path
) -> None:
    done = envguard("run", "--venv", str(uv_venv), "--", "pip", "install", "harmless", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "uv pip install harmless" in done.stderr
    assert not marker.exists()


@pytest.mark.slow
def test_pip_of_the_base_interpreter_installs_into_a_system_site_packages_venv(
    tmp_path: Path, house: Path, marker: Path
) -> None:
    """An NGC-style venv: no pip of its own, but its python imports the base's, and
    ``python -m pip`` there installs into the venv. That pip is the venv's."""
    venv = tmp_path / "ngc"
    subprocess.run(
        [uv_bin(), "venv", "-q", "--system-site-packages", "--python", sys.executable, str(venv)],
        check=True,
    )
    base_pip = subprocess.run([str(venv / "bin/python"), "-c", "import pip"], check=False)
    if base_pip.returncode != 0:
        pytest.skip("the base interpreter has no pip")
    code, _, err = invoke(
        "run", "--venv", str(venv), "--", "pip", "install", "-q", *FROM_HOUSE, str(house),
        "harmless",
    )  # fmt: skip
    assert code == 0, err
    assert _has(venv, "harmless") and not marker.exists()


def test_a_flag_refused_in_a_venv_without_pip_names_uv(uv_venv: Path, marker: Path) -> None:
    code, _, err = invoke("run", "--venv", str(uv_venv), "--", "pip", "install", "--user", "x")
    assert code == 2 and "`--user` installs outside" in err
    assert f"`envguard run --venv {uv_venv} -- uv pip install x`" in err
    assert not marker.exists()
