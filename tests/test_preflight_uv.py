"""preflight through uv, whose plan says only names and versions: torch's CUDA build comes
from the nvidia wheels the venv will hold, and the forecast is the diff the install leaves.

A PyPI-style upgrade: torch 2.13.0 → 2.14.1 (METADATA without a label, version.py +cu130),
the CUDA runtime wheel staying as it is, torchvision and torchaudio new (#20).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from envguard import lockfile, preflight
from envguard.demo.incident import CU130, training_set
from envguard.demo.wheels import build_wheel, cudart_header, cudnn_header, torch_version_py
from envguard.model import CudaLibrary
from tests.conftest import PipVenv, make_venv, offline_install, uv_install
from tests.project import Key, invoke

UPGRADE = ("torch==2.14.1", "torchvision==0.29.2", "torchaudio==2.14.1")


def _extension(house: Path, name: str, version: str, requires: list[str]) -> None:
    """A PyPI-style torch extension: METADATA says ``version``, version.py ``+cu130``."""
    build_wheel(
        house,
        name,
        f"{version}+cu130",
        metadata_version=version,
        files={
            f"{name}/__init__.py": "",
            f"{name}/version.py": torch_version_py(f"{version}+cu130", "13.0", "c" * 40),
        },
        requires=requires,
    )


@pytest.fixture(scope="module")
def house(tmp_path_factory: pytest.TempPathFactory) -> Path:
    house = tmp_path_factory.mktemp("cu130-house")
    # the stack PyPI's 2.11.0 brings in the incident, under a torch of its own
    training_set(house, CU130, torch="2.13.0+cu130", metadata="2.13.0", transformers="5.8.1")
    build_wheel(
        house,
        "nvidia-cudnn-cu13",
        "9.20.0.48",
        files={"nvidia/cudnn/include/cudnn_version.h": cudnn_header(9, 20, 0)},
    )
    build_wheel(house, "triton", "3.7.0")
    # the same runtime wheel as 2.13.0's: uv's plan leaves it out
    _extension(
        house,
        "torch",
        "2.14.1",
        [
            "nvidia-cuda-runtime==13.0.96",
            "nvidia-cudnn-cu13==9.20.0.48",
            "nvidia-nccl-cu13==2.28.9",
            "triton==3.7.0",
        ],
    )
    # 2.13.0's very wheels: the plan holds torch alone
    _extension(house, "torch", "2.13.1", [*CU130.pins, "triton==3.6.0"])
    _extension(house, "torchvision", "0.29.2", ["torch==2.14.1", "numpy", "pillow"])
    _extension(house, "torchaudio", "2.14.1", ["torch==2.14.1"])
    build_wheel(house, "pillow", "12.0.0")
    build_wheel(house, "accelerate", "1.12.0", requires=["torch>=2.0", "numpy"])
    # a cu12 runtime left beside the cu13 one: which of the two a new torch takes is unknown
    build_wheel(
        house,
        "nvidia-cuda-runtime-cu12",
        "12.8.90",
        files={"nvidia/cuda_runtime/include/cuda_runtime_api.h": cudart_header(12080)},
    )
    # cu13's runtime under its deprecated name, beside nvidia-cuda-runtime: the same header
    for version, code in (("13.0.48", 13000), ("13.1.80", 13010)):
        build_wheel(
            house,
            "nvidia-cuda-runtime-cu13",
            version,
            files={"nvidia/cu13/include/cuda_runtime_api.h": cudart_header(code)},
        )
    return house


@pytest.fixture
def venv(tmp_path: Path, house: Path) -> Path:
    venv = make_venv(tmp_path / "venv")
    uv_install(venv, house, "torch==2.13.0", "transformers==5.8.1")
    return venv


def _json(command: str, *args: str) -> dict[str, Any]:
    code, out, err = invoke(command, "--json", *args)
    assert code in (0, 1), out + err
    doc: dict[str, Any] = json.loads(out)["result"]
    return doc


def _preflight(venv: Path, house: Path, *reqs: str) -> dict[str, Any]:
    return _json("preflight", "--venv", str(venv), "--", *offline_install(house, *reqs))


def _torch_reason(doc: dict[str, Any]) -> str:
    reason: str = next(r for r in doc["reasons"] if r.startswith("would replace torch "))
    return reason


def _torch(doc: dict[str, Any]) -> dict[str, str]:
    found: dict[str, str] = next(c for c in doc["changes"] if c["subject"] == "torch")
    return found


@pytest.mark.parametrize("torch", ["2.14.1", "2.13.1"])
def test_a_same_cuda_upgrade_keeps_its_cuda_build(venv: Path, house: Path, torch: str) -> None:
    """uv's plan has no requirements and no runtime wheel (it stays): the wheel that stays
    says the new torch is the cu130 build, as its version.py will."""
    doc = _preflight(venv, house, f"torch=={torch}")
    assert _torch_reason(doc) == f"would replace torch 2.13.0+cu130 with {torch}+cu130"
    change = _torch(doc)
    assert (change["old"], change["new"]) == ("2.13.0+cu130", f"{torch}+cu130")
    assert change["why"].startswith("another release, CUDA build 13.0:"), change["why"]


def test_the_wheels_an_install_brings_pick_the_runtime_that_stays(venv: Path, house: Path) -> None:
    """cu12 and cu13 runtimes both stay; the plan brings nvidia-cudnn-cu13 with torch: the
    cu13 one is torch's."""
    uv_install(venv, house, "nvidia-cuda-runtime-cu12==12.8.90")
    doc = _preflight(venv, house, "torch==2.14.1")
    assert _torch(doc)["new"] == "2.14.1+cu130"
    assert "CUDA runtime" not in {c["subject"] for c in doc["changes"]}


def test_a_build_that_cannot_be_known_is_unknown_never_cpu(venv: Path, house: Path) -> None:
    """cu12 and cu13 runtimes both stay and the plan holds torch alone: which CUDA the new
    torch is built for cannot be known. The forecast says unknown, once, and never cpu."""
    uv_install(venv, house, "nvidia-cuda-runtime-cu12==12.8.90")
    doc = _preflight(venv, house, "torch==2.13.1")
    change = _torch(doc)
    assert change["new"] == "2.13.1"
    assert "CUDA build 13.0 → unknown:" in change["why"], change["why"]
    assert doc["reasons"] == ["would replace torch 2.13.0+cu130 with 2.13.1"]
    code, out, _ = invoke(
        "preflight", "--venv", str(venv), "--", *offline_install(house, "torch==2.13.1")
    )
    assert code == 1 and "cpu" not in out and out.count("unknown") == 1, out


@pytest.mark.slow
def test_pip_reads_the_build_from_torchs_pins(
    tmp_path: Path, house: Path, pip_venv_at: PipVenv
) -> None:
    """pip's report carries torch's requirements: the pins say cu130, as they did before."""
    venv = pip_venv_at(tmp_path / "venv")  # python -m venv: ships pip, offline
    uv_install(venv, house, "torch==2.13.0")
    pip = ["pip", "install", "--no-index", "--find-links", str(house), "torch==2.14.1"]
    doc = _json("preflight", "--venv", str(venv), "--", *pip)
    assert _torch_reason(doc) == "would replace torch 2.13.0+cu130 with 2.14.1+cu130"
    assert _torch(doc)["why"].startswith("another release, CUDA build 13.0:")


def _keys(doc: dict[str, Any]) -> list[Key]:
    return sorted((c["severity"], c["area"], c["subject"]) for c in doc["changes"])


@pytest.mark.parametrize(
    ("journaled", "reqs"),
    [
        # requirements tie these together: one install group, journaled or not
        (False, UPGRADE),
        # accelerate is tied to none of them: only the journal makes the command one group,
        # as a forecast's plan is
        (True, (*UPGRADE, "accelerate==1.12.0")),
    ],
)
def test_the_forecast_is_the_diff_the_install_leaves(
    venv: Path, house: Path, journaled: bool, reqs: tuple[str, ...]
) -> None:
    """Forecast, install the same thing with uv, diff: the same changes, the torch-family
    packages the install brings new (torchvision, torchaudio) included."""
    assert invoke("snapshot", "--venv", str(venv))[0] == 0
    forecast = _preflight(venv, house, *reqs)
    if journaled:
        code, out, err = invoke("run", "--venv", str(venv), "--", *offline_install(house, *reqs))
        assert code == 0, out + err
    else:
        uv_install(venv, house, *reqs)
    real = _json("diff", "--venv", str(venv))
    assert _keys(forecast) == _keys(real), (_keys(forecast), _keys(real))
    assert Counter(c["severity"] for c in forecast["changes"]) == Counter(
        c["severity"] for c in real["changes"]
    )
    assert {"torchvision", "torchaudio"} <= {c["subject"] for c in forecast["changes"]}
    assert _torch(forecast)["new"] == _torch(real)["new"] == "2.14.1+cu130"


def test_both_names_of_the_cu13_runtime_are_one_wheel_to_snapshot_and_forecast(
    venv: Path, house: Path, tmp_path: Path
) -> None:
    """nvidia-cuda-runtime and nvidia-cuda-runtime-cu13 side by side: the snapshot names the
    runtime's wheel by preflight's rule, so the forecast of an install that moves it is the
    next snapshot's runtime, wheel and all. The probe named the other one (#22)."""
    uv_install(venv, house, "nvidia-cuda-runtime-cu13==13.0.48")
    before = _runtime(venv, tmp_path / "before.envguard.toml")
    assert (before.version, before.wheel) == ("13.0", "nvidia-cuda-runtime-cu13")
    lock = lockfile.read(tmp_path / "before.envguard.toml")
    move = [preflight.Planned(name="nvidia-cuda-runtime-cu13", version="13.1.80")]
    forecast = preflight.predict(lock, move).cuda.runtime
    uv_install(venv, house, "nvidia-cuda-runtime-cu13==13.1.80")
    after = _runtime(venv, tmp_path / "after.envguard.toml")
    assert forecast and (forecast.version, forecast.wheel) == (after.version, after.wheel)
    assert after.wheel == "nvidia-cuda-runtime-cu13" and after.version == "13.1"
    # an install that leaves the runtime alone forecasts it unchanged
    stays = preflight.predict(lock, [preflight.Planned(name="torch", version="2.13.1")])
    assert stays.cuda.runtime == lock.cuda.runtime


def _runtime(venv: Path, lock: Path) -> CudaLibrary:
    assert invoke("snapshot", "--venv", str(venv), "-o", str(lock), "-q")[0] == 0
    runtime = lockfile.read(lock).cuda.runtime
    assert runtime is not None
    return runtime


@pytest.mark.parametrize(
    ("wheels", "cuda"),
    [
        ({"nvidia-cuda-runtime": "13.0.96", "nvidia-cudnn-cu13": "9.19.0.56"}, "13.0"),
        ({"nvidia-cuda-runtime-cu12": "12.8.90"}, "12.8"),
        # cu13's two spellings: the -cu13 one, as the CUDA probe names the owner
        ({"nvidia-cuda-runtime": "13.1.80", "nvidia-cuda-runtime-cu13": "13.0.96"}, "13.0"),
        # two CUDA majors: which one torch takes, the wheels cannot say
        ({"nvidia-cuda-runtime-cu12": "12.8.90", "nvidia-cuda-runtime": "13.0.96"}, None),
        ({"nvidia-cudnn-cu13": "9.19.0.56"}, None),
    ],
)
def test_which_cuda_a_set_of_wheels_provides(wheels: dict[str, str], cuda: str | None) -> None:
    assert preflight.wheels_cuda(wheels) == cuda


def test_a_major_picks_among_runtimes() -> None:
    both = {"nvidia-cuda-runtime-cu12": "12.8.90", "nvidia-cuda-runtime": "13.0.96"}
    assert preflight.wheels_cuda(both, "13") == "13.0"
    assert preflight.wheels_cuda(both, "12") == "12.8"
    assert preflight.wheels_cuda(both, "11") is None
    assert preflight.wheels_major({"nvidia-cudnn-cu13": "9.20.0.48"}) == "13"
    assert preflight.wheels_major({"nvidia-cudnn-cu13": "9", "nvidia-nccl-cu12": "2"}) is None
    assert preflight.wheels_major({"nvidia-cublas": "13.1.0.3"}) is None
