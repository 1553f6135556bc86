from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envguard.probes import gpu

H200_PROC = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  "
    "(dvs-builder@U22-I3-AF03-09-1)  Thu Oct 30 09:50:51 UTC 2025\n"
    "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04.2)\n"
)


def test_driver_from_proc() -> None:
    assert gpu.parse_proc_version(H200_PROC) == "580.159.04"
    legacy = (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023"
    )
    assert gpu.parse_proc_version(legacy) == "535.104.05"
    assert gpu.parse_proc_version("garbage") is None


def test_nvidia_smi_csv() -> None:
    text = (
        "0, NVIDIA H200, GPU-5c1f0b1e-aaaa-bbbb-cccc-000000000000, 9.0, 143771, 580.159.04\n"
        "1, NVIDIA H200, GPU-5c1f0b1e-aaaa-bbbb-cccc-000000000001, 9.0, 143771, 580.159.04\n"
    )
    driver, gpus = gpu.parse_smi_csv(text)
    assert driver == "580.159.04"
    assert [(g.index, g.name, g.compute_capability, g.memory_mib) for g in gpus] == [
        (0, "NVIDIA H200", "9.0", 143771),
        (1, "NVIDIA H200", "9.0", 143771),
    ]


def test_no_gpu_is_a_normal_state(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(gpu, "_from_nvml", lambda: None)
    monkeypatch.setattr(gpu, "_from_smi", lambda: None)
    state = gpu.probe(proc_version=tmp_path / "absent")
    assert (state.driver, state.source, state.gpus) == (None, "none", ())


def test_proc_driver_wins_over_smi(tmp_path: Path, monkeypatch) -> None:
    proc = tmp_path / "version"
    proc.write_text(H200_PROC)
    monkeypatch.setattr(gpu, "_from_nvml", lambda: None)
    monkeypatch.setattr(
        gpu, "_from_smi", lambda: gpu.parse_smi_csv("0, NVIDIA H200, GPU-x, 9.0, 143771, 580.1\n")
    )
    state = gpu.probe(proc_version=proc)
    assert (state.driver, state.source, len(state.gpus)) == ("580.159.04", "nvidia-smi", 1)


@given(
    driver=st.from_regex(r"[1-9][0-9]{2}\.[0-9]{1,3}(\.[0-9]{2})?", fullmatch=True),
    module=st.sampled_from(
        [
            "NVIDIA UNIX Open Kernel Module for x86_64",
            "NVIDIA UNIX x86_64 Kernel Module",
            "NVIDIA UNIX Open Kernel Module for aarch64",
        ]
    ),
)
def test_proc_version_round_trip(driver: str, module: str) -> None:
    text = f"NVRM version: {module}  {driver}  Release Build  (builder@host)  Thu Oct 30 2025\n"
    assert gpu.parse_proc_version(text) == driver


@given(
    st.lists(
        st.tuples(
            st.from_regex(r"NVIDIA [A-Z][0-9]{2,3}( [A-Z]{3})?", fullmatch=True),
            st.integers(1, 200_000),
        ),
        min_size=1,
        max_size=8,
    )
)
@pytest.mark.slow
def test_smi_csv_round_trip(gpus: list[tuple[str, int]]) -> None:
    text = "".join(
        f"{i}, {name}, GPU-{i:04d}, 9.0, {mem}, 580.1\n" for i, (name, mem) in enumerate(gpus)
    )
    _, parsed = gpu.parse_smi_csv(text)
    assert [(g.name, g.memory_mib) for g in parsed] == gpus
