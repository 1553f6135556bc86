"""preflight with the real installers' dry runs; nothing is installed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.utils import canonicalize_name

from envguard import preflight
from envguard.demo.incident import known_good, newer_torch
from envguard.errors import EnvguardError
from tests.conftest import PipVenv, make_venv, offline_install, uv_install
from tests.test_cli import cli


@pytest.fixture
def house(tmp_path: Path) -> Path:
    house = tmp_path / "house"
    known_good(house)
    newer_torch(house)
    return house


def _torch(venv: Path) -> str:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_uv_dry_run_forecasts_the_torch_swap(tmp_path: Path, house: Path) -> None:
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, house, "torch==2.11.0+cu128")
    done = cli(
        "preflight",
        "--venv",
        str(venv),
        "--",
        *offline_install(house, "needs-new-torch"),
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "would replace torch 2.11.0+cu128 with 2.14.1+cu130 (CUDA 12.8 → 13.0)" in done.stdout
    assert _torch(venv) == "2.11.0+cu128"  # nothing was installed


@pytest.mark.slow
def test_pip_dry_run_names_the_requirement(
    tmp_path: Path, house: Path, pip_venv_at: PipVenv
) -> None:
    venv = pip_venv_at(tmp_path / "venv")  # python -m venv: ships pip, offline
    uv_install(venv, house, "torch==2.11.0+cu128")
    done = cli(
        "preflight",
        "--venv",
        str(venv),
        "--json",
        "--",
        "pip",
        "install",
        "--no-index",
        "--find-links",
        str(house),
        "needs-new-torch",
    )
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["kind"] == "preflight" and doc["exit_code"] == 1
    assert doc["result"]["reasons"] == [
        "would replace torch 2.11.0+cu128 with 2.14.1+cu130 (CUDA 12.8 → 13.0) because "
        "needs-new-torch 1.0 requires torch==2.14.1"
    ]
    torch = next(c for c in doc["result"]["changes"] if c["subject"] == "torch")
    assert torch["severity"] == "critical"
    assert _torch(venv) == "2.11.0+cu128"


def test_a_harmless_install_passes(tmp_path: Path, house: Path) -> None:
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, house, "torch==2.11.0+cu128")
    done = cli(
        "preflight",
        "--venv",
        str(venv),
        "--",
        *offline_install(house, "harmless", uv="uv"),
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["conda", "install", "torch"], "unknown installer 'conda'"),
        (["pip", "list"], "is not an install"),
        (["uv", "venv"], "is not an install"),
        (["python3", "-m", "pip", "freeze"], "is not an install"),
    ],
)
def test_bad_commands(argv: list[str], message: str, tmp_path: Path) -> None:
    with pytest.raises(EnvguardError, match=message):
        preflight.parse(argv)
    done = cli("preflight", "--venv", str(make_venv(tmp_path / "v")), "--", *argv)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_parse_forms() -> None:
    assert preflight.parse(["uv", "pip", "install", "x"]).installer == "uv"
    assert preflight.parse(["/usr/bin/pip3.12", "install", "-U", "x"]).args == ("-U", "x")
    assert preflight.parse(["python", "-m", "pip", "install", "x"]).installer == "pip"


NAMES = st.from_regex(r"[a-z][a-z0-9\-]{0,12}", fullmatch=True)
VERSIONS = st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,3}(\+cu1[0-9]{2})?", fullmatch=True)


@pytest.mark.slow
@given(st.lists(st.tuples(st.sampled_from("+-"), NAMES, VERSIONS), max_size=8))
def test_uv_dry_run_parser(lines: list[tuple[str, str, str]]) -> None:
    text = "Resolved 3 packages in 2ms\nWould install 1 package\n" + "".join(
        f" {sign} {name}=={version}\n" for sign, name, version in lines
    )
    planned = preflight._parse_uv(text)
    assert [(p.name, p.version) for p in planned] == [
        (canonicalize_name(name), version) for sign, name, version in lines if sign == "+"
    ]


@pytest.mark.slow
def test_the_shells_pip_settings_do_not_move_the_forecast(
    tmp_path: Path, house: Path, pip_venv_at: PipVenv
) -> None:
    """PIP_PYTHON (pip's --python) in the shell would forecast another venv, one that has
    the newer torch already: the forecast is of the venv checked, whatever the shell says."""
    venv = pip_venv_at(tmp_path / "venv")  # python -m venv: ships pip, offline
    uv_install(venv, house, "torch==2.11.0+cu128")
    other = make_venv(tmp_path / "other")
    uv_install(other, house, "torch==2.14.1")
    pip = ["pip", "install", "--no-index", "--find-links", str(house), "needs-new-torch"]
    done = cli(
        "preflight", "--venv", str(venv), "--", *pip, env={"PIP_PYTHON": str(other / "bin/python")}
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "would replace torch 2.11.0+cu128 with 2.14.1+cu130" in done.stdout


def test_the_plan_s_requirements_are_those_in_effect_with_the_extras_asked() -> None:
    """pip's report gives every Requires-Dist line and the extras the command asked for: the
    forecast ties packages by the lines in effect, as a snapshot of the result would."""
    from tests.factories import base

    planned = [
        preflight.Planned(
            name="vllm", version="0.33.0", requested=True, extras=("Audio",),
            requires=("fastapi[standard]>=0.1", "pandas; extra == 'bench'",
                      "torchaudio==2.11.0; extra == 'audio'", "pydantic-extra-types"),
        ),
        preflight.Planned(name="fastapi", version="0.136.0",
                          requires=('uvicorn; extra == "standard"', 'orjson; extra == "all"')),
    ]  # fmt: skip
    kept = {p.name: p.requires for p in preflight.in_effect(base(), planned)}
    assert kept == {
        "vllm": ("fastapi[standard]>=0.1", "torchaudio==2.11.0; extra == 'audio'",
                 "pydantic-extra-types"),
        "fastapi": ('uvicorn; extra == "standard"',),
    }  # fmt: skip
