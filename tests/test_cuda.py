from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from envguard.demo.wheels import cudart_header, cudnn_header, nccl_header
from envguard.model import Distribution
from envguard.probes import cuda


def _site(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


H200_SITE = {
    "nvidia/cu13/include/cuda_runtime_api.h": cudart_header(13000),
    "nvidia/cudnn/include/cudnn_version.h": cudnn_header(9, 19, 0),
    "nvidia/nccl/include/nccl.h": nccl_header(2, 28, 9),
}
H200_WHEELS = [
    Distribution(name="nvidia-cuda-runtime", version="13.0.96"),
    Distribution(name="nvidia-cudnn-cu13", version="9.19.0.56"),
    Distribution(name="nvidia-nccl-cu13", version="2.28.9"),
    Distribution(name="numpy", version="2.3.0"),
]


def test_reads_the_wheel_headers_torch_loads(tmp_path: Path) -> None:
    stack, warnings = cuda.probe(
        (_site(tmp_path / "site", H200_SITE),), H200_WHEELS, torch_cuda="13.0", system_roots=()
    )
    assert stack.runtime and (stack.runtime.version, stack.runtime.wheel) == (
        "13.0",
        "nvidia-cuda-runtime",
    )
    assert stack.cudnn and (stack.cudnn.version, stack.cudnn.wheel) == (
        "9.19.0",
        "nvidia-cudnn-cu13",
    )
    assert stack.nccl and stack.nccl.version == "2.28.9"
    assert stack.wheels == {
        "nvidia-cuda-runtime": "13.0.96",
        "nvidia-cudnn-cu13": "9.19.0.56",
        "nvidia-nccl-cu13": "2.28.9",
    }
    assert warnings == ()


def test_flags_a_system_cudnn_that_differs(tmp_path: Path) -> None:
    """The H200's /usr/lib has cuDNN 9.14.0; collect_env names it, torch loads 9.19.0."""
    system = tmp_path / "usr"
    libdir = system / "lib" / "x86_64-linux-gnu"
    libdir.mkdir(parents=True)
    (libdir / "libcudnn.so.9.14.0").write_bytes(b"")
    stack, warnings = cuda.probe(
        (_site(tmp_path / "site", H200_SITE),),
        H200_WHEELS,
        torch_cuda="13.0",
        system_roots=[str(system)],
    )
    assert [lib.version for lib in stack.system] == ["9.14.0"]
    assert len(warnings) == 1
    assert "system cuDNN 9.14.0" in warnings[0] and "cuDNN 9.19.0 torch loads" in warnings[0]


def test_same_release_is_not_flagged(tmp_path: Path) -> None:
    system = tmp_path / "cuda"
    system.mkdir()
    (system / "version.json").write_text('{"cuda": {"version": "13.0.88"}}')
    _, warnings = cuda.probe(
        (_site(tmp_path / "site", H200_SITE),),
        H200_WHEELS,
        torch_cuda="13.0",
        system_roots=[str(system)],
    )
    assert warnings == ()


def test_cu12_and_cu13_side_by_side_follow_torch(tmp_path: Path) -> None:
    site = _site(
        tmp_path,
        {**H200_SITE, "nvidia/cuda_runtime/include/cuda_runtime_api.h": cudart_header(12080)},
    )
    dists = [*H200_WHEELS, Distribution(name="nvidia-cuda-runtime-cu12", version="12.8.90")]
    old, _ = cuda.probe((site,), dists, torch_cuda="12.8", system_roots=())
    new, _ = cuda.probe((site,), dists, torch_cuda="13.0", system_roots=())
    assert old.runtime and (old.runtime.version, old.runtime.wheel) == (
        "12.8",
        "nvidia-cuda-runtime-cu12",
    )
    assert new.runtime and new.runtime.version == "13.0"


def test_a_wheel_of_the_runtime_is_named_by_preflights_rule(tmp_path: Path) -> None:
    """Both names of cu13's runtime installed: the probe names the one ``owner`` names,
    which preflight forecasts by (#22); a cuDNN add-on is no cuDNN wheel."""
    extra = [
        Distribution(name="nvidia-cuda-runtime-cu13", version="13.0.48"),
        Distribution(name="nvidia-cudnn-frontend", version="1.15.0"),
    ]
    dists = [*H200_WHEELS, *extra]
    stack, _ = cuda.probe((_site(tmp_path, H200_SITE),), dists, torch_cuda="13.0", system_roots=())
    wheels = {d.name: d.version for d in dists}
    assert stack.runtime and stack.runtime.wheel == "nvidia-cuda-runtime-cu13"
    assert stack.runtime.wheel == cuda.owner(wheels, "nvidia-cuda-runtime", "13")
    assert stack.cudnn and stack.cudnn.wheel == "nvidia-cudnn-cu13"
    assert cuda.owner({"nvidia-cudnn-frontend": "1.15.0"}, "nvidia-cudnn", "13") is None


def test_no_cuda_at_all(tmp_path: Path) -> None:
    stack, warnings = cuda.probe((tmp_path,), [], system_roots=())
    assert (stack.runtime, stack.cudnn, stack.nccl, stack.wheels) == (None, None, None, {})
    assert warnings == ()


@given(major=st.integers(9, 14), minor=st.integers(0, 9))
def test_cudart_version(major: int, minor: int) -> None:
    assert cuda.cudart_version(major * 1000 + minor * 10) == f"{major}.{minor}"


@given(st.integers(0, 99), st.integers(0, 99), st.integers(0, 99))
def test_header_defines_round_trip(tmp_path_factory, a: int, b: int, c: int) -> None:
    path = tmp_path_factory.mktemp("h") / "nccl.h"
    path.write_text(nccl_header(a, b, c))
    defines = cuda.header_defines(path)
    assert (defines["NCCL_MAJOR"], defines["NCCL_MINOR"], defines["NCCL_PATCH"]) == (a, b, c)
